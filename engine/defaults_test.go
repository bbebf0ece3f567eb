package engine

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// Default mechanisms: set, replaced (whatever the names' case), looked up case-insensitively, moved by
// RENAME TABLE, kept across a restart, visible (read-only) in ldpsql_catalog, dropped.
func TestDefaultMechanisms(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.duckdb")
	e := openT(t, path)
	ctx := context.Background()
	mustQuery(t, e, "CREATE TABLE Patients (id INT PRIMARY KEY, Features LONGBLOB)")
	ref := TableRef{Database: "ldpsql", Table: "Patients"}
	set := func(mech, rnd string) {
		t.Helper()
		if err := e.Catalog.SetDefaultMechanism(ctx, DefaultMechanism{TableRef: ref, Column: "Features", Mechanism: mech, Randomiser: rnd,
			SetBy: "root@localhost", SetAt: time.Unix(1700000000, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Catalog.DefaultMechanismOf(ctx, ref, "features"); !errors.Is(err, ErrNoDefaultMechanism) {
		t.Fatalf("before any default: %v", err)
	}
	set("pca1", "laplace")
	set("pca2", "duchi") // replaces
	d, err := e.Catalog.DefaultMechanismOf(ctx, TableRef{Database: "LDPSQL", Table: "patients"}, "FEATURES")
	if err != nil || d.Mechanism != "pca2" || d.Randomiser != "duchi" || d.Table != "Patients" || d.Column != "Features" {
		t.Fatalf("lookup: %+v %v", d, err)
	}
	if got := rowsString(mustQuery(t, e, "SELECT db, table_name, column_name, mechanism, randomiser FROM ldpsql_catalog.ldp_default_mechanisms")); got != "ldpsql Patients Features pca2 duchi\n" {
		t.Fatalf("through SQL: %q", got)
	}
	if _, _, err := e.Query(e.NewContext(ctx), "DELETE FROM ldpsql_catalog.ldp_default_mechanisms"); err == nil {
		t.Fatal("a client changed ldp_default_mechanisms")
	}

	mustQuery(t, e, "RENAME TABLE Patients TO people")
	if _, err := e.Catalog.DefaultMechanismOf(ctx, ref, "features"); !errors.Is(err, ErrNoDefaultMechanism) {
		t.Fatalf("the old name after RENAME: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openT(t, path)
	defer e.Close()
	moved := TableRef{Database: "ldpsql", Table: "people"}
	if d, err := e.Catalog.DefaultMechanismOf(ctx, moved, "features"); err != nil || d.Mechanism != "pca2" {
		t.Fatalf("after RENAME and a restart: %+v %v", d, err)
	}
	if err := e.Catalog.DropDefaultMechanism(ctx, moved, "Features"); err != nil {
		t.Fatal(err)
	}
	if err := e.Catalog.DropDefaultMechanism(ctx, moved, "Features"); !errors.Is(err, ErrNoDefaultMechanism) {
		t.Fatalf("dropping twice: %v", err)
	}
}
