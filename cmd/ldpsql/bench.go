package main

import (
	"context"
	gosql "database/sql"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql" // the wire benchmark is a real MySQL client
	"github.com/sirupsen/logrus"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/udf"
)

func benchCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench", "Measure ldpsql's throughput on this machine: INSERT rows/s into a DuckDB file, and a scan\nof --rows labels plain vs through FLIP_LABEL, in process and over the MySQL protocol on loopback.",
		`  ldpsql bench
  ldpsql bench --rows 200000
`, stderr)
	n := fs.Int("rows", 1_000_000, "rows in the scan benchmark")
	repeat := fs.Int("repeat", 3, "timed repetitions of each scan (the best is reported)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 1 || *repeat < 1 {
		return fmt.Errorf("--rows and --repeat must be at least 1")
	}
	logrus.SetLevel(logrus.WarnLevel) // the server's per-connection log lines would interleave with the report
	dir, err := os.MkdirTemp("", "ldpsql-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	e, err := openEngine(filepath.Join(dir, "bench.duckdb"), udf.Config{})
	if err != nil {
		return err
	}
	defer e.Close()
	q := func(query string) error {
		_, _, err := e.Query(e.NewContext(context.Background()), query)
		return err
	}

	fmt.Fprintf(stdout, "ldpsql %s bench (DuckDB file in %s)\n\n", version, dir)
	// INSERT: GMS plans and converts every row; the table editor streams them through DuckDB's appender.
	if err := q("CREATE TABLE src (id BIGINT PRIMARY KEY, y INT, x DOUBLE, s VARCHAR(20))"); err != nil {
		return err
	}
	if err := q("CREATE TABLE dst (id BIGINT PRIMARY KEY, y INT, x DOUBLE, s VARCHAR(20))"); err != nil {
		return err
	}
	if _, err := e.DuckDB.Exec(`INSERT INTO ldpsql.src SELECT range, (range % 10)::INTEGER, range / 3.0, 'row ' || range FROM range(100000)`); err != nil {
		return err
	}
	start := time.Now()
	if err := q("INSERT INTO dst SELECT * FROM src"); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "INSERT ... SELECT, 100,000 rows:          %9.0f rows/s\n", 100_000/time.Since(start).Seconds())
	var sb strings.Builder
	sb.WriteString("INSERT INTO dst VALUES ")
	for i := 0; i < 10_000; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, "(%d, %d, %d.5, 'row %d')", 1_000_000+i, i%10, i, i)
	}
	start = time.Now()
	if err := q(sb.String()); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "INSERT ... VALUES, 10,000 rows per statement: %6.0f rows/s\n\n", 10_000/time.Since(start).Seconds())

	if err := q("CREATE TABLE labels (id BIGINT PRIMARY KEY, y INT)"); err != nil {
		return err
	}
	if _, err := e.DuckDB.Exec(fmt.Sprintf(`INSERT INTO ldpsql.labels SELECT range, (range %% 10)::INTEGER FROM range(%d)`, *n)); err != nil {
		return err
	}
	plain, flip := "SELECT y FROM labels", "SELECT FLIP_LABEL(y, 1.0, 10) FROM labels"
	inProcess := func(query string) (time.Duration, error) {
		return best(*repeat, func() (int, error) {
			ctx := e.NewContext(context.Background())
			_, iter, _, err := e.GMS.Query(ctx, query)
			if err != nil {
				return 0, err
			}
			defer iter.Close(ctx)
			count := 0
			for {
				if _, err := iter.Next(ctx); err == io.EOF {
					return count, nil
				} else if err != nil {
					return count, err
				}
				count++
			}
		}, *n)
	}
	if err := compare(stdout, fmt.Sprintf("scan of %d labels, in process", *n), *n, inProcess, plain, flip); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv, err := e.Serve(engine.ServerConfig{Listener: ln})
	if err != nil {
		return err
	}
	go srv.Start()
	defer srv.Close()
	db, err := gosql.Open("mysql", fmt.Sprintf("root:@tcp(%s)/ldpsql", ln.Addr()))
	if err != nil {
		return err
	}
	defer db.Close()
	overWire := func(query string) (time.Duration, error) {
		return best(*repeat, func() (int, error) {
			rows, err := db.Query(query)
			if err != nil {
				return 0, err
			}
			defer rows.Close()
			count := 0
			var y int64
			for rows.Next() {
				if err := rows.Scan(&y); err != nil {
					return 0, err
				}
				count++
			}
			return count, rows.Err()
		}, *n)
	}
	return compare(stdout, fmt.Sprintf("scan of %d labels, MySQL protocol on loopback", *n), *n, overWire, plain, flip)
}

// best runs f repeat times and returns the fastest duration, checking the row count each time.
func best(repeat int, f func() (int, error), want int) (time.Duration, error) {
	var fastest time.Duration
	for i := 0; i < repeat; i++ {
		start := time.Now()
		got, err := f()
		if err != nil {
			return 0, err
		}
		if got != want {
			return 0, fmt.Errorf("read %d rows, want %d", got, want)
		}
		if d := time.Since(start); i == 0 || d < fastest {
			fastest = d
		}
	}
	return fastest, nil
}

func compare(w io.Writer, title string, n int, run func(string) (time.Duration, error), plain, flip string) error {
	tp, err := run(plain)
	if err != nil {
		return err
	}
	tf, err := run(flip)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s:\n", title)
	fmt.Fprintf(w, "  %-45s %8.3f s  %10.0f rows/s\n", plain, tp.Seconds(), float64(n)/tp.Seconds())
	fmt.Fprintf(w, "  %-45s %8.3f s  %10.0f rows/s\n", flip, tf.Seconds(), float64(n)/tf.Seconds())
	fmt.Fprintf(w, "  FLIP_LABEL / plain: %.2f× (target ≤ 1.30×)\n\n", tf.Seconds()/tp.Seconds())
	return nil
}
