package main

import (
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/udf"
)

func TestWriteLiteral(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{nil, "NULL"},
		{int32(-7), "-7"},
		{int64(1) << 40, "1099511627776"},
		{1.5, "1.5"},
		{float32(0.1), "0.1"},
		{"it's a \\ test", `'it''s a \\ test'`},
		{[]byte{0, 'a', '\'', '\\', 0xff}, "_binary'\x00a\\'\\\\\xff'"},
	} {
		var b strings.Builder
		if err := writeLiteral(&b, tc.v); err != nil || b.String() != tc.want {
			t.Errorf("writeLiteral(%#v) = %q, %v; want %q", tc.v, b.String(), err, tc.want)
		}
	}
	var b strings.Builder
	if err := writeLiteral(&b, []int{1}); err == nil {
		t.Error("a slice of ints became a literal")
	}
}

// The INSERT path a server gets, run in process: quoting, NULLs, binary values and batching by size.
func TestInsertStatements(t *testing.T) {
	e, err := openEngine(":memory:", udf.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s := newEmbedded(e)
	defer s.close()
	ctx := context.Background()
	if _, _, err := s.query(ctx, "CREATE TABLE `we ird` (id INT PRIMARY KEY, b LONGBLOB, s TEXT)", nil); err != nil {
		t.Fatal(err)
	}
	blob := make([]byte, 256)
	for i := range blob {
		blob[i] = byte(i)
	}
	n, err := insertStatements(ctx, s, "we ird", []string{"id", "b", "s"}, batches([][]any{
		{1, blob, "a'b\\c"},
		{2, nil, nil},
		{3, []byte{}, ""},
	}))
	if err != nil || n != 3 {
		t.Fatalf("inserted %d, %v", n, err)
	}
	r, err := queryAll(ctx, s, "SELECT id, HEX(b), s, s IS NULL FROM `we ird` ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := stringValue(r.rows[0][1]), strings.ToUpper(hex.EncodeToString(blob)); got != want {
		t.Errorf("blob read back as %s", got)
	}
	if stringValue(r.rows[0][2]) != "a'b\\c" || r.rows[1][1] != nil || r.rows[1][2] != nil || stringValue(r.rows[2][2]) != "" {
		t.Errorf("read back %v", r.rows)
	}
	// A failing batch names its rows; the batches before it stay.
	_, err = insertStatements(ctx, s, "we ird", []string{"id", "b", "s"}, batches([][]any{{4, nil, "x"}, {1, nil, "dup"}}))
	if err == nil || !strings.Contains(err.Error(), "rows 1 to 2") {
		t.Errorf("duplicate key: %v", err)
	}
}

// batches returns a next function that hands out rows once.
func batches(rows [][]any) func() ([][]any, error) {
	done := false
	return func() ([][]any, error) {
		if done {
			return nil, nil
		}
		done = true
		return rows, nil
	}
}

func TestTargetFlags(t *testing.T) {
	db := filepath.Join(t.TempDir(), "x.duckdb")
	if code, _, errOut := runCLI(t, "", "sql", "--db", db, "--addr", "127.0.0.1:1", "-e", "SELECT 1"); code != 1 || !strings.Contains(errOut, "--addr and --db cannot be used together") {
		t.Errorf("--addr with --db: %d %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "", "sql", "--db", db, "--user", "bob", "-e", "SELECT 1"); code != 1 || !strings.Contains(errOut, "--user and --password go with --addr") {
		t.Errorf("--user without --addr: %d %q", code, errOut)
	}
	// Nothing listens on port 1: the network's error, naming the address.
	if code, _, errOut := runCLI(t, "", "sql", "--addr", "127.0.0.1:1", "-e", "SELECT 1"); code != 1 || !strings.Contains(errOut, "connecting to 127.0.0.1:1 as root") {
		t.Errorf("nothing listening: %d %q", code, errOut)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("a refused command created %s", db)
	}
}

// An account that cannot see a job's row in ldp_jobs is told the job id and how to follow it, over a
// real server in this process.
func TestFollowJobUnreadable(t *testing.T) {
	e, err := openEngine(":memory:", udf.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	srv, err := e.Serve(engine.ServerConfig{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Start() }()
	defer srv.Close()
	ctx := context.Background()
	root, err := dialServer(ctx, srv.Addr().String(), "root", "")
	if err != nil {
		t.Fatal(err)
	}
	defer root.close()
	if _, _, err := root.query(ctx, "CREATE USER analyst IDENTIFIED BY 'pw'", nil); err != nil {
		t.Fatal(err)
	}
	analyst, err := dialServer(ctx, srv.Addr().String(), "analyst", "pw")
	if err != nil {
		t.Fatal(err)
	}
	defer analyst.close()
	var stderr strings.Builder
	_, err = followJob(ctx, analyst, 7, &stderr)
	if err == nil || !strings.Contains(err.Error(), "job 7 was started on "+srv.Addr().String()+" as analyst, but its progress cannot be read") ||
		!strings.Contains(err.Error(), "SELECT state, epoch, epochs, error FROM ldpsql_catalog.ldp_jobs WHERE id = 7") {
		t.Fatalf("followJob as an analyst: %v", err)
	}
	// Wrong password: the server's message.
	if _, err := dialServer(ctx, srv.Addr().String(), "analyst", "nope"); err == nil || !strings.Contains(err.Error(), "ERROR 1045 (28000): Access denied for user 'analyst'") {
		t.Errorf("wrong password: %v", err)
	}
}
