package engine

import (
	"context"
	"path/filepath"
	"testing"
)

// A CREATE TABLE … AS SELECT marks its table unfinished until its rows commit: a finished or failed
// statement leaves no mark, and a table still marked when the engine opens (a crash cut the statement
// off between its CREATE and its rows) is dropped then.
func TestUnfinishedCreateDroppedAtOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ctas.duckdb")
	e, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := e.NewContext(context.Background())
	q := func(s string) error { _, _, err := e.Query(ctx, s); return err }
	marks := func() int {
		var n int
		if err := e.DuckDB.QueryRow(`SELECT count(*) FROM ` + CatalogSchema + `.settings WHERE starts_with(key, '` + unfinishedCreatePrefix + `')`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := q("CREATE TABLE src (id INT PRIMARY KEY, j VARCHAR(20))"); err != nil {
		t.Fatal(err)
	}
	if err := q(`INSERT INTO src VALUES (1, '{"a": 1}'), (2, 'not json')`); err != nil {
		t.Fatal(err)
	}
	if err := q("CREATE TABLE done AS SELECT id FROM src"); err != nil {
		t.Fatal(err)
	}
	if err := q("CREATE TABLE none AS SELECT id FROM src WHERE id > 10"); err != nil {
		t.Fatal(err)
	}
	if err := q("CREATE TABLE bad AS SELECT id, JSON_EXTRACT(j, '$.a') AS a FROM src"); err == nil {
		t.Fatal("a CTAS over invalid JSON succeeded")
	}
	if n := marks(); n != 0 {
		t.Fatalf("%d unfinished marks after statements that ended", n)
	}
	// What a crash between the CREATE and the rows' commit leaves: the table and its mark.
	cut := TableRef{Database: DefaultDatabase, Table: "cut"}
	if err := e.Provider.execTx(context.Background(), `CREATE TABLE "ldpsql"."cut" (id INTEGER)`, unfinishedCreateStatement(cut)); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if got := e.DroppedUnfinished(); len(got) != 1 || got[0] != cut {
		t.Fatalf("dropped at open: %v, want [%v]", got, cut)
	}
	ctx = e.NewContext(context.Background())
	if _, _, err := e.Query(ctx, "SELECT count(*) FROM cut"); err == nil {
		t.Fatal("the unfinished table survived the restart")
	}
	for _, name := range []string{"done", "none"} {
		if _, _, err := e.Query(ctx, "SELECT count(*) FROM "+name); err != nil {
			t.Fatalf("the finished table %s: %v", name, err)
		}
	}
}
