package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkInsert measures INSERT throughput into a DuckDB-file-backed table through GMS:
//
//	go test -run '^$' -bench Insert -benchtime 10x ./engine/
//
// multi_row_10k: one INSERT ... VALUES statement of 10,000 rows (parsing included);
// insert_select_100k: INSERT INTO ... SELECT of 100,000 rows (the storage path alone).
func BenchmarkInsert(b *testing.B) {
	e, err := Open(filepath.Join(b.TempDir(), "bench.duckdb"))
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	q := func(query string) {
		if _, _, err := e.Query(e.NewContext(context.Background()), query); err != nil {
			b.Fatal(err)
		}
	}
	q("CREATE TABLE t (id BIGINT PRIMARY KEY, y INT, x DOUBLE, s VARCHAR(20))")
	q("CREATE TABLE src (id BIGINT PRIMARY KEY, y INT, x DOUBLE, s VARCHAR(20))")
	if _, err := e.DuckDB.Exec(`INSERT INTO ldpsql.src SELECT range, (range % 10)::INTEGER, range / 3.0, 'row ' || range FROM range(100000)`); err != nil {
		b.Fatal(err)
	}
	next, batch := int64(0), 0
	b.Run("multi_row_10k", func(b *testing.B) {
		const rows = 10_000
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			var sb strings.Builder
			sb.WriteString("INSERT INTO t VALUES ")
			for r := 0; r < rows; r++ {
				if r > 0 {
					sb.WriteString(",")
				}
				fmt.Fprintf(&sb, "(%d, %d, %d.5, 'row %d')", next, next%10, next, next)
				next++
			}
			stmt := sb.String()
			b.StartTimer()
			q(stmt)
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("insert_select_100k", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			batch++
			q(fmt.Sprintf("INSERT INTO t SELECT id + %d, y, x, s FROM src", 1_000_000_000*batch))
		}
		b.ReportMetric(100_000*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}

// BenchmarkPointLookup1M measures WHERE id = ? on 1M rows with the primary-key pushdown (the filter runs
// in DuckDB on its ART index) against the same table without a key (GMS scans and filters every row, as
// every table did before the pushdown):
//
//	go test -run '^$' -bench PointLookup1M ./engine/
func BenchmarkPointLookup1M(b *testing.B) {
	e, err := Open(MemoryPath)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	for _, ddl := range []string{
		"CREATE TABLE keyed (id BIGINT PRIMARY KEY, v INT)",
		"CREATE TABLE unkeyed (id BIGINT, v INT)",
	} {
		if _, _, err := e.Query(e.NewContext(context.Background()), ddl); err != nil {
			b.Fatal(err)
		}
	}
	for _, tbl := range []string{"keyed", "unkeyed"} {
		if _, err := e.DuckDB.Exec(`INSERT INTO ldpsql.` + tbl + ` SELECT range, (range % 1000)::INTEGER FROM range(1000000)`); err != nil {
			b.Fatal(err)
		}
	}
	for _, tc := range []struct{ name, table string }{{"primary_key", "keyed"}, {"full_scan", "unkeyed"}} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				id := (i * 7919) % 1_000_000
				_, rows, err := e.Query(e.NewContext(context.Background()), fmt.Sprintf("SELECT v FROM %s WHERE id = %d", tc.table, id))
				if err != nil || len(rows) != 1 {
					b.Fatalf("%v %v", rows, err)
				}
			}
		})
	}
}
