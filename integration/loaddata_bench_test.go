package integration

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// tenColumnCSV is n rows of a 10-column numeric CSV: id, 4 integers, 5 doubles.
func tenColumnCSV(n int) []byte {
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		b.WriteString(strconv.Itoa(i))
		for c := 1; c <= 4; c++ {
			fmt.Fprintf(&b, ",%d", (i*c)%1000)
		}
		for c := 1; c <= 5; c++ {
			b.WriteByte(',')
			b.WriteString(strconv.FormatFloat(float64(i)/float64(c+1), 'f', 4, 64))
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

const tenColumnTable = "CREATE TABLE wide (id BIGINT PRIMARY KEY, a INT, b INT, c INT, d INT, x DOUBLE, y DOUBLE, z DOUBLE, u DOUBLE, v DOUBLE)"

// BenchmarkLoadDataLocal loads a 100,000-row, 10-column numeric CSV with LOAD DATA LOCAL INFILE through a
// real `ldpsql serve` and go-sql-driver/mysql over loopback, into a fresh table each time. Target (#18):
// ≥ 100,000 rows/s.
//
//	go test -run '^$' -bench LoadDataLocal -benchtime 3x ./integration/
func BenchmarkLoadDataLocal(b *testing.B) {
	const n = 100_000
	data := tenColumnCSV(n)
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
