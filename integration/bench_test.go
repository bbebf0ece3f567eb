package integration

import (
	"database/sql"
	"path/filepath"
	"testing"
)

// BenchmarkWireLabels1M compares, through a real `ldpsql serve` process and go-sql-driver/mysql over
// loopback, a plain SELECT of 1M labels with the same SELECT through FLIP_LABEL. Target: flip_label ≤
// 1.3 × plain.
//
//	go test -run '^$' -bench WireLabels1M -benchtime 3x ./integration/
func BenchmarkWireLabels1M(b *testing.B) {
	const n = 1_000_000
	s := startServer(b, filepath.Join(b.TempDir(), "bench.duckdb"))
	db := s.connect("root", "")
	if _, err := db.Exec("CREATE TABLE labels (id BIGINT PRIMARY KEY, y INT)"); err != nil {
		b.Fatal(err)
	}
	// Fill through SQL in statements of 10,000 rows.
	for start := 0; start < n; start += 10_000 {
		if _, err := db.Exec(insertLabelsSQL(start, 10_000)); err != nil {
			b.Fatal(err)
		}
	}
	for _, tc := range []struct{ name, query string }{
		{"plain", "SELECT y FROM labels"},
		{"flip_label", "SELECT FLIP_LABEL(y, 1.0, 10) FROM labels"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if got := drain(b, db, tc.query); got != n {
					b.Fatalf("%d rows", got)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

func drain(b *testing.B, db *sql.DB, query string) int {
	rows, err := db.Query(query)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	count := 0
	var y int64
	for rows.Next() {
		if err := rows.Scan(&y); err != nil {
			b.Fatal(err)
		}
		count++
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return count
}
