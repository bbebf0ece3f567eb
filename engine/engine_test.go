package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dolthub/go-mysql-server/sql"
)

func openT(t *testing.T, path string) *Engine {
	t.Helper()
	e, err := Open(path)
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	return e
}

func mustQuery(t *testing.T, e *Engine, q string) []sql.Row {
	t.Helper()
	_, rows, err := e.Query(e.NewContext(context.Background()), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return rows
}

func rowsString(rows []sql.Row) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintln(&b, []any(r)...)
	}
	return b.String()
}

func TestTypesRoundTripAcrossRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.duckdb")
	e := openT(t, path)
	mustQuery(t, e, `CREATE TABLE t (
		id INT PRIMARY KEY, big BIGINT, d DOUBLE, v VARCHAR(20) NOT NULL, tx TEXT, b BLOB, j JSON,
		flag BOOLEAN, ts DATETIME, dec1 DECIMAL(10,3), n INT DEFAULT 7)`)
	mustQuery(t, e, `INSERT INTO t (id, big, d, v, tx, b, j, flag, ts, dec1) VALUES
		(1, 9000000000, 1.5, 'a', 'long text', x'00ff', '{"k": [1, 2]}', true, '2024-01-02 03:04:05', 12.345),
		(2, NULL, NULL, 'b', NULL, NULL, NULL, false, NULL, NULL)`)
	want := rowsString(mustQuery(t, e, "SELECT * FROM t ORDER BY id"))
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openT(t, path)
	defer e.Close()
	got := rowsString(mustQuery(t, e, "SELECT * FROM t ORDER BY id"))
	if got != want {
		t.Fatalf("after restart:\n%s\nbefore:\n%s", got, want)
	}
	if !strings.Contains(got, "7") {
		t.Fatalf("default not applied: %s", got)
	}
	// The schema a client sees survives exactly, defaults included.
	desc := rowsString(mustQuery(t, e, "DESCRIBE t"))
	for _, frag := range []string{"varchar(20)", "text", "json", "tinyint(1)", "datetime", "decimal(10,3)", "PRI"} {
		if !strings.Contains(desc, frag) {
			t.Errorf("DESCRIBE lacks %q:\n%s", frag, desc)
		}
	}
	mustQuery(t, e, "INSERT INTO t (id, v) VALUES (3, 'c')")
	if r := mustQuery(t, e, "SELECT n FROM t WHERE id = 3"); r[0][0] != int32(7) {
		t.Fatalf("default after restart: %v", r)
	}
}

func TestDMLAndAtomicity(t *testing.T) {
	e := openT(t, MemoryPath)
	defer e.Close()
	mustQuery(t, e, "CREATE TABLE p (id INT PRIMARY KEY, y INT, name VARCHAR(10))")
	mustQuery(t, e, "INSERT INTO p VALUES (1, 10, 'a'), (2, 20, 'b'), (3, 30, 'c')")
	// A failing multi-row insert writes nothing: the duplicate comes last.
	ctx := e.NewContext(context.Background())
	if _, _, err := e.Query(ctx, "INSERT INTO p VALUES (4, 40, 'd'), (5, 50, 'e'), (1, 0, 'dup')"); err == nil || !strings.Contains(err.Error(), "Duplicate entry") {
		t.Fatalf("duplicate key: got %v", err)
	}
	if r := mustQuery(t, e, "SELECT count(*) FROM p"); r[0][0] != int64(3) {
		t.Fatalf("partial write after failed insert: %v", r)
	}
	mustQuery(t, e, "UPDATE p SET y = y + 1 WHERE id >= 2")
	mustQuery(t, e, "UPDATE p SET id = 9 WHERE id = 3")
	mustQuery(t, e, "DELETE FROM p WHERE name = 'a'")
	got := rowsString(mustQuery(t, e, "SELECT id, y, name FROM p ORDER BY id"))
	if got != "2 21 b\n9 31 c\n" {
		t.Fatalf("after DML:\n%s", got)
	}
	// A failing UPDATE (NOT NULL via a primary-key collision) rolls back entirely.
	if _, _, err := e.Query(ctx, "UPDATE p SET id = 2"); err == nil {
		t.Fatal("colliding update succeeded")
	}
	if got2 := rowsString(mustQuery(t, e, "SELECT id, y, name FROM p ORDER BY id")); got2 != got {
		t.Fatalf("failed update changed rows:\n%s", got2)
	}
	// Keyless tables: deleting one of two equal rows deletes one.
	mustQuery(t, e, "CREATE TABLE k (a INT, b VARCHAR(5))")
	mustQuery(t, e, "INSERT INTO k VALUES (1,'x'), (1,'x'), (2,'y')")
	mustQuery(t, e, "DELETE FROM k WHERE a = 2")
	mustQuery(t, e, "UPDATE k SET a = a + 1")
	if got := rowsString(mustQuery(t, e, "SELECT a, b FROM k")); got != "2 x\n2 x\n" {
		t.Fatalf("keyless: %s", got)
	}
	mustQuery(t, e, "TRUNCATE TABLE k")
	if r := mustQuery(t, e, "SELECT count(*) FROM k"); r[0][0] != int64(0) {
		t.Fatalf("truncate: %v", r)
	}
}

