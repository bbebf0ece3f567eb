package integration

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// GMS checked a rename's privileges on the databases it names but renamed in the current database: the
// README's analyst, in ldpsql, renamed ldpsql.raw (which they may only read) with RENAME TABLE
// scratch.raw TO scratch.stolen. A rename naming another database than the current one is now refused,
// and a prepared rename is checked against, and renames in, the database current when it runs.
func TestRenameStaysInTheCurrentDatabase(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "data.duckdb"))
	root := s.connect("root", "")
	mustExec(t, root, "CREATE TABLE raw (id INT PRIMARY KEY)")
	analyst := s.readmeAnalyst(root)
	mustExec(t, analyst, "CREATE TABLE scratch.raw (id INT PRIMARY KEY)")
	// Also over a multi-statement connection (the mysql CLI's), whose statements GMS parsed past this
	// check until the parser stopped returning a statement with its error.
	multi, err := sql.Open("mysql", "analyst:pw@tcp("+s.addr+")/ldpsql?multiStatements=true")
	if err != nil {
		t.Fatal(err)
	}
	defer multi.Close()
	for _, q := range []string{"RENAME TABLE scratch.raw TO scratch.stolen", "ALTER TABLE scratch.raw RENAME TO scratch.stolen", "ALTER TABLE scratch.raw RENAME TO stolen"} {
		for name, db := range map[string]*sql.DB{"": analyst, " (multi-statement client)": multi} {
			if _, err := db.Exec(q); err == nil || !strings.Contains(err.Error(), "within the current database (ldpsql) only") {
				t.Errorf("%s, in ldpsql%s: %v", q, name, err)
			}
		}
	}
	ctx := context.Background()
	c, err := analyst.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, step := range []struct {
		q    string
		fail bool
	}{
		{"USE scratch", false},
		{"PREPARE s FROM 'RENAME TABLE scratch.raw TO scratch.p'", false},
		{"USE ldpsql", false},
		{"EXECUTE s", true}, // would rename ldpsql.raw: no ALTER, DROP there
		{"USE scratch", false},
		{"EXECUTE s", false},
		{"RENAME TABLE scratch.p TO scratch.q", false},
		{"ALTER TABLE q RENAME TO r", false},
	} {
		if _, err := c.ExecContext(ctx, step.q); (err != nil) != step.fail {
			t.Errorf("%s: %v", step.q, err)
		}
	}
	for db, want := range map[string]string{"ldpsql": "[[raw]]", "scratch": "[[r]]"} {
		if got, err := queryAll(root, "SHOW TABLES FROM "+db); err != nil || fmt.Sprint(got) != want {
			t.Errorf("tables of %s: %v %v; want %s", db, got, err, want)
		}
	}
}
