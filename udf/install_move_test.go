package udf_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/plugins/host"
	"github.com/ldpsql/ldpsql/udf"
)

// An installation moved to another directory keeps its trained mechanisms: at start the built-in
// plugins are registered at their new path, and the mechanisms fitted with them follow, while a
// mechanism of an external plugin stays where it was registered.
func TestMovedInstallKeepsTrainedMechanisms(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "moved.duckdb")
	oldDir := buildPlugins(t, "identity")
	external := filepath.Join(t.TempDir(), "my-encoder")
	raw, err := os.ReadFile(filepath.Join(oldDir, udf.BuiltinPlugins["identity"]))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(external, raw, 0o755); err != nil {
		t.Fatal(err)
	}
	digest, err := host.Digest(external)
	if err != nil {
		t.Fatal(err)
	}
	open := func(dir string) (*ledgerT, []string) { return openInstalled(t, db, dir) }

	l, _ := open(oldDir)
	l.q("CREATE TABLE aux (id INT PRIMARY KEY, f LONGBLOB)")
	l.q("INSERT INTO aux VALUES (1, LDP_VECTOR(0.1, 0.9)), (2, LDP_VECTOR(0.4, 0.2))")
	l.q(`CALL ldp_fit_mechanism('box', 'identity', 'aux', 'f', '{}')`)
	l.q(`CALL ldp_register_mechanism('mine', '` + external + `', '` + digest + `')`)
	l.q("SELECT LDP_ENCODE(f, 1, 'box') FROM aux")
	l.e.Close()

	newDir := t.TempDir()
	if err := os.Rename(filepath.Join(oldDir, udf.BuiltinPlugins["identity"]), filepath.Join(newDir, udf.BuiltinPlugins["identity"])); err != nil {
		t.Fatal(err)
	}
	l, logged := open(newDir)
	defer l.e.Close()
	if got := l.q("SELECT LDP_ENCODE(f, 1, 'box') FROM aux"); len(got) != 2 {
		t.Fatalf("%d releases after the move, want 2", len(got))
	}
	box, err := l.e.Catalog.Mechanism(ctx, "box")
	if err != nil || filepath.Dir(box.Path) != newDir {
		t.Errorf("the fitted mechanism runs %q after the move (%v), want a plugin in %s", box.Path, err, newDir)
	}
	mine, err := l.e.Catalog.Mechanism(ctx, "mine")
	if err != nil || mine.Path != external {
		t.Errorf("the external mechanism runs %q after the move (%v), want %s", mine.Path, err, external)
	}
	if !slices.Contains(logged, "built-in plugin %s moved from %s: the mechanisms that ran it there now run it at %s") {
		t.Errorf("the move is not logged: %q", logged)
	}
}

// A start that stopped after registering a rebuilt built-in plugin but before re-pinning the
// mechanisms that run it (possible before RegisterBuiltin made the two one transaction) left them
// pinned to the old digest while the plugin's own row looked current, so every later start skipped
// the plugin and the mechanisms were refused for good. A start now re-pins them.
func TestInterruptedRepinIsFinished(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "repin.duckdb")
	dir := buildPlugins(t, "identity")
	open := func() (*ledgerT, []string) { return openInstalled(t, db, dir) }
	l, _ := open()
	l.q("CREATE TABLE aux (id INT PRIMARY KEY, f LONGBLOB)")
	l.q("INSERT INTO aux VALUES (1, LDP_VECTOR(0.1, 0.9)), (2, LDP_VECTOR(0.4, 0.2))")
	l.q(`CALL ldp_fit_mechanism('box', 'identity', 'aux', 'f', '{}')`)
	// The state the interrupted start left: 'box' pinned to the binary before the rebuild.
	stale := strings.Repeat("ab", 32)
	if _, err := l.e.DuckDB.Exec(`UPDATE `+engine.CatalogSchema+`.ldp_mechanisms SET sha256 = ? WHERE name = 'box'`, stale); err != nil {
		t.Fatal(err)
	}
	l.e.Close()

	l, logged := open()
	defer l.e.Close()
	box, err := l.e.Catalog.Mechanism(ctx, "box")
	identity, err2 := l.e.Catalog.Mechanism(ctx, "identity")
	if err != nil || err2 != nil || box.SHA256 != identity.SHA256 {
		t.Errorf("'box' is pinned to %s, the identity plugin's binary is %s (%v, %v)", box.SHA256, identity.SHA256, err, err2)
	}
	if got := l.q("SELECT LDP_ENCODE(f, 1, 'box') FROM aux"); len(got) != 2 {
		t.Errorf("%d releases, want 2", len(got))
	}
	if !slices.ContainsFunc(logged, func(s string) bool { return strings.HasPrefix(s, "re-pinned %d mechanism(s)") }) {
		t.Errorf("the re-pin is not logged: %q", logged)
	}
}

// openInstalled opens the database file db with the SQL functions installed and the built-in plugins
// found in dir, and returns it with the formats of the lines Install logged.
func openInstalled(t *testing.T, db, dir string) (*ledgerT, []string) {
	t.Helper()
	e, err := engine.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	var logged []string
	if _, err := udf.Install(e, udf.Config{PluginDir: dir, Logf: func(f string, a ...any) { logged = append(logged, f) }}); err != nil {
		t.Fatal(err)
	}
	return &ledgerT{t: t, e: e}, logged
}
