package udf_test

import (
	"strings"
	"testing"
)

// A CREATE TABLE … AS SELECT of releases commits its rows and their charges together: one whose write
// fails after its releases were accepted (a duplicate key in the new table) leaves no table and no
// charge, and the same statement retried after the cause is fixed succeeds and charges exactly once.
func TestLedgerCreateSelectChargesWithItsRows(t *testing.T) {
	l := newLedgerEngine(t, "")
	l.fillT("t", 20)
	l.q("CALL ldp_set_budget('t', 1)")
	releases := func() int64 {
		return l.count("SELECT count(*) FROM ldpsql_catalog.ldp_releases WHERE table_name = 't'")
	}
	// Every row has key 1: the second row's insert fails, after the gate accepted the charges.
	const dup = "CREATE TABLE d (k INT PRIMARY KEY, r INT) AS SELECT 1 AS k, FLIP_LABEL(y, 0.25, 2) AS r FROM t"
	if _, err := l.as("root", dup); err == nil || !strings.Contains(strings.ToLower(err.Error()), "duplicate") {
		t.Fatalf("a CTAS writing one key twice: %v, want a duplicate-key error", err)
	}
	if n := releases(); n != 0 {
		t.Fatalf("the failed CTAS recorded %d releases, want 0", n)
	}
	if s := l.spent("t"); len(s) != 0 {
		t.Fatalf("the failed CTAS charged units: %v", s)
	}
	if _, err := l.as("root", "SELECT count(*) FROM d"); err == nil {
		t.Fatal("the failed CTAS left its table")
	}
	// Fixed: one row per key. The table and exactly its 20 charges.
	l.q("CREATE TABLE d (k INT PRIMARY KEY, r INT) AS SELECT id AS k, FLIP_LABEL(y, 0.25, 2) AS r FROM t")
	if n := l.count("SELECT count(*) FROM ldpsql.d"); n != 20 {
		t.Fatalf("the retried CTAS wrote %d rows, want 20", n)
	}
	if n := releases(); n != 20 {
		t.Fatalf("the retried CTAS recorded %d releases, want 20", n)
	}
	for u, s := range l.spent("t") {
		if s != 0.25 {
			t.Fatalf("unit %s spent %v, want 0.25", u, s)
		}
	}
	// Over budget: refused before anything is written, nothing charged, no table.
	if _, err := l.as("root", "CREATE TABLE e AS SELECT id, FLIP_LABEL(y, 0.9, 2) AS r FROM t"); err == nil || !strings.Contains(err.Error(), "budget exceeded") {
		t.Fatalf("an over-budget CTAS: %v", err)
	}
	if _, err := l.as("root", "SELECT count(*) FROM e"); err == nil {
		t.Fatal("the over-budget CTAS left its table")
	}
	if n := releases(); n != 20 {
		t.Fatalf("the over-budget CTAS recorded %d releases, want none more than 20", n)
	}
}
