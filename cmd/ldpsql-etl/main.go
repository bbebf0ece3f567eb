// Command ldpsql-etl privatises row files at scale on Apache Beam (package beam): `ldpsql-etl
// privatize`, which `ldpsql etl privatize` runs. It is a binary of its own so that ldpsql itself does
// not link Beam and its runners (see README, "Privatising at scale on Apache Beam").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	ldpbeam "github.com/ldpsql/ldpsql/beam"
	"github.com/ldpsql/ldpsql/mechanisms"
)

const usage = `Usage: ldpsql etl privatize [flags]   (or ldpsql-etl privatize [flags])

Release every row of the files --in matches (CSV or Parquet, by each file's extension; a glob such as
'data/part-*.parquet') with a published mechanism file, as ldpsql privatize does one file, on Apache
Beam: in this process on Prism (the default), or on a Flink or Spark cluster through its Beam job
server (--runner flink --endpoint HOST:PORT). Each row's features are encoded, clipped into the
mechanism's declared set and released with the randomiser's noise (crypto/rand) at λ·eps, its label by
k-RR at (1 − λ)·eps; without --label, the features at eps.

--out is a new directory: releases.parquet (or releases-00000… with --shards), each file with ldpsql
privatize's metadata so that ldpsql import-releases takes it; bad_rows.jsonl, the rows left out (a NaN,
the wrong number of features, a label out of range, a cell that is not a number) by file and row; and
_SUMMARY.json. Nothing is final there until every file is written.

Flags:
`

func main() {
	// Beam's own flags first: a remote runner starts this binary as its workers with them.
	flag.Parse()
	beam.Init()
	if err := run(flag.Args(), os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "ldpsql etl:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "privatize" && args[0] != "privatise" {
		fmt.Fprint(stderr, usage)
		return errors.New("the one command is privatize")
	}
	fs := flag.NewFlagSet("ldpsql etl privatize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
		fmt.Fprint(stderr, `
Examples:
  ldpsql etl privatize --mechanism vlm_cdp.ldpm --in 'data/part-*.parquet' --id id --label y --k 10 --eps 4 --lambda 0.7 --out out/
  ldpsql etl privatize --mechanism my_pca.ldpm --in 'rows-*.csv' --features f1,f2,f3 --eps 8 --out out/ --format csv
  ldpsql etl privatize --mechanism my_pca.ldpm --in '/shared/data/part-*.parquet' --label y --eps 4 --out /shared/out \
      --runner flink --endpoint flink-jobserver:8099 --environment-type DOCKER
`)
	}
	mechPath := fs.String("mechanism", "", "mechanism file (.ldpm, from ldpsql mechanisms export)")
	in := fs.String("in", "", "input files, a glob (quote it): .csv with a header or .parquet")
	features := fs.String("features", "", "feature columns, comma-separated, in order (default: every column but --id and --label)")
	idCol := fs.String("id", "", "a column copied to the output as it is (a row id; never privatised)")
	labelCol := fs.String("label", "", "a label column (integers 0..k−1), released by k-RR")
	k := fs.Int("k", 2, "label classes")
	eps := fs.Float64("eps", 0, "total ε of each row's release")
	lambda := fs.Float64("lambda", 0.7, "share of eps for the features when --label is given")
	randomiser := fs.String("randomiser", mechanisms.RandomiserLaplace, "laplace, duchi or privunit")
	out := fs.String("out", "", "output directory (new, or without releases in it)")
	format := fs.String("format", "parquet", "output format: parquet or csv")
	shards := fs.Int("shards", 1, "release files to write (each importable on its own)")
	runner := fs.String("runner", "prism", "prism (in process), flink, spark or universal (a Beam job server)")
	endpoint := fs.String("endpoint", "", "the job server's HOST:PORT (flink, spark, universal)")
	envType := fs.String("environment-type", "", "how a remote runner runs the workers: DOCKER (Beam's default), PROCESS, EXTERNAL or LOOPBACK")
	verbose := fs.Bool("verbose", false, "show the runner's log")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *mechPath == "" || *in == "" || *out == "" || !(*eps > 0) {
		fs.Usage()
		return errors.New("--mechanism, --in, --eps and --out are required")
	}
	if *format != "parquet" && *format != "csv" {
		return fmt.Errorf("--format %q: want parquet or csv", *format)
	}
	if !*verbose {
		slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	}
	raw, err := os.ReadFile(*mechPath)
	if err != nil {
		return err
	}
	job := ldpbeam.Job{In: *in, Cols: ldpbeam.Columns{ID: *idCol, Label: *labelCol},
		Spec: ldpbeam.Spec{Mechanism: raw, Randomiser: *randomiser, Eps: *eps, Label: *labelCol, K: *k, Lambda: *lambda},
		Out:  ldpbeam.Output{Dir: *out, Format: *format, Shards: *shards}, Runner: *runner, Endpoint: *endpoint, EnvironmentType: *envType}
	if *features != "" {
		for f := range strings.SplitSeq(*features, ",") {
			job.Cols.Features = append(job.Cols.Features, strings.TrimSpace(f))
		}
	}
	rel, err := job.Spec.Releaser()
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	done := make(chan struct{})
	if *runner == "prism" {
		// Progress: Prism runs the workers in this process, so their counters are the job's.
		go func() {
			tick := time.NewTicker(2 * time.Second)
			defer tick.Stop()
			for {
				select {
				case <-done:
					return
				case <-tick.C:
					read, released, bad := ldpbeam.Progress()
					fmt.Fprintf(stderr, "  %s: read %d rows, released %d, bad %d (%.0f rows/s)\n", time.Since(start).Round(time.Second), read, released, bad, float64(released)/time.Since(start).Seconds())
				}
			}
		}()
	}
	sum, err := ldpbeam.Run(ctx, job)
	close(done)
	if err != nil {
		return err
	}
	took := time.Since(start)
	fmt.Fprintf(stdout, "released %d rows with %q at ε = %g (features %.6g, label %.6g) in %v (%.0f rows/s) on %s: %s\n",
		sum.Rows, rel.M.File.Name, *eps, rel.EpsX, rel.EpsY, took.Round(time.Millisecond), float64(sum.Rows)/took.Seconds(), *runner, strings.Join(sum.Files, ", "))
	if sum.Bad > 0 {
		fmt.Fprintf(stdout, "%d bad rows left out, listed in %s\n", sum.Bad, sum.BadFile)
	}
	return nil
}
