package engine

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCatalogIsReadOnlyAndPersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.duckdb")
	e := openT(t, path)
	ctx := context.Background()
	m := Mechanism{Name: "m1", Plugin: "pca", Path: "/opt/p", SHA256: "ab", Description: json.RawMessage(`{"output_dim":8}`),
		RegisteredBy: "root", RegisteredAt: time.Unix(1700000000, 0)}
	if err := e.Catalog.RegisterMechanism(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := e.Catalog.RegisterMechanism(ctx, m); !errors.Is(err, ErrMechanismExists) {
		t.Fatalf("duplicate: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openT(t, path)
	defer e.Close()
	got := rowsString(mustQuery(t, e, "SELECT name, plugin, sha256, description FROM ldpsql_catalog.ldp_mechanisms"))
	if got != "m1 pca ab {\"output_dim\": 8}\n" {
		t.Fatalf("catalog through SQL: %q", got)
	}
	tables := rowsString(mustQuery(t, e, "SHOW TABLES FROM ldpsql_catalog"))
	if strings.Contains(tables, "settings") || strings.Contains(tables, "views") || !strings.Contains(tables, "ldp_models") {
		t.Fatalf("catalog tables visible: %q", tables)
	}
	for _, q := range []string{
		"DELETE FROM ldpsql_catalog.ldp_mechanisms",
		"INSERT INTO ldpsql_catalog.ldp_mechanisms (name) VALUES ('x')",
		"UPDATE ldpsql_catalog.ldp_mechanisms SET sha256 = 'cd'",
		"CREATE TABLE ldpsql_catalog.evil (id INT)",
		"DROP TABLE ldpsql_catalog.ldp_mechanisms",
		"DROP DATABASE ldpsql_catalog",
	} {
		if _, _, err := e.Query(e.NewContext(ctx), q); err == nil {
			t.Errorf("%s succeeded on the read-only catalog", q)
		}
	}
	if err := e.Catalog.DropMechanism(ctx, "m1"); err != nil {
		t.Fatal(err)
	}
	if err := e.Catalog.DropMechanism(ctx, "m1"); !errors.Is(err, ErrNoMechanism) {
		t.Fatalf("drop unknown: %v", err)
	}
	if r := mustQuery(t, e, "SELECT COUNT(*) FROM ldpsql_catalog.ldp_mechanisms"); r[0][0] != int64(0) {
		t.Fatalf("count after drop: %v", r)
	}
}
