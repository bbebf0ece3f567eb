package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ldpsql/ldpsql/internal/rowfile"
	"github.com/ldpsql/ldpsql/training/datasets"
	"github.com/ldpsql/ldpsql/udf"
)

// benchETLCmd is `ldpsql bench etl`: #21's scaling figure in one command. The same Fashion-MNIST rows
// are released by CALL ldp_privatize inside the server (in this process) and by `ldpsql-etl
// privatize` on Prism from Parquet files with one and with two cores, in interleaved rounds, so that
// a machine's load moves all three alike; it prints each rate as the job itself reports it, the share
// of ldp_privatize's rate the two-core job reaches and what the second core gives.
func benchETLCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench etl", `Release the same Fashion-MNIST training rows with CALL ldp_privatize inside the server (in this
process) and with ldpsql-etl privatize on Prism from Parquet files (on 1 and on 2 CPUs, each its own
process: on Linux its CPU set, which bounds DuckDB's and OpenBLAS's threads too; elsewhere GOMAXPROCS),
in interleaved rounds: PCA d = 8 (l = 20) fitted on the test images and exported as a .ldpm
file, Laplace at ε = 4, λ = 0.7, K = 10. Prints each job's own rows/s, the whole process's wall time,
the two-core job's share of ldp_privatize's rate (#21: at least 50 %) and the second core's speed-up
(#21: at least 1.6). Needs ldpsql-etl beside ldpsql (scripts/build.sh) and Fashion-MNIST.`,
		`  ldpsql bench etl
  ldpsql bench etl --rows 20000 --rounds 5
`, stderr)
	rows := fs.Int("rows", 60_000, "training rows released (at most 60,000)")
	parts := fs.Int("parts", 4, "Parquet files the rows are written to")
	rounds := fs.Int("rounds", 3, "interleaved rounds")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rows < 1 || *rows > 60_000 || *parts < 1 || *parts > *rows || *rounds < 1 {
		return fmt.Errorf("--rows must be 1..60000, --parts 1..rows and --rounds at least 1")
	}
	etl, err := etlBinary()
	if err != nil {
		return err
	}
	train, from, err := datasets.LoadFashionMNIST("train")
	if err != nil {
		return err
	}
	test, _, err := datasets.LoadFashionMNIST("test")
	if err != nil {
		return err
	}
	logrus.SetLevel(logrus.WarnLevel)
	dir, err := os.MkdirTemp("", "ldpsql-bench-etl-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, mech, lake := filepath.Join(dir, "bench.duckdb"), filepath.Join(dir, "pca8.ldpm"), filepath.Join(dir, "lake")
	n := *rows

	// The rows as a table for ldp_privatize, and as Parquet files for the ETL job.
	e, err := openEngine(db, udf.Config{})
	if err != nil {
		return err
	}
	ctx := context.Background()
	s := newEmbedded(e)
	if _, err := loadVectors(ctx, s, "bench_rows", train.Pixels[:n], train.Labels[:n]); err != nil {
		e.Close()
		return err
	}
	if _, err := loadVectors(ctx, s, "bench_aux", test.Pixels, nil); err != nil {
		e.Close()
		return err
	}
	if _, _, err := s.query(ctx, `CALL ldp_fit_mechanism('pca8', 'pca', 'bench_aux', 'features', '{"d": 8, "l": 20}')`, nil); err != nil {
		e.Close()
		return err
	}
	if err := e.Close(); err != nil {
		return err
	}
	if err := mechanismExportCmd([]string{"pca8", "--db", db, "--out", mech}, io.Discard, stderr); err != nil {
		return err
	}
	if err := writeLake(lake, *parts, train.Pixels[:n], train.Labels[:n]); err != nil {
		return err
	}
	if e, err = openEngine(db, udf.Config{}); err != nil {
		return err
	}
	defer e.Close()
	s = newEmbedded(e)

	fmt.Fprintf(stdout, "ldpsql %s bench etl: %d Fashion-MNIST training rows (784 features, from %s) in %d Parquet files;\n"+
		"PCA d = 8 (l = 20) fitted on the 10,000 test images; Laplace at ε = 4, λ = 0.7, K = 10; load average %s at the start\n",
		version, n, from, *parts, loadAverage())
	if pinsCPUs {
		fmt.Fprintf(stdout, "ldpsql-etl runs on 1 or 2 CPUs (its CPU set and GOMAXPROCS); ldp_privatize on every CPU\n\n")
	} else {
		fmt.Fprintf(stdout, "ldpsql-etl runs with GOMAXPROCS 1 or 2 (this system gives it no CPU set: DuckDB's threads may use more); ldp_privatize on every CPU\n\n")
	}
	fmt.Fprintf(stdout, "%-6s %16s %24s %24s %12s %10s\n", "round", "ldp_privatize", "ldpsql-etl, 1 core", "ldpsql-etl, 2 cores", "2 cores /", "2 cores /")
	fmt.Fprintf(stdout, "%-6s %16s %24s %24s %12s %10s\n", "", "rows/s", "rows/s (process wall)", "rows/s (process wall)", "ldp_priv.", "1 core")
	var shares, speedups []float64
	for round := 1; round <= *rounds; round++ {
		table := fmt.Sprintf("released_%d", round)
		var rate float64
		_, _, err := s.query(ctx, fmt.Sprintf("CALL ldp_privatize('bench_rows', 'features', 'label', '%s', 4, 0.7, 'pca8', 'laplace', 10)", table),
			func(cols []string, vals []any) error {
				i := slices.Index(cols, "rows_per_second")
				if i < 0 {
					return fmt.Errorf("ldp_privatize returned no rows_per_second (columns %v)", cols)
				}
				var perr error
				rate, perr = strconv.ParseFloat(fmt.Sprint(vals[i]), 64)
				return perr
			})
		if err != nil {
			return fmt.Errorf("round %d, ldp_privatize: %w", round, err)
		}
		var etlRate [3]float64
		var wall [3]time.Duration
		for _, procs := range []int{1, 2} {
			if etlRate[procs], wall[procs], err = runETLJob(etl, mech, lake, filepath.Join(dir, fmt.Sprintf("out_%d_%d", round, procs)), procs, n); err != nil {
				return fmt.Errorf("round %d, ldpsql-etl with %d core(s): %w", round, procs, err)
			}
		}
		share, speedup := etlRate[2]/rate, etlRate[2]/etlRate[1]
		shares, speedups = append(shares, share), append(speedups, speedup)
		fmt.Fprintf(stdout, "%-6d %16.0f %15.0f (%5.2f s) %15.0f (%5.2f s) %11.0f%% %9.2fx\n", round, rate,
			etlRate[1], wall[1].Seconds(), etlRate[2], wall[2].Seconds(), 100*share, speedup)
		if _, _, err := s.query(ctx, "DROP TABLE "+table, nil); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "\n2 cores / ldp_privatize: %.0f–%.0f %% over %d round(s) (#21: at least 50 %%)\n", 100*slices.Min(shares), 100*slices.Max(shares), *rounds)
	fmt.Fprintf(stdout, "2 cores / 1 core: %.2f–%.2fx (#21: linear within 20 %%, at least 1.6x)\n", slices.Min(speedups), slices.Max(speedups))
	fmt.Fprintf(stdout, "load average %s at the end\n", loadAverage())
	return nil
}

// writeLake writes the rows (id, features as a FLOAT list, label) into parts Parquet files in dir.
func writeLake(dir string, parts int, pixels [][]float32, labels []int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	n := len(pixels)
	for part := range parts {
		sink, err := rowfile.Create(filepath.Join(dir, fmt.Sprintf("part-%d.parquet", part)), []rowfile.Column{
			{Name: "id", Kind: rowfile.KindInt}, {Name: "features", Kind: rowfile.KindVector, Width: 784}, {Name: "label", Kind: rowfile.KindInt}})
		if err != nil {
			return err
		}
		for i := part * n / parts; i < (part+1)*n/parts; i++ {
			if err := sink.Write(i+1, pixels[i], labels[i]); err != nil {
				sink.Discard()
				return err
			}
		}
		if err := sink.Finish(nil); err != nil {
			return err
		}
	}
	return nil
}

var etlReleased = regexp.MustCompile(`released (\d+) rows .* \((\d+) rows/s\)`)

// runETLJob runs one ldpsql-etl privatize job on procs CPUs (on Linux its CPU set, elsewhere its
// GOMAXPROCS only) and returns the rate it reports and the whole process's wall time.
func runETLJob(etl, mech, lake, out string, procs, want int) (float64, time.Duration, error) {
	cmd := exec.Command(etl, "privatize", "--mechanism", mech, "--in", filepath.Join(lake, "part-*.parquet"),
		"--id", "id", "--label", "label", "--k", "10", "--eps", "4", "--lambda", "0.7", "--out", out)
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(procs))
	var outBuf, errBuf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outBuf, &errBuf
	start := time.Now()
	err := startOnCPUs(cmd, procs)
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		return 0, 0, fmt.Errorf("%w: %s", err, strings.TrimSpace(errBuf.String()))
	}
	wall := time.Since(start)
	m := etlReleased.FindStringSubmatch(outBuf.String())
	if m == nil {
		return 0, 0, fmt.Errorf("no 'released … rows/s' line in its output: %q", outBuf.String())
	}
	if got, _ := strconv.Atoi(m[1]); got != want {
		return 0, 0, fmt.Errorf("released %d rows, want %d", got, want)
	}
	rate, err := strconv.ParseFloat(m[2], 64)
	return rate, wall, err
}
