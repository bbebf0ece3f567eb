package udf_test

import (
	"context"
	"testing"
)

// A release made inside a transaction is charged when it is made, on the ledger's own connection, and
// ROLLBACK never refunds it: the noisy values have been seen. The transaction's write is undone.
func TestLedgerChargeSurvivesRollback(t *testing.T) {
	l := newLedgerEngine(t, "")
	l.fillT("t", 20)
	l.q("CALL ldp_set_budget('t', 2)")
	ctx := l.e.NewContext(context.Background()) // one session for the whole transaction
	run := func(q string) int {
		t.Helper()
		_, rows, err := l.e.Query(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return len(rows)
	}
	run("BEGIN")
	run("INSERT INTO t VALUES (100, 1, 100)")
	if n := run("SELECT id, FLIP_LABEL(y, 1, 2) FROM t"); n != 21 {
		t.Fatalf("the release inside the transaction returned %d rows, want 21 (its own insert included)", n)
	}
	run("ROLLBACK")
	if n := l.count("SELECT count(*) FROM ldpsql.t WHERE id = 100"); n != 0 {
		t.Fatal("ROLLBACK kept the transaction's insert")
	}
	if n := l.count("SELECT count(*) FROM ldpsql_catalog.ldp_releases"); n != 21 {
		t.Fatalf("%d releases recorded after ROLLBACK, want 21", n)
	}
	if s := l.spent("t"); s["0"] != 1 || s["19"] != 1 || s["100"] != 1 {
		t.Fatalf("ROLLBACK refunded a charge: %v", s)
	}
}
