package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/internal/benchdata"
)

// BenchmarkLoadDataSet loads a 100,000-row, 10-column numeric CSV with server-side LOAD DATA INFILE in
// process, plain and with user variables and a SET clause (x = @x * 2 and v = NULLIF(@v, the empty
// string), as below), into a fresh table each time. Target (#18): ≥ 100,000 rows/s.
//
//	go test -run '^$' -bench LoadDataSet -benchtime 3x ./engine/
func BenchmarkLoadDataSet(b *testing.B) {
	const n = 100_000
	dir := b.TempDir()
	file := filepath.Join(dir, "wide.csv")
	if err := os.WriteFile(file, benchdata.TenColumnCSV(n), 0o644); err != nil {
		b.Fatal(err)
	}
	e, err := engine.Open(filepath.Join(dir, "bench.duckdb"), engine.WithSecureFilePriv(dir))
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	exec := func(q string) {
		if _, _, err := e.Query(e.NewContext(context.Background()), q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	for _, c := range []struct{ name, columns string }{
		{"plain", ""},
		{"set", " (id, a, b, c, d, @x, y, z, u, @v) SET x = @x * 2, v = NULLIF(@v, '')"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				exec("DROP TABLE IF EXISTS wide")
				exec("CREATE TABLE wide (id BIGINT PRIMARY KEY, a INT, b INT, c INT, d INT, x DOUBLE, y DOUBLE, z DOUBLE, u DOUBLE, v DOUBLE)")
				b.StartTimer()
				exec(fmt.Sprintf("LOAD DATA INFILE '%s' INTO TABLE wide FIELDS TERMINATED BY ','%s", file, c.columns))
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
