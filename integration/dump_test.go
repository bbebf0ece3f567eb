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
// SQLAlchemy's and pandas' pools, which send the same ROLLBACK) rolls back after reads and undoes a
// write, and a mysqldump of Debian's mariadb-client (--single-transaction: its SAVEPOINTs) restores
// into another database exactly, one table or a whole database.
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
	if err := tx.Rollback(); err != nil {
		t.Errorf("ROLLBACK after a write: %v", err)
	}
	if n, _ := queryAll(root, "SELECT id FROM em WHERE id = 4"); len(n) != 0 {
		t.Errorf("ROLLBACK left the write: %v", n)
	}
	if v, err := queryString(t, root, "SELECT @@version_comment"); err != nil || v != "ldpsql" {
		t.Errorf("@@version_comment %q, %v", v, err)
	}

	dump, client := mariaDBTool(t, "mysqldump"), mariaDBTool(t, "mysql")
	host, port, _ := strings.Cut(s.addr, ":")
	out, err := exec.Command(dump, "--single-transaction", "-h", host, "-P", port, "-u", "root", "ldpsql", "em").Output()
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
	if err != nil || err2 != nil || len(a) != 3 || strings.Join(flatten(a), "|") != strings.Join(flatten(b), "|") {
		t.Errorf("restored %v (%v), original %v (%v)", b, err2, a, err)
	}

	// A whole database: every column type of the README, a table without a key holding duplicate rows,
	// and a view (which mysqldump writes twice: a placeholder, then the view).
	mustExec(t, root, `CREATE TABLE kinds (id INT AUTO_INCREMENT PRIMARY KEY, d DECIMAL(10,2), b BLOB, j JSON,
		tx TEXT, f BOOLEAN, dt DATE, ts TIMESTAMP, bi BIGINT, fl FLOAT)`)
	mustExec(t, root, `INSERT INTO kinds (d, b, j, tx, f, dt, ts, bi, fl) VALUES
		(1.25, x'00ff10', '{"k": [1, 2]}', 'two\nlines \\ "q" ''s', true, '2024-02-29', '2024-01-01 00:00:01', 9007199254740993, 0.1),
		(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL), (-3, x'', '[]', '', false, '1970-01-01', NULL, -1, -2.5)`)
	mustExec(t, root, "CREATE TABLE nokey (x INT, y VARCHAR(5))")
	mustExec(t, root, "INSERT INTO nokey VALUES (1, 'a'), (1, 'a'), (NULL, 'b')")
	mustExec(t, root, "CREATE VIEW em_named AS SELECT id, name FROM em WHERE name IS NOT NULL")
	out, err = exec.Command(dump, "-h", host, "-P", port, "-u", "root", "ldpsql").Output()
	if err != nil {
		t.Fatalf("mysqldump of the database: %v", err)
	}
	mustExec(t, root, "CREATE DATABASE whole")
	restore = exec.Command(client, "-h", host, "-P", port, "-u", "root", "whole")
	restore.Stdin = strings.NewReader(string(out))
	if b, err := restore.CombinedOutput(); err != nil {
		t.Fatalf("restoring the dump of the database: %v\n%s", err, b)
	}
	for _, q := range []string{
		"SELECT * FROM %s.em ORDER BY id",
		"SELECT id, d, HEX(b), j, tx, f, dt, ts, bi, fl FROM %s.kinds ORDER BY id",
		"SELECT x, y FROM %s.nokey ORDER BY x, y",
		"SELECT * FROM %s.em_named ORDER BY id",
	} {
		a, n, err := rowsText(root, strings.Replace(q, "%s", "ldpsql", 1))
		b, _, err2 := rowsText(root, strings.Replace(q, "%s", "whole", 1))
		if err != nil || err2 != nil || n < 2 || a != b {
			t.Errorf("%s: restored\n%s (%v)\noriginal (%d rows)\n%s (%v)", q, b, err2, n, a, err)
		}
	}
	if v, err := queryString(t, root, "SELECT MAX(id) FROM whole.kinds"); err != nil || v != "3" {
		t.Errorf("whole.kinds MAX(id) %q, %v", v, err)
	}
	mustExec(t, root, "INSERT INTO whole.kinds (d) VALUES (7)") // AUTO_INCREMENT goes on after the dump's ids
	if v, err := queryString(t, root, "SELECT id FROM whole.kinds WHERE d = 7"); err != nil || v != "4" {
		t.Errorf("AUTO_INCREMENT after the restore gave %q, %v; want 4", v, err)
	}
}

// rowsText returns q's rows, one a line, NULL written as NULL, and how many there are.
func rowsText(db *sql.DB, q string) (string, int, error) {
	rows, err := db.Query(q)
	if err != nil {
		return "", 0, err
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var b strings.Builder
	n := 0
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return "", n, err
		}
		for i, v := range vals {
			if i > 0 {
				b.WriteByte('|')
			}
			if v.Valid {
				b.WriteString(strings.ReplaceAll(v.String, "|", `\|`))
			} else {
				b.WriteString("NULL")
			}
		}
		b.WriteByte('\n')
		n++
	}
	return b.String(), n, rows.Err()
}

// queryAllTx returns the first column of the first row of q in tx.
func queryAllTx(tx *sql.Tx, q string) (string, error) {
	var v string
	err := tx.QueryRow(q).Scan(&v)
	return v, err
}
