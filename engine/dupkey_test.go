package engine

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// A duplicate key is named as MySQL names it: the statement's value of each key column, joined by '-',
// as the statement wrote it — whether an INSERT (grouped, or in a transaction) or an UPDATE hit it,
// whether the key has one column or several (a value may hold ", "), and under an insensitive
// collation, whose index sees the key folded.
func TestDuplicateKeyNamesTheRow(t *testing.T) {
	e := openT(t, filepath.Join(t.TempDir(), "db.duckdb"))
	defer e.Close()
	mustQuery(t, e, "CREATE TABLE s (id INT PRIMARY KEY)")
	mustQuery(t, e, "CREATE TABLE c (a INT, b VARCHAR(5) COLLATE utf8mb4_bin, PRIMARY KEY (a, b))")
	mustQuery(t, e, "CREATE TABLE q (name VARCHAR(20), n INT, PRIMARY KEY (name, n))") // utf8mb4_0900_ai_ci
	mustQuery(t, e, "INSERT INTO s VALUES (1), (2)")
	mustQuery(t, e, "INSERT INTO c VALUES (1, 'x, y'), (2, 'q')")
	mustQuery(t, e, "INSERT INTO q VALUES ('Émile', 1), ('bob', 2)")
	for _, c := range []struct{ stmts, want string }{
		{"INSERT INTO s VALUES (1)", "Duplicate entry '1' for key 's.PRIMARY'"},
		{"UPDATE s SET id = 1 WHERE id = 2", "Duplicate entry '1' for key 's.PRIMARY'"},
		{"INSERT INTO c VALUES (1, 'x, y')", "Duplicate entry '1-x, y' for key 'c.PRIMARY'"},
		{"UPDATE c SET a = 1, b = 'x, y' WHERE a = 2", "Duplicate entry '1-x, y' for key 'c.PRIMARY'"},
		{"INSERT INTO q VALUES ('EMILE', 1)", "Duplicate entry 'EMILE-1' for key 'q.PRIMARY'"},
		{"INSERT INTO q VALUES ('ann', 7), ('emilE', 1), ('cy', 8)", "Duplicate entry 'emilE-1' for key 'q.PRIMARY'"},
		{"BEGIN; INSERT INTO q VALUES ('ann', 7); INSERT INTO q VALUES ('ÉMILE', 1)", "Duplicate entry 'ÉMILE-1' for key 'q.PRIMARY'"},
		{"UPDATE q SET name = 'Emile', n = 1 WHERE name = 'bob'", "Duplicate entry 'Emile-1' for key 'q.PRIMARY'"},
	} {
		ctx := e.NewContext(context.Background())
		var err error
		for _, stmt := range strings.Split(c.stmts, "; ") {
			if _, _, err = e.Query(ctx, stmt); err != nil {
				break
			}
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.stmts, err, c.want)
		}
		_, _, _ = e.Query(ctx, "ROLLBACK")
	}
	if r := rowsString(mustQuery(t, e, "SELECT name, n FROM q ORDER BY n")); r != "Émile 1\nbob 2\n" {
		t.Fatalf("q after the failed statements:\n%s", r)
	}
}
