package udf_test

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/udf"
)

// BenchmarkLabels1M compares a plain scan of 1M labels with the same scan through FLIP_LABEL, both via
// SQL in process, draining every row. The target is flip_label ≤ 1.3 × plain.
//
//	go test -run '^$' -bench Labels1M -benchtime 5x ./udf/
func BenchmarkLabels1M(b *testing.B) {
	const n = 1_000_000
	e, err := engine.Open(engine.MemoryPath, engine.WithFunctions(udf.Functions()...))
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	if _, _, err := e.Query(e.NewContext(context.Background()), "CREATE TABLE labels (id BIGINT PRIMARY KEY, y INT)"); err != nil {
		b.Fatal(err)
	}
	if _, err := e.DuckDB.Exec(fmt.Sprintf(`INSERT INTO ldpsql.labels SELECT range, (range %% 10)::INTEGER FROM range(%d)`, n)); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct{ name, query string }{
		{"plain", "SELECT y FROM labels"},
		{"arithmetic", "SELECT y + 1 FROM labels"}, // the cost of any computed column in GMS, for scale
		{"flip_label", "SELECT FLIP_LABEL(y, 1.0, 10) FROM labels"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				ctx := e.NewContext(context.Background())
				_, iter, _, err := e.GMS.Query(ctx, tc.query)
				if err != nil {
					b.Fatal(err)
				}
				rows := 0
				for {
					if _, err := iter.Next(ctx); err == io.EOF {
						break
					} else if err != nil {
						b.Fatal(err)
					}
					rows++
				}
				iter.Close(ctx)
				if rows != n {
					b.Fatalf("%d rows", rows)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