func TestQueriesAndDDL(t *testing.T) {
	e := openT(t, MemoryPath)
	defer e.Close()
	mustQuery(t, e, "CREATE DATABASE other")
	mustQuery(t, e, "CREATE TABLE other.a (id INT PRIMARY KEY AUTO_INCREMENT, g INT)")
	mustQuery(t, e, "CREATE TABLE b (g INT, label VARCHAR(10))")
	mustQuery(t, e, "INSERT INTO other.a (g) VALUES (1), (1), (2)")
	mustQuery(t, e, "INSERT INTO b VALUES (1, 'one'), (2, 'two')")
	got := rowsString(mustQuery(t, e, `SELECT b.label, count(*) FROM other.a a JOIN b ON a.g = b.g
		GROUP BY b.label ORDER BY b.label LIMIT 5`))
	if got != "one 2\ntwo 1\n" {
		t.Fatalf("join/group:\n%s", got)
	}
	if got := rowsString(mustQuery(t, e, "SELECT id FROM other.a ORDER BY id DESC LIMIT 1")); got != "3\n" {
		t.Fatalf("auto increment: %s", got)
	}
	tables := rowsString(mustQuery(t, e, "SHOW TABLES"))
	if tables != "b\n" {
		t.Fatalf("SHOW TABLES: %q", tables)
	}
	mustQuery(t, e, "RENAME TABLE b TO c")
	mustQuery(t, e, "DROP TABLE c")
	mustQuery(t, e, "DROP DATABASE other")
	dbs := rowsString(mustQuery(t, e, "SHOW DATABASES"))
	if strings.Contains(dbs, "other") || !strings.Contains(dbs, DefaultDatabase) || !strings.Contains(dbs, CatalogSchema) {
		t.Fatalf("SHOW DATABASES:\n%s", dbs)
	}
	if _, _, err := e.Query(e.NewContext(context.Background()), "CREATE TABLE bad (x ENUM('a','b'))"); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Fatalf("unsupported type: %v", err)
	}
}

func TestUsersViewsAndDatabaseSQLPersist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.duckdb")
	e := openT(t, path)
	mustQuery(t, e, "CREATE TABLE base (id INT PRIMARY KEY, y INT)")
	mustQuery(t, e, "INSERT INTO base VALUES (1, 10), (2, 20)")
	mustQuery(t, e, "CREATE VIEW big AS SELECT id FROM base WHERE y > 15")
	mustQuery(t, e, "CREATE USER analyst@'%' IDENTIFIED BY 'pw'")
	mustQuery(t, e, "GRANT SELECT ON ldpsql.* TO analyst@'%'")
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openT(t, path)
	defer e.Close()
	if got := rowsString(mustQuery(t, e, "SELECT * FROM big")); got != "2\n" {
		t.Fatalf("view after restart: %q", got)
	}
	grants := rowsString(mustQuery(t, e, "SHOW GRANTS FOR analyst@'%'"))
	if !strings.Contains(grants, "GRANT SELECT ON `ldpsql`.* TO `analyst`@`%`") {
		t.Fatalf("grants after restart:\n%s", grants)
	}
	// The in-process database/sql handle sees the same data.
	var n int
	if err := e.DB().QueryRow("SELECT COUNT(*) FROM base").Scan(&n); err != nil || n != 2 {
		t.Fatalf("database/sql: %d, %v", n, err)
	}
	if _, err := e.DB().Exec("INSERT INTO base VALUES (3, 30)"); err != nil {
		t.Fatal(err)
	}
	if r := mustQuery(t, e, "SELECT COUNT(*) FROM base"); r[0][0] != int64(3) {
		t.Fatalf("insert through database/sql not visible: %v", r)
	}
}

