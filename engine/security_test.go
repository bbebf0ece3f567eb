package engine

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The file guard's confinement on a real directory tree: what lies under secure_file_priv is readable
// (and creatable) and nothing else is, however the path is spelled.
func TestFileGuardConfines(t *testing.T) {
	root := t.TempDir()
	db := filepath.Join(root, "data.duckdb")
	secure := filepath.Join(root, "ldpsql-files")
	sibling := filepath.Join(root, "ldpsql-files2") // a prefix of secure's name must not count as inside
	plugins := filepath.Join(root, "plugins")
	for _, d := range []string{secure, sibling, plugins, filepath.Join(secure, "sub")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(db, "raw")
	write(db+".wal", "raw")
	write(filepath.Join(secure, "ok.txt"), "ok")
	write(filepath.Join(secure, "sub", "deep.txt"), "deep")
	write(filepath.Join(sibling, "x.txt"), "x")
	write(filepath.Join(plugins, "enc"), "binary")
	link := func(target, name string) {
		if err := os.Symlink(target, filepath.Join(secure, name)); err != nil {
			t.Fatal(err)
		}
	}
	link(db, "db")
	link(root, "up")
	link(filepath.Join(secure, "ok.txt"), "inside-link")
	if err := syscall.Mkfifo(filepath.Join(secure, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}

	g := newFileGuard(db)
	if g.dir != secure {
		t.Fatalf("default secure_file_priv %q, want %q beside the database", g.dir, secure)
	}
	g.protect(plugins)

	for _, name := range []string{"ok.txt", filepath.Join(secure, "ok.txt"), "sub/deep.txt", "sub/../ok.txt", "inside-link"} {
		if _, err := g.check(name, false); err != nil {
			t.Errorf("reading %s: %v", name, err)
		}
	}
	if _, err := g.check("missing.txt", false); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("reading a missing file under secure_file_priv: %v, want not-exist (LOAD_FILE gives NULL)", err)
	}
	refusedRead := map[string]string{
		db:                                 "outside",
		db + ".wal":                        "outside",
		"../data.duckdb":                   "outside",
		"db":                               "outside", // a symlink out of the directory
		"up/data.duckdb":                   "outside",
		filepath.Join(sibling, "x.txt"):    "outside",
		"../ldpsql-files2/x.txt":           "outside",
		filepath.Join(root, "missing.txt"): "outside", // no existence oracle outside
		"fifo":                             "not a regular file",
		"sub":                              "not a regular file",
		"":                                 "empty",
	}
	for name, why := range refusedRead {
		if _, err := g.check(name, false); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("reading %q: %v, want an error saying %q", name, err, why)
		}
	}
	if p, err := g.check("new.csv", true); err != nil || p != filepath.Join(secure, "new.csv") {
		t.Errorf("creating new.csv: %q, %v", p, err)
	}
	refusedWrite := map[string]string{
		"ok.txt":                          "exists",
		"db":                              "own files", // a symlink to the database is the database
		filepath.Join(root, "new.txt"):    "outside",
		"up/new.txt":                      "outside",
		filepath.Join(plugins, "new-enc"): "outside",
		"nodir/new.txt":                   "does not exist",
	}
	for name, why := range refusedWrite {
		if _, err := g.check(name, true); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("creating %q: %v, want an error saying %q", name, err, why)
		}
	}

	// secure_file_priv = the database's own directory: its own files and the plugins stay out of reach.
	g.setDir(root)
	for _, name := range []string{"data.duckdb", "data.duckdb.wal", "plugins/enc", "ldpsql-files/db"} {
		if _, err := g.check(name, false); err == nil || !strings.Contains(err.Error(), "own files") {
			t.Errorf("reading %q with secure_file_priv = the database's directory: %v, want refused as ldpsql's own", name, err)
		}
	}
	for _, name := range []string{"data.duckdb.tmp", "plugins/new-enc"} {
		if _, err := g.check(name, true); err == nil || !strings.Contains(err.Error(), "own files") {
			t.Errorf("creating %q with secure_file_priv = the database's directory: %v, want refused as ldpsql's own", name, err)
		}
	}
	if _, err := g.check("ldpsql-files/ok.txt", false); err != nil {
		t.Errorf("an ordinary file with secure_file_priv = the database's directory: %v", err)
	}

	// A hard link to the database inside secure_file_priv is still the database.
	g.setDir(secure)
	if err := os.Link(db, filepath.Join(secure, "hard")); err != nil {
		t.Fatal(err)
	}
	if _, err := g.check("hard", false); err == nil || !strings.Contains(err.Error(), "own files") {
		t.Errorf("reading a hard link to the database: %v, want refused", err)
	}

	g.setDir("")
	if _, err := g.check("ok.txt", false); err == nil || !strings.Contains(err.Error(), "NULL") {
		t.Errorf("reading with secure_file_priv NULL: %v, want refused", err)
	}
}

// WithSecureFilePriv refuses the empty string (MySQL's "anywhere") and takes NULL as off.
func TestWithSecureFilePriv(t *testing.T) {
	if _, err := Open(MemoryPath, WithSecureFilePriv("")); err == nil || !strings.Contains(err.Error(), "NULL") {
		t.Errorf("secure_file_priv '': %v, want an error saying to give a directory or NULL", err)
	}
	e, err := Open(MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.SecureFilePriv(); got != NoSecureFilePriv {
		t.Errorf("an in-memory engine's default secure_file_priv is %q, want NULL", got)
	}
	e.Close()
	dir := t.TempDir()
	e, err = Open(MemoryPath, WithSecureFilePriv(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if got := e.SecureFilePriv(); got != dir {
		t.Errorf("SecureFilePriv() = %q, want %q", got, dir)
	}
}
