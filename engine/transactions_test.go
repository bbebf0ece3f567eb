package engine

import (
	"context"
	"strings"
	"testing"

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
	} {
		_, _, err := e.Query(ctx, step.q)
		if (err == nil) != step.ok {
			t.Fatalf("step %d, %s: %v, want ok %v", i, step.q, err, step.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "has written since its last COMMIT") {
			t.Fatalf("step %d, %s: %v", i, step.q, err)
		}
	}
	if _, rows, err := e.Query(ctx, "SELECT a FROM t"); err != nil || len(rows) != 1 || rows[0][0] != int32(2) {
		t.Errorf("after the refused rollbacks: %v, %v; want the row, updated", rows, err)
	}
	if _, _, err := e.Query(e.NewContext(context.Background()), "ROLLBACK"); err == nil {
		t.Error("an embedded session rolled back")
	}
	if _, rows, err := e.Query(ctx, "SELECT @@version_comment"); err != nil || rows[0][0] != "ldpsql" {
		t.Errorf("@@version_comment: %v, %v", rows, err)
	}
}
