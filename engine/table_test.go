package engine

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dolthub/go-mysql-server/sql"
)

// fillScanTable creates t(id INT PRIMARY KEY, v VARCHAR) with ids 0..n-1 and scans it once, so that
// later scans of it are rangeScans (lastScan ≥ rangeScanFrom).
func fillScanTable(t *testing.T, e *Engine, n int) {
	t.Helper()
	mustQuery(t, e, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40))")
	for start := 0; start < n; start += 5000 {
		var vals []string
		for i := start; i < min(start+5000, n); i++ {
			vals = append(vals, fmt.Sprintf("(%d, 'value %d')", i, i))
		}
		mustQuery(t, e, "INSERT INTO t VALUES "+strings.Join(vals, ", "))
	}
	if got := len(mustQuery(t, e, "SELECT id FROM t")); got != n {
		t.Fatalf("first scan: %d rows, want %d", got, n)
	}
}

// scanIDs drains a full scan of t and returns the ids in the order they came.
func scanIDs(t *testing.T, e *Engine, query string) []int32 {
	t.Helper()
	var ids []int32
	for _, r := range mustQuery(t, e, query) {
		ids = append(ids, r[0].(int32))
	}
	return ids
}

// openScan starts a full scan of t through the table itself, as GMS does.
func openScan(t *testing.T, e *Engine) (*sql.Context, sql.RowIter) {
	t.Helper()
	ctx := e.NewContext(context.Background())
	db, err := e.Provider.Database(ctx, "ldpsql")
	if err != nil {
		t.Fatal(err)
	}
	tbl, ok, err := db.GetTableInsensitive(ctx, "t")
	if err != nil || !ok {
		t.Fatalf("table t: %v %v", ok, err)
	}
	iter, err := tbl.PartitionRows(ctx, partition{})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, iter
}

func TestRangeScanReturnsEveryRowInOrder(t *testing.T) {
	e := openT(t, filepath.Join(t.TempDir(), "db.duckdb"))
	defer e.Close()
	const n = 20_000 // ranges of 2,048, 4,096 and 8,192 rows and a last partial one
	fillScanTable(t, e, n)
	ctx, iter := openScan(t, e)
	if _, ok := iter.(*rangeScan); !ok {
		t.Fatalf("a scan of %d rows after a first full scan is a %T, not a rangeScan", n, iter)
	}
	iter.Close(ctx)
	ids := scanIDs(t, e, "SELECT id FROM t")
	if len(ids) != n {
		t.Fatalf("%d rows, want %d", len(ids), n)
	}
	for i, id := range ids {
		if id != int32(i) {
			t.Fatalf("row %d has id %d: not in insertion order", i, id)
		}
	}
	// Deleted rows leave gaps in DuckDB's row ids; every range still covers its rows.
	mustQuery(t, e, "DELETE FROM t WHERE id % 97 = 1 OR (id >= 2000 AND id < 2600)")
	mustQuery(t, e, "INSERT INTO t VALUES (100000, 'after the deletes')")
	want := 0
	for i := 0; i < n; i++ {
		if i%97 != 1 && (i < 2000 || i >= 2600) {
			want++
		}
	}
	want++
	ids = scanIDs(t, e, "SELECT id FROM t")
	if len(ids) != want {
		t.Fatalf("after deletes: %d rows, want %d", len(ids), want)
	}
	if ids[len(ids)-1] != 100000 {
		t.Fatalf("the row inserted last came at %v, not last", ids[len(ids)-5:])
	}
	if got := mustQuery(t, e, "SELECT count(*), sum(id) FROM t"); fmt.Sprint(got[0][0]) != fmt.Sprint(want) {
		t.Fatalf("count(*) = %v, want %d", got[0][0], want)
	}
}

