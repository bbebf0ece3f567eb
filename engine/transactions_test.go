package engine

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dolthub/go-mysql-server/sql"
)

// ROLLBACK succeeds exactly when the session has written nothing since its last COMMIT, BEGIN or
// ROLLBACK (simple INSERT … VALUES and UPDATE included, which GMS analyses with few rules), and a refused
// ROLLBACK leaves the write in place, as it is. Embedded sessions (id 0) never roll back.
func TestRollbackIsHonest(t *testing.T) {
	e, err := Open(MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s := sql.NewBaseSessionWithClientServer("x", sql.Client{User: "root", Address: "localhost"}, 7)
	ctx := sql.NewContext(context.Background(), sql.WithSession(s))
	ctx.SetCurrentDatabase(DefaultDatabase)
	for i, step := range []struct {
		q  string
		ok bool
	}{
		{"ROLLBACK", true}, // nothing written yet
		{"CREATE TABLE t (a INT PRIMARY KEY)", true},
		{"ROLLBACK", false},
		{"COMMIT", true},
		{"ROLLBACK", true},
		{"BEGIN", true},
		{"INSERT INTO t VALUES (1)", true},
		{"ROLLBACK", false},
		{"ROLLBACK", false}, // still: the write is there
		{"COMMIT", true},
		{"SELECT * FROM t", true},
		{"ROLLBACK", true},
		{"UPDATE t SET a = 2", true},
		{"ROLLBACK", false},
		{"START TRANSACTION", true},
		{"SELECT COUNT(*) FROM t", true},
		{"ROLLBACK", true},
		{"ALTER TABLE t DISABLE KEYS", true},
		{"ALTER TABLE t ENABLE KEYS", true},
		{"COMMIT", true},
		// pymysql's connection and SQLAlchemy's pool: autocommit off, reads, ROLLBACK.
		{"SET autocommit = 0", true},
		{"SELECT a FROM t", true},
		{"ROLLBACK", true},
		{"SAVEPOINT s1", true},
		{"SELECT a FROM t", true},
		{"ROLLBACK TO SAVEPOINT s1", true},
		{"DELETE FROM t WHERE a = 99", true}, // deletes nothing, but is a write
		{"ROLLBACK TO SAVEPOINT s1", false},
		{"ROLLBACK", false},
		{"COMMIT", true},
		{"INSERT INTO nosuchtable VALUES (1)", false}, // refused before analysis: wrote nothing
		{"ROLLBACK", true},
		{"INSERT INTO t VALUES (2)", false}, // a duplicate key, found while running: counted
		{"ROLLBACK", false},
		{"COMMIT", true},
		{"SET autocommit = 1", true},
	} {
		_, _, err := e.Query(ctx, step.q)
		if (err == nil) != step.ok {
			t.Fatalf("step %d, %s: %v, want ok %v", i, step.q, err, step.ok)
		}
		if err != nil && strings.HasPrefix(step.q, "ROLLBACK") && !strings.Contains(err.Error(), "has written since its last COMMIT") {
			t.Fatalf("step %d, %s: %v", i, step.q, err)
		}
	}
	// The refusal names the first write since the last COMMIT, on one line and cut short.
	long := "INSERT INTO t VALUES (3)\n  /* " + strings.Repeat("é", 200) + " */"
	for _, q := range []string{long, "UPDATE t SET a = 4 WHERE a = 3"} {
		if _, _, err := e.Query(ctx.WithQuery(q+"; SELECT 1"), q); err != nil { // as a batch, over the wire
			t.Fatal(err)
		}
	}
	_, _, err = e.Query(ctx, "ROLLBACK")
	if err == nil || !strings.Contains(err.Error(), "(first: INSERT INTO t VALUES (3) /* ééé") ||
		!strings.Contains(err.Error(), "…)") || strings.Contains(err.Error(), "UPDATE") || !utf8.ValidString(err.Error()) {
		t.Errorf("ROLLBACK after two writes: %v; want the first quoted, cut short", err)
	}
	if _, _, err := e.Query(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	// Of a multi-statement batch, only the statement that wrote.
	del := "DELETE FROM t WHERE a = 99"
	if _, _, err := e.Query(ctx.WithQuery(del+";\nSELECT 'x;y'; SELECT 2"), del); err != nil {
		t.Fatal(err)
	}
	if _, _, err = e.Query(ctx, "ROLLBACK"); err == nil || !strings.Contains(err.Error(), "(first: "+del+"),") {
		t.Errorf("ROLLBACK after a write in a batch: %v; want the DELETE alone quoted", err)
	}
	if _, _, err := e.Query(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if _, rows, err := e.Query(ctx, "SELECT a FROM t ORDER BY a"); err != nil || len(rows) != 2 || rows[0][0] != int32(2) || rows[1][0] != int32(4) {
		t.Errorf("after the refused rollbacks: %v, %v; want the row, updated", rows, err)
	}
	if _, _, err := e.Query(e.NewContext(context.Background()), "ROLLBACK"); err == nil {
		t.Error("an embedded session rolled back")
	}
	if _, rows, err := e.Query(ctx, "SELECT @@version_comment"); err != nil || rows[0][0] != "ldpsql" {
		t.Errorf("@@version_comment: %v, %v", rows, err)
	}
}
