package rowfile

import (
	"database/sql"
	"io"
	"path/filepath"
	"testing"
)

// BenchmarkParquetLists reads a Parquet file of 15,000 rows of 784 FLOAT values (a quarter of
// Fashion-MNIST's training set, as one part of an ETL job), each row's list as float32s.
//
//	go test -run XXX -bench ParquetLists -cpu 1 ./internal/rowfile/
func BenchmarkParquetLists(b *testing.B) {
	path := filepath.Join(b.TempDir(), "rows.parquet")
	db, _ := sql.Open("duckdb", "")
	defer db.Close()
	const n = 15000
	if _, err := db.Exec("COPY (SELECT i AS id, list_transform(range(784), j -> ((i * 31 + j * 7) % 256) / 255)::FLOAT[] AS f, i % 10 AS y " +
		"FROM range(15000) r(i)) TO " + sqlString(path) + " (FORMAT parquet)"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var x []float32
	for range b.N {
		src, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		rows := 0
		for {
			cells, err := src.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if x, err = Floats(x[:0], cells[1]); err != nil || len(x) != 784 {
				b.Fatalf("row %d: %d values, %v", rows, len(x), err)
			}
			rows++
		}
		src.Close()
		if rows != n {
			b.Fatalf("%d rows, want %d", rows, n)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkOpenPart opens a part of a small Parquet file and closes it, what a file job does once per
// file (to split it) and once per part: the reader's DuckDB instances are the cost (readerpool.go).
//
//	go test -run XXX -bench OpenPart -cpu 1 ./internal/rowfile/
func BenchmarkOpenPart(b *testing.B) {
	path := filepath.Join(b.TempDir(), "rows.parquet")
	db, _ := sql.Open("duckdb", "")
	defer db.Close()
	if _, err := db.Exec("COPY (SELECT i AS id, [i, i + 1]::FLOAT[] AS f FROM range(100) r(i)) TO " + sqlString(path) + " (FORMAT parquet)"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		src, err := OpenPart(path, 0, 50)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := src.Next(); err != nil {
			b.Fatal(err)
		}
		src.Close()
	}
}
