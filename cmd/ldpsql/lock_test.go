package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestExplainLock(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "data.duckdb")
	duck := errors.New(`opening DuckDB file "` + db + `": IO Error: Could not set lock on file "` + db + `": Conflicting lock is held in /usr/local/bin/ldpsql (PID 4242). See also https://duckdb.org/docs/stable/connect/concurrency`)

	// No <db>.serve: the holder's PID and program, and --addr HOST:PORT.
	msg := explainLock(db, duck).Error()
	for _, want := range []string{"the database file " + db + " is locked by another process", "PID 4242", "/usr/local/bin/ldpsql", "use --addr HOST:PORT"} {
		if !strings.Contains(msg, want) {
			t.Errorf("without a .serve file: %q lacks %q", msg, want)
		}
	}
	var le *lockedError
	if err := explainLock(db, duck); !errors.As(err, &le) || !errors.Is(err, errors.Unwrap(err)) {
		t.Errorf("not a lockedError wrapping DuckDB's: %v", err)
	}

	// A .serve file from the process DuckDB names: its address.
	writeInfo := func(addr string, pid int) {
		t.Helper()
		data := `{"addr": "` + addr + `", "pid": ` + strconv.Itoa(pid) + `}`
		if err := os.WriteFile(serveInfoPath(db), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeInfo("127.0.0.1:3307", 4242)
	if msg := explainLock(db, duck).Error(); !strings.Contains(msg, "listening on 127.0.0.1:3307; use --addr 127.0.0.1:3307") {
		t.Errorf("with the holder's .serve file: %q", msg)
	}
	// A stale file from another process is not believed.
	writeInfo("127.0.0.1:9999", 17)
	if msg := explainLock(db, duck).Error(); strings.Contains(msg, "9999") || !strings.Contains(msg, "--addr HOST:PORT") {
		t.Errorf("with a stale .serve file: %q", msg)
	}
	// Any other error is left alone.
	other := errors.New("IO Error: Cannot open file: permission denied")
	if got := explainLock(db, other); got != other {
		t.Errorf("other error became %v", got)
	}
}

func TestServeInfoFile(t *testing.T) {
	db := filepath.Join(t.TempDir(), "d.duckdb")
	remove, err := writeServeInfo(db, "0.0.0.0:3306")
	if err != nil {
		t.Fatal(err)
	}
	info, ok := readServeInfo(db)
	if !ok || info.Addr != "127.0.0.1:3306" || info.PID != os.Getpid() {
		t.Fatalf("read back %+v, %v: want the loopback address a local client uses, and this PID", info, ok)
	}
	remove()
	if _, err := os.Stat(serveInfoPath(db)); !os.IsNotExist(err) {
		t.Fatalf("after remove: %v", err)
	}
	if remove, err := writeServeInfo(":memory:", "127.0.0.1:1"); err != nil {
		t.Fatal(err)
	} else {
		remove()
	}
	if _, err := os.Stat(serveInfoPath(":memory:")); !os.IsNotExist(err) {
		t.Fatalf(":memory: wrote a file")
	}
	if got := clientAddr("[::]:3306"); got != "[::1]:3306" {
		t.Errorf("clientAddr([::]:3306) = %s", got)
	}
}
