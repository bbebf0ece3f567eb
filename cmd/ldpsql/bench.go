package main

import (
	"bytes"
	"context"
	gosql "database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql" // the wire benchmarks are a real MySQL client
	"github.com/sirupsen/logrus"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/internal/benchdata"
	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/plugins/builtin/pca/pcaenc"
	"github.com/ldpsql/ldpsql/udf"
)

func benchCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "load" {
		return benchLoadCmd(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "etl" {
		return benchETLCmd(args[1:], stdout, stderr)
	}
	fs := newFlagSet("bench", "Measure ldpsql's throughput on this machine: INSERT rows/s into a DuckDB file, LOAD DATA LOCAL\nrows/s over the MySQL protocol, pandas' to_sql rows/s, a scan of --rows labels plain vs through FLIP_LABEL, in process and\nover the MySQL protocol on loopback, and LDP_ENCODE through the built-in pca plugin against the same encoding in process (needs scripts/build.sh).",
		`  ldpsql bench
  ldpsql bench --rows 200000
  ldpsql bench load --clients 16 --duration 30s    (concurrent clients: see ldpsql bench load --help)
  ldpsql bench etl                                  (ldp_privatize against ldpsql-etl on Prism: see ldpsql bench etl --help)
`, stderr)
	n := fs.Int("rows", 1_000_000, "rows in the scan benchmark")
	repeat := fs.Int("repeat", 3, "timed repetitions of each scan (the best is reported)")
	encodeRows := fs.Int("encode-rows", 60_000, "rows of 784 features in the LDP_ENCODE benchmark")
	pandasRows := fs.Int("pandas-rows", 50_000, "rows pandas' to_sql writes (needs python3-pandas, python3-sqlalchemy, python3-pymysql)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 1 || *repeat < 1 || *encodeRows < 1 || *pandasRows < 1 {
		return fmt.Errorf("--rows, --repeat, --encode-rows and --pandas-rows must be at least 1")
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
	if err := benchInserts(e, q, stdout); err != nil {
		return err
	}
	if err := q("CREATE TABLE labels (id BIGINT PRIMARY KEY, y INT)"); err != nil {
		return err
	}
	if _, err := e.DuckDB.Exec(fmt.Sprintf(`INSERT INTO ldpsql.labels SELECT range, (range %% 10)::INTEGER FROM range(%d)`, *n)); err != nil {
		return err
	}
	plain, flip := "SELECT y FROM labels", "SELECT FLIP_LABEL(y, 1.0, 10) FROM labels"
	inProcess := func(query string) (time.Duration, error) {
		return best(*repeat, func() (int, error) { return drainQuery(e, query) }, *n)
	}
	if err := compare(stdout, fmt.Sprintf("scan of %d labels, in process", *n), *n, inProcess, plain, flip); err != nil {
		return err
	}

	db, addr, stop, err := serveLoopback(e, "")
	if err != nil {
		return err
	}
	defer stop()
	overWire := func(query string) (time.Duration, error) {
		return best(*repeat, func() (int, error) { return drainWire(db, query) }, *n)
	}
	if err := compare(stdout, fmt.Sprintf("scan of %d labels, MySQL protocol on loopback", *n), *n, overWire, plain, flip); err != nil {
		return err
	}
	if err := benchLoadData(db, stdout, *repeat); err != nil {
		return err
	}
	if err := benchPandas(addr, stdout, *pandasRows); errors.Is(err, errPandasMissing) {
		fmt.Fprintf(stdout, "%v\n\n", err) // the rest of the report stands without it
	} else if err != nil {
		return err
	}
	return benchEncode(e, stdout, *encodeRows, *repeat)
}

// benchInserts measures INSERT … SELECT of 100,000 rows and one INSERT … VALUES of 10,000 into a
// table with a primary key: GMS plans and converts every row; the table editor streams them through
// DuckDB's appender.
func benchInserts(e *engine.Engine, q func(string) error, stdout io.Writer) error {
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
	return nil
}

// drainWire runs query over the MySQL protocol and reads its one integer column to the end, returning
// the rows read.
func drainWire(db *gosql.DB, query string) (int, error) {
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
}

// benchLoadData measures LOAD DATA LOCAL INFILE of a 100,000-row, 10-column numeric CSV over the MySQL
// protocol (go-sql-driver sends the file), into a fresh table each time; the best of repeat is reported.
func benchLoadData(db *gosql.DB, w io.Writer, repeat int) error {
	const n = 100_000
	data := benchdata.TenColumnCSV(n)
	mysqldrv.RegisterReaderHandler("ldpsql-bench", func() io.Reader { return bytes.NewReader(data) })
	defer mysqldrv.DeregisterReaderHandler("ldpsql-bench")
	conn, err := db.Conn(context.Background())
	if err != nil {
		return err
	}
	defer conn.Close()
	var bestD time.Duration
	for i := 0; i < repeat; i++ {
		for _, q := range []string{"DROP TABLE IF EXISTS wide", "CREATE TABLE wide (id BIGINT PRIMARY KEY, a INT, b INT, c INT, d INT, x DOUBLE, y DOUBLE, z DOUBLE, u DOUBLE, v DOUBLE)"} {
			if _, err := conn.ExecContext(context.Background(), q); err != nil {
				return err
			}
		}
		start := time.Now()
		res, err := conn.ExecContext(context.Background(), "LOAD DATA LOCAL INFILE 'Reader::ldpsql-bench' INTO TABLE wide FIELDS TERMINATED BY ','")
		if err != nil {
			return err
		}
		d := time.Since(start)
		if got, _ := res.RowsAffected(); got != n {
			return fmt.Errorf("LOAD DATA loaded %d rows, want %d", got, n)
		}
		if i == 0 || d < bestD {
			bestD = d
		}
	}
	_, _ = conn.ExecContext(context.Background(), "DROP TABLE wide")
	fmt.Fprintf(w, "LOAD DATA LOCAL INFILE, 100,000 rows x 10 numeric columns, MySQL protocol on loopback:\n")
	fmt.Fprintf(w, "  %9.0f rows/s (target >= 100,000)\n\n", n/bestD.Seconds())
	return nil
}

// benchEncode measures LDP_ENCODE through the built-in pca plugin against the same encoding and
// randomisation in process, and ldp_privatize, on rows of 784 uniform features.
func benchEncode(e *engine.Engine, w io.Writer, n, repeat int) error {
	if _, err := e.Catalog.Mechanism(context.Background(), "pca"); err != nil {
		fmt.Fprintln(w, "LDP_ENCODE: skipped, the built-in pca plugin is not beside this binary (build with scripts/build.sh)")
		return nil
	}
	const dim = 784
	rng := rand.New(rand.NewPCG(1, 2))
	rows := make([][]float32, n)
	for i := range rows {
		rows[i] = make([]float32, dim)
		for j := range rows[i] {
			rows[i][j] = rng.Float32()
		}
	}
	if _, _, err := e.Query(e.NewContext(context.Background()), "CREATE TABLE vecs (id INT PRIMARY KEY, f LONGBLOB)"); err != nil {
		return err
	}
	tx, err := e.DuckDB.Begin()
	if err != nil {
		return err
	}
	for i, r := range rows {
		if _, err := tx.Exec(`INSERT INTO ldpsql.vecs VALUES (?, ?)`, int32(i), udf.PackVector(r)); err != nil {
			tx.Rollback()
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	const params = `{"d": 8, "l": 10}`
	if _, _, err := e.Query(e.NewContext(context.Background()), "CALL ldp_fit_mechanism('bench_pca8', 'pca', 'vecs', 'f', '"+params+"')"); err != nil {
		return err
	}
	viaSQL, err := best(repeat, func() (int, error) { return drainQuery(e, "SELECT LDP_ENCODE(f, 1, 'bench_pca8') FROM vecs") }, n)
	if err != nil {
		return err
	}
	p, err := pcaenc.ParseParams(json.RawMessage(params))
	if err != nil {
		return err
	}
	model, err := pcaenc.FitRows(p, rows)
	if err != nil {
		return err
	}
	rnd, err := mechanisms.NewRandomiser(mechanisms.RandomiserLaplace, mechanisms.L1Ball{D: 8, Radius: 10}, 1)
	if err != nil {
		return err
	}
	inProcess, err := best(repeat, func() (int, error) {
		x, count := make([]float64, 8), 0
		for start := 0; start < n; start += udf.BatchSize {
			src := mechanisms.NewCryptoSource() // as the host does, one per batch
			enc, err := model.Encode(rows[start:min(start+udf.BatchSize, n)])
			if err != nil {
				return 0, err
			}
			for _, z := range enc {
				for j, v := range z {
					x[j] = float64(v)
				}
				if _, err := rnd.Randomise(x, src); err != nil {
					return 0, err
				}
				count++
			}
		}
		return count, nil
	}, n)
	if err != nil {
		return err
	}
	start := time.Now()
	if _, _, err := e.Query(e.NewContext(context.Background()), "CALL ldp_privatize('vecs', 'f', '', 'vecs_released', 1.0, 1, 'bench_pca8', 'laplace', 0)"); err != nil {
		return err
	}
	bulk := time.Since(start)
	fmt.Fprintf(w, "LDP_ENCODE with the pca encoder (d = 8), %d rows of %d features:\n", n, dim)
	fmt.Fprintf(w, "  %-45s %8.3f s  %10.0f rows/s\n", "SELECT LDP_ENCODE(f, 1, 'bench_pca8') FROM vecs", viaSQL.Seconds(), float64(n)/viaSQL.Seconds())
	fmt.Fprintf(w, "  %-45s %8.3f s  %10.0f rows/s\n", "in process (pcaenc + laplace randomiser)", inProcess.Seconds(), float64(n)/inProcess.Seconds())
	fmt.Fprintf(w, "  SQL / in process: %.0f%% (target ≥ 50%%)\n", 100*inProcess.Seconds()/viaSQL.Seconds())
	fmt.Fprintf(w, "  %-45s %8.3f s  %10.0f rows/s\n", "CALL ldp_privatize(...)", bulk.Seconds(), float64(n)/bulk.Seconds())
	return nil
}

// drainQuery runs a query in process and counts its rows without keeping them.
func drainQuery(e *engine.Engine, q string) (int, error) {
	ctx := e.NewContext(context.Background())
	_, iter, _, err := e.GMS.Query(ctx, q)
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

// serveLoopback serves e on a free loopback port and returns a go-sql-driver pool on it as root (dsn
// options such as "interpolateParams=true" appended), the address, and the function that closes both.
func serveLoopback(e *engine.Engine, options string) (*gosql.DB, string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", nil, err
	}
	srv, err := e.Serve(engine.ServerConfig{Listener: ln})
	if err != nil {
		ln.Close()
		return nil, "", nil, err
	}
	go srv.Start()
	addr := ln.Addr().String()
	db, err := gosql.Open("mysql", fmt.Sprintf("root:@tcp(%s)/ldpsql?%s", addr, options))
	if err != nil {
		srv.Close()
		return nil, "", nil, err
	}
	return db, addr, func() { db.Close(); srv.Close() }, nil
}