// DuckDB names a file's catalog after the file; files named like ldpsql's schemas (the default
// ldpsql.duckdb among them) must work as any other.
func TestFileNamedLikeASchema(t *testing.T) {
	for _, name := range []string{DefaultPath, CatalogSchema + ".duckdb", "memory.duckdb"} {
		path := filepath.Join(t.TempDir(), name)
		e := openT(t, path)
		mustQuery(t, e, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(5))")
		mustQuery(t, e, "INSERT INTO t VALUES (1, 'a'), (2, 'b')")
		mustQuery(t, e, "UPDATE t SET v = 'c' WHERE id = 2")
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		e = openT(t, path)
		if got := rowsString(mustQuery(t, e, "SELECT id, v FROM t ORDER BY id")); got != "1 a\n2 c\n" {
			t.Errorf("%s: %q", name, got)
		}
		e.Close()
	}
}

// TestScannedValuesAreOwned: a table scan keeps the driver's values without the copy database/sql
// would make (rowIter's driverValue). That is right only while duckdb-go gives every value its own
// memory; this test reads rows across several DuckDB chunks of 2,048 and checks that no later row
// overwrote an earlier one's BLOB or string, long (out of line in DuckDB) and short (inlined) alike.
func TestScannedValuesAreOwned(t *testing.T) {
	e := openT(t, filepath.Join(t.TempDir(), "db.duckdb"))
	defer e.Close()
	mustQuery(t, e, "CREATE TABLE t (id INT PRIMARY KEY, long_b BLOB, short_b BLOB, s VARCHAR(40))")
	const n = 5000
	var vals []string
	for i := 0; i < n; i++ {
		vals = append(vals, fmt.Sprintf("(%d, x'%s', x'%04x', 'row %d of the scan test')", i, strings.Repeat(fmt.Sprintf("%08x", i), 8), i, i))
	}
	mustQuery(t, e, "INSERT INTO t VALUES "+strings.Join(vals, ", "))
	rows := mustQuery(t, e, "SELECT id, long_b, short_b, s FROM t")
	if len(rows) != n {
		t.Fatalf("%d rows, want %d", len(rows), n)
	}
	for _, r := range rows {
		id := r[0].(int32)
		long := r[1].([]byte)
		if len(long) != 32 || fmt.Sprintf("%x", long) != strings.Repeat(fmt.Sprintf("%08x", id), 8) {
			t.Fatalf("row %d: long BLOB %x", id, long)
		}
		if short := r[2].([]byte); fmt.Sprintf("%x", short) != fmt.Sprintf("%04x", id) {
			t.Fatalf("row %d: short BLOB %x", id, short)
		}
		if s := r[3].(string); s != fmt.Sprintf("row %d of the scan test", id) {
			t.Fatalf("row %d: string %q", id, s)
		}
	}
	// The rows' memory is the caller's: changing a value changes nothing stored.
	rows[0][1].([]byte)[0] ^= 0xff
	if again := mustQuery(t, e, "SELECT long_b FROM t WHERE id = 0"); fmt.Sprintf("%x", again[0][0]) != strings.Repeat("00000000", 8) {
		t.Fatalf("stored BLOB changed: %x", again[0][0])
	}
}
