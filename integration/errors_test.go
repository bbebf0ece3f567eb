package integration

import (
	"database/sql"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// errorsFixture is a table with a primary key, a NOT NULL VARCHAR(5) and a protected label, and the
// README's analyst, who may read and call functions in ldpsql but not write there.
const errorsFixture = `CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(5) NOT NULL, y INT);
INSERT INTO t VALUES (1, 'a', 0), (2, 'b', 1);
CALL ldp_set_budget('t', 1);
CREATE USER analyst@'%' IDENTIFIED BY 'pw';
GRANT SELECT, EXECUTE ON ldpsql.* TO analyst@'%'`

func setUpErrorsFixture(t *testing.T, root *sql.DB) {
	t.Helper()
	for _, q := range strings.Split(errorsFixture, ";\n") {
		mustExec(t, root, q)
	}
}

// Errors reach go-sql-driver/mysql with MySQL's numbers and SQLSTATEs (issue #18), so that drivers and
// ORMs tell a missing table from a duplicate key from a denied privilege; ldpsql's own errors are
// ER_UNKNOWN_ERROR (1105, HY000) with their text; no message quotes a long value whole.
func TestMySQLErrorNumbers(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "data.duckdb"))
	root := s.connect("root", "")
	root.SetMaxOpenConns(1) // USE below changes the connection's database
	setUpErrorsFixture(t, root)
	analyst := s.connect("analyst", "pw")

	for _, c := range []struct {
		what, query string
		db          *sql.DB
		num         uint16
		state       string
		text        string // what the message must say, where it matters
	}{
		{"missing table", "SELECT * FROM nope", root, 1146, "42S02", "nope"},
		{"missing column", "SELECT nope FROM t", root, 1054, "42S22", "nope"},
		{"syntax error", "SELEC 1", root, 1064, "42000", "syntax error"},
		{"analyst writes a table", "INSERT INTO t VALUES (9, 'x', 0)", analyst, 1142, "42000", "analyst"},
		{"analyst reads the mysql database", "SELECT * FROM mysql.user", analyst, 1044, "42000", "mysql"},
		{"duplicate primary key", "INSERT INTO t VALUES (1, 'a', 0)", root, 1062, "23000", "Duplicate entry"},
		{"NULL into NOT NULL", "INSERT INTO t VALUES (5, NULL, 0)", root, 1048, "23000", "'s'"},
		{"data too long", "INSERT INTO t VALUES (6, 'abcdefgh', 0)", root, 1406, "22001", "'s'"},
		{"unknown database", "USE nodb", root, 1049, "42000", "nodb"},
		{"ldp budget", "SELECT id, FLIP_LABEL(y, 5, 2) FROM t", root, 1105, "HY000", "ldp budget exceeded"},
		{"bad eps", "SELECT FLIP_LABEL(1, -1, 2)", root, 1105, "HY000", "argument eps = -1 is invalid"},
	} {
		_, err := c.db.Exec(c.query)
		wantError(t, c.what, err, c.num, c.state, c.text)
	}

	// A long value is cut in the message: at most quotedKeep (40) bytes of it come back.
	long := strings.Repeat("x", 200)
	_, err := root.Exec(fmt.Sprintf("INSERT INTO t VALUES (7, '%s', 0)", long))
	wantError(t, "data too long, 200 bytes", err, 1406, "22001", "(200 bytes)")
	if err != nil && strings.Contains(err.Error(), strings.Repeat("x", 41)) {
		t.Errorf("the message quotes the value whole: %v", err)
	}

	// Logging in with a wrong password.
	wrong := s.connect("analyst", "bad")
	wantError(t, "wrong password", wrong.Ping(), 1045, "28000", "Access denied")
}

// wantError fails unless err is MySQL error num with SQLSTATE state and a message containing text.
func wantError(t *testing.T, what string, err error, num uint16, state, text string) {
	t.Helper()
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		t.Errorf("%s: got %v, want MySQL error %d (%s)", what, err, num, state)
		return
	}
	if me.Number != num || string(me.SQLState[:]) != state || !strings.Contains(me.Message, text) {
		t.Errorf("%s: got %v, want MySQL error %d (%s) saying %q", what, err, num, state, text)
	}
}

// The server says it is ldpsql where clients show it (the mysql CLI's banner, @@version_comment),
// with a MySQL 8 version that drivers accept.
func TestVersionComment(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "data.duckdb"))
	var version, comment string
	if err := s.connect("root", "").QueryRow("SELECT @@version, @@version_comment").Scan(&version, &comment); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(version, "8.") || comment != "ldpsql" {
		t.Errorf("@@version %q, @@version_comment %q; want 8.x and ldpsql", version, comment)
	}
}

// pymysql raises the exception class each error's MySQL number stands for (pymysql/err.py):
// testdata/python_errors.py checks them and names the one that differs.
func TestPythonErrorClasses(t *testing.T) {
	python := pythonWithClients(t)
	s := startServer(t, filepath.Join(t.TempDir(), "data.duckdb"))
	setUpErrorsFixture(t, s.connect("root", ""))
	host, port, _ := strings.Cut(s.addr, ":")
	out, err := exec.Command(python, filepath.Join("testdata", "python_errors.py"), host, port).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "all Python error checks passed") {
		t.Fatalf("python_errors.py: %v\n%s", err, out)
	}
}
