package engine

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// A rename works within the current database: one naming it is fine, one naming another database is
// refused (GMS would rename the current database's table of that name instead).
func TestRenameWithinTheCurrentDatabase(t *testing.T) {
	e := openT(t, filepath.Join(t.TempDir(), "db.duckdb"))
	defer e.Close()
	mustQuery(t, e, "CREATE TABLE a (id INT PRIMARY KEY)")
	mustQuery(t, e, "CREATE DATABASE o")
	mustQuery(t, e, "CREATE TABLE o.a (id INT PRIMARY KEY)")
	mustQuery(t, e, "RENAME TABLE ldpsql.a TO ldpsql.b")
	mustQuery(t, e, "ALTER TABLE LDPSQL.b RENAME TO c")
	for _, q := range []string{"RENAME TABLE o.a TO o.z", "RENAME TABLE c TO o.z", "ALTER TABLE o.a RENAME TO z"} {
		_, _, err := e.Query(e.NewContext(context.Background()), q)
		if err == nil || !strings.Contains(err.Error(), "within the current database (ldpsql) only; USE o first") {
			t.Errorf("%s: %v", q, err)
		}
	}
	if got := rowsString(mustQuery(t, e, "SHOW TABLES FROM ldpsql")) + rowsString(mustQuery(t, e, "SHOW TABLES FROM o")); got != "c\na\n" {
		t.Errorf("tables after the renames: %q", got)
	}
}