// TestRangeScanSeesOneSnapshot: rows deleted and inserted by another statement while a scan is under
// way do not change what the scan returns, and a statement that reads and writes the same table
// (INSERT … SELECT) reads the table as it was.
func TestRangeScanSeesOneSnapshot(t *testing.T) {
	e := openT(t, filepath.Join(t.TempDir(), "db.duckdb"))
	defer e.Close()
	const n = 20_000
	fillScanTable(t, e, n)
	ctx, iter := openScan(t, e)
	for i := 0; i < 100; i++ {
		if _, err := iter.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mustQuery(t, e, "DELETE FROM t WHERE id >= 19000")
	mustQuery(t, e, "INSERT INTO t VALUES (50000, 'written during the scan')")
	rest := 0
	for {
		r, err := iter.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if id := r[0].(int32); id != int32(100+rest) {
			t.Fatalf("row %d out of place", id)
		}
		if r[0].(int32) == 50000 {
			t.Fatal("the scan saw a row inserted after it started")
		}
		rest++
	}
	if err := iter.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if rest != n-100 {
		t.Fatalf("the scan returned %d more rows, want %d: it did not read one snapshot", rest, n-100)
	}
	if got := len(scanIDs(t, e, "SELECT id FROM t")); got != 19001 {
		t.Fatalf("after the scan: %d rows, want 19001", got)
	}
	mustQuery(t, e, "INSERT INTO t SELECT id + 100000, v FROM t")
	if got := len(scanIDs(t, e, "SELECT id FROM t")); got != 38002 {
		t.Fatalf("INSERT … SELECT from the same table left %d rows, want 38002", got)
	}
	// UPDATE and DELETE with a predicate no index serves read the table they write through a rangeScan.
	match := "v LIKE 'value 1__'" // ids 100..199 and their copies
	if got := mustQuery(t, e, "SELECT count(*) FROM t WHERE "+match); fmt.Sprint(got[0][0]) != "200" {
		t.Fatalf("%v rows match %s, want 200", got[0][0], match)
	}
	mustQuery(t, e, "UPDATE t SET v = 'updated' WHERE "+match)
	if got := mustQuery(t, e, "SELECT count(*) FROM t WHERE v = 'updated'"); fmt.Sprint(got[0][0]) != "200" {
		t.Fatalf("UPDATE changed %v rows, want 200", got[0][0])
	}
	mustQuery(t, e, "DELETE FROM t WHERE v = 'updated'")
	if got := len(scanIDs(t, e, "SELECT id FROM t")); got != 37802 {
		t.Fatalf("DELETE left %d rows, want 37802", got)
	}
}

// TestRangeScanReleasesItsConnection: a scan closed half way, or ended by a cancelled context, gives
// its DuckDB connection back (its transaction ended) and leaves the table writable.
func TestRangeScanReleasesItsConnection(t *testing.T) {
	e := openT(t, filepath.Join(t.TempDir(), "db.duckdb"))
	defer e.Close()
	fillScanTable(t, e, 10_000)
	ctx, iter := openScan(t, e)
	if _, err := iter.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if err := iter.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if inUse := e.DuckDB.Stats().InUse; inUse != 0 {
		t.Fatalf("%d DuckDB connections in use after the scan closed", inUse)
	}
	cctx, cancel := context.WithCancel(context.Background())
	sctx := e.NewContext(cctx)
	_, iter = openScan(t, e)
	if _, err := iter.Next(sctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	for {
		if _, err := iter.Next(sctx); err != nil {
			break // the rest of the range, then the cancelled context's error
		}
	}
	iter.Close(sctx)
	if inUse := e.DuckDB.Stats().InUse; inUse != 0 {
		t.Fatalf("%d DuckDB connections in use after a cancelled scan", inUse)
	}
	mustQuery(t, e, "UPDATE t SET v = 'changed' WHERE id = 5")
	if got := mustQuery(t, e, "SELECT v FROM t WHERE id = 5"); got[0][0] != "changed" {
		t.Fatalf("v = %v", got[0][0])
	}
	mustQuery(t, e, "DROP TABLE t")
}

// TestScanOfTableWithRowidColumn: a user column named rowid hides DuckDB's row ids, so such a table is
// scanned in one query, whatever its size.
func TestScanOfTableWithRowidColumn(t *testing.T) {
	e := openT(t, filepath.Join(t.TempDir(), "db.duckdb"))
	defer e.Close()
	mustQuery(t, e, "CREATE TABLE t (id INT PRIMARY KEY, rowid INT)")
	// Half the rows have a NULL rowid: a scan by ranges of that column would miss them.
	var vals []string
	for i := 0; i < 10_000; i++ {
		rowid := "NULL"
		if i%2 == 0 {
			rowid = fmt.Sprint(i)
		}
		vals = append(vals, fmt.Sprintf("(%d, %s)", i, rowid))
	}
	mustQuery(t, e, "INSERT INTO t VALUES "+strings.Join(vals, ", "))
	for range 2 {
		if got := len(mustQuery(t, e, "SELECT id FROM t")); got != 10_000 {
			t.Fatalf("%d rows, want 10000", got)
		}
	}
	ctx, iter := openScan(t, e)
	defer iter.Close(ctx)
	if _, ok := iter.(*rangeScan); ok {
		t.Fatal("a table with a rowid column was scanned by row id ranges")
	}
}
