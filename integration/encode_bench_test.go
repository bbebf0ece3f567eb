package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/plugins/builtin/pca/pcaenc"
	"github.com/ldpsql/ldpsql/udf"
)

// privatizeRuns numbers the benchmark's ldp_privatize destinations.
var privatizeRuns int

// BenchmarkLDPEncodePCA60k compares the release of 60,000 rows of 784 features through SQL
// (SELECT LDP_ENCODE(f, 1, 'pca8') FROM t: GMS, DuckDB, the pca plugin process (shared memory, gRPC control) in batches of
// 4,096, the host randomiser) with the same encoding and randomisation in process (pcaenc.Model.Encode
// and the same randomiser, no SQL, no plugin process). Target: SQL ≥ 50% of in-process throughput.
// sql_wire runs the SQL one through a real server and MySQL client; scan_only is SELECT f FROM t.
//
//	go test -run '^$' -bench LDPEncodePCA60k -benchtime 3x ./integration/
func BenchmarkLDPEncodePCA60k(b *testing.B) {
	const n, dim = 60_000, 784
	rng := rand.New(rand.NewSource(1))
	rows := make([][]float32, n)
	for i := range rows {
		rows[i] = make([]float32, dim)
		for j := range rows[i] {
			rows[i][j] = rng.Float32()
		}
	}
	dbPath := filepath.Join(b.TempDir(), "bench.duckdb")
	e, err := engine.Open(dbPath)
	if err != nil {
		b.Fatal(err)
	}
	engineOpen := true
	defer func() {
		if engineOpen {
			e.Close()
		}
	}()
	if _, err := udf.Install(e, udf.Config{PluginDir: filepath.Dir(ldpsqlBin)}); err != nil {
		b.Fatal(err)
	}
	run := func(q string) {
		ctx := e.NewContext(context.Background())
		_, iter, _, err := e.GMS.Query(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		count := 0
		for {
			if _, err := iter.Next(ctx); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
			count++
		}
		iter.Close(ctx)
	}
	run("CREATE TABLE t (id INT PRIMARY KEY, f LONGBLOB)")
	ins, err := e.DuckDB.Prepare(`INSERT INTO ldpsql.t VALUES (?, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	tx, _ := e.DuckDB.Begin()
	for i, r := range rows {
		if _, err := tx.Stmt(ins).Exec(int32(i), udf.PackVector(r)); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	run(`CALL ldp_fit_mechanism('pca8', 'pca', 't', 'f', '{"d": 8, "l": 10}')`)
	model, err := pcaenc.FitRows(mustParams(b, `{"d": 8, "l": 10}`), rows)
	if err != nil {
		b.Fatal(err)
	}
	rnd, err := mechanisms.NewRandomiser("laplace", mechanisms.L1Ball{D: 8, Radius: 10}, 1)
	if err != nil {
		b.Fatal(err)
	}

	b.Run("sql", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			run("SELECT LDP_ENCODE(f, 1, 'pca8') FROM t")
		}
		b.ReportMetric(n*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("scan_only", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			run("SELECT f FROM t")
		}
		b.ReportMetric(n*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("in_process", func(b *testing.B) {
		x := make([]float64, 8)
		for i := 0; i < b.N; i++ {
			for start := 0; start < n; start += udf.BatchSize {
				src := mechanisms.NewCryptoSource() // as the host does, one per batch
				end := min(start+udf.BatchSize, n)
				enc, err := model.Encode(rows[start:end])
				if err != nil {
					b.Fatal(err)
				}
				for _, z := range enc {
					for j, v := range z {
						x[j] = float64(v)
					}
					if _, err := rnd.Randomise(x, src); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		b.ReportMetric(n*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("ldp_privatize", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			privatizeRuns++ // a fresh destination for every run, -count included
			run(fmt.Sprintf(`CALL ldp_privatize('t', 'f', '', 'priv%d', 1.0, 1, 'pca8', 'laplace', 0)`, privatizeRuns))
		}
		b.ReportMetric(n*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	// The same SELECT through `ldpsql serve` on the same DuckDB file and a MySQL client on loopback: the
	// wire adds the encoding and sending of 60,000 result rows.
	if err := e.Close(); err != nil {
		b.Fatal(err)
	}
	engineOpen = false
	db := startServer(b, dbPath).connect("root", "")
	b.Run("sql_wire", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			rows, err := db.Query("SELECT LDP_ENCODE(f, 1, 'pca8') FROM t")
			if err != nil {
				b.Fatal(err)
			}
			count := 0
			var rel []byte
			for rows.Next() {
				if err := rows.Scan(&rel); err != nil {
					b.Fatal(err)
				}
				count++
			}
			if err := rows.Err(); err != nil || count != n {
				b.Fatalf("%d rows, %v", count, err)
			}
			rows.Close()
		}
		b.ReportMetric(n*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}

func mustParams(b *testing.B, s string) pcaenc.Params {
	p, err := pcaenc.ParseParams(json.RawMessage(s))
	if err != nil {
		b.Fatal(err)
	}
	return p
}
