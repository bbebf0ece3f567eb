package integration

import (
	"bytes"
	"io"
	"path/filepath"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/ldpsql/ldpsql/internal/benchdata"
)

const tenColumnTable = "CREATE TABLE wide (id BIGINT PRIMARY KEY, a INT, b INT, c INT, d INT, x DOUBLE, y DOUBLE, z DOUBLE, u DOUBLE, v DOUBLE)"

// BenchmarkLoadDataLocal loads a 100,000-row, 10-column numeric CSV with LOAD DATA LOCAL INFILE through a
// real `ldpsql serve` and go-sql-driver/mysql over loopback, into a fresh table each time. Target (#18):
// ≥ 100,000 rows/s.
//
//	go test -run '^$' -bench LoadDataLocal -benchtime 3x ./integration/
func BenchmarkLoadDataLocal(b *testing.B) {
	const n = 100_000
	data := benchdata.TenColumnCSV(n)
	mysql.RegisterReaderHandler("wide", func() io.Reader { return bytes.NewReader(data) })
	defer mysql.DeregisterReaderHandler("wide")
	s := startServer(b, filepath.Join(b.TempDir(), "bench.duckdb"))
	db := s.connect("root", "")
	db.SetMaxOpenConns(1)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		mustExec(b, db, "DROP TABLE IF EXISTS wide")
		mustExec(b, db, tenColumnTable)
		b.StartTimer()
		res, err := db.Exec("LOAD DATA LOCAL INFILE 'Reader::wide' INTO TABLE wide FIELDS TERMINATED BY ','")
		if err != nil {
			b.Fatal(err)
		}
		if got, _ := res.RowsAffected(); got != n {
			b.Fatalf("%d rows affected, want %d", got, n)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
