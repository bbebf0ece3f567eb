package integration

import (
	"context"
	"database/sql"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// What clients do around transactions and dumps, over the MySQL protocol: database/sql's Tx (and
// SQLAlchemy's and pandas' pools, which send the same ROLLBACK) rolls back after reads, a rollback that
// would have to undo a write fails and leaves the write, and a mysqldump of Debian's mariadb-client
// restores into another database exactly.
func TestRollbackAndDumpRestore(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "data.duckdb")
	s := startServer(t, dbPath)
	root := s.connect("root", "")
	mustExec(t, root, "CREATE TABLE em (id INT PRIMARY KEY, name VARCHAR(20), x DOUBLE, t DATETIME)")
	mustExec(t, root, `INSERT INTO em VALUES (1, 'a', 1.5, '2024-01-01 10:00:00'), (2, NULL, NULL, NULL),
		(3, 'c''q', -2, '2025-02-03 04:05:06')`)

	ctx := context.Background()
	tx, err := root.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rows, err := queryAllTx(tx, "SELECT COUNT(*) FROM em"); err != nil || rows != "3" {
		t.Fatalf("read in a transaction: %v %v", rows, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Errorf("ROLLBACK after reads: %v", err)
	}
	tx, err = root.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("INSERT INTO em VALUES (4, 'd', 0, NULL)"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err == nil || !strings.Contains(err.Error(), "has written since") {
		t.Errorf("ROLLBACK after a write: %v, want the error saying it cannot be undone", err)
	}
	if n, _ := queryAll(root, "SELECT id FROM em WHERE id = 4"); len(n) != 1 {
		t.Errorf("the write a refused ROLLBACK could not undo is %v, want present", n)
	}
	if v, err := queryString(t, root, "SELECT @@version_comment"); err != nil || v != "ldpsql" {
		t.Errorf("@@version_comment %q, %v", v, err)
	}

	dump, client := mariaDBTool(t, "mysqldump"), mariaDBTool(t, "mysql")
	host, port, _ := strings.Cut(s.addr, ":")
	out, err := exec.Command(dump, "-h", host, "-P", port, "-u", "root", "ldpsql", "em").Output()
	if err != nil {
		t.Fatalf("mysqldump: %v", err)
	}
	mustExec(t, root, "CREATE DATABASE other")
	restore := exec.Command(client, "-h", host, "-P", port, "-u", "root", "other")
	restore.Stdin = strings.NewReader(string(out))
	if b, err := restore.CombinedOutput(); err != nil {
		t.Fatalf("restoring the dump: %v\n%s", err, b)
	}
	q := "SELECT id, COALESCE(name, 'NULL'), COALESCE(x, 0), COALESCE(CAST(t AS CHAR), 'NULL') FROM %s.em ORDER BY id"
	a, err := queryAll(root, strings.Replace(q, "%s", "ldpsql", 1))
	b, err2 := queryAll(root, strings.Replace(q, "%s", "other", 1))
	if err != nil || err2 != nil || len(a) != 4 || strings.Join(flatten(a), "|") != strings.Join(flatten(b), "|") {
		t.Errorf("restored %v (%v), original %v (%v)", b, err2, a, err)
	}
}

// queryAllTx returns the first column of the first row of q in tx.
func queryAllTx(tx *sql.Tx, q string) (string, error) {
	var v string
	err := tx.QueryRow(q).Scan(&v)
	return v, err
}
