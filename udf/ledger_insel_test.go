package udf_test

import (
	"strings"
	"testing"
)

// An INSERT … SELECT of releases commits its rows and their charges together (engine/ledger_tx.go): one
// whose write fails after its releases were accepted — a duplicate key within the statement or with a
// stored row, a NOT NULL column, a value the column cannot hold — leaves neither rows nor charges, one
// over its budget fails before writing anything, and the same statement with its cause fixed charges
// exactly its rows' releases once. REPLACE … SELECT, INSERT IGNORE … SELECT and INSERT … SELECT … ON
// DUPLICATE KEY UPDATE take the same path.
func TestLedgerInsertSelectChargesWithItsRows(t *testing.T) {
	l := newLedgerEngine(t, "")
	l.fillT("t", 20)
	l.q("CALL ldp_set_budget('t', 1)")
	l.q("CREATE TABLE d (k INT PRIMARY KEY, r INT NOT NULL)")
	releases := func() int64 {
		return l.count("SELECT count(*) FROM ldpsql_catalog.ldp_releases WHERE table_name = 't'")
	}
	rows := func() int64 { return l.count("SELECT count(*) FROM ldpsql.d") }
	// exact: the ledger holds n releases, and every unit has spent what its releases say.
	exact := func(n int64) {
		t.Helper()
		if got := releases(); got != n {
			t.Fatalf("the ledger records %d releases, want %d", got, n)
		}
		if bad := l.count(`SELECT count(*) FROM ldpsql_catalog.ldp_budget_units u WHERE table_name = 't' AND abs(spent -
			(SELECT coalesce(sum(eps), 0) FROM ldpsql_catalog.ldp_releases r WHERE r.table_name = 't' AND r.unit_key = u.unit_key)) > 1e-9`); bad != 0 {
			t.Fatalf("%d units' spending differs from their releases", bad)
		}
	}
	fails := func(q, want string) {
		t.Helper()
		if _, err := l.as("root", q); err == nil || !strings.Contains(strings.ToLower(err.Error()), want) {
			t.Fatalf("%s: %v, want an error with %q", q, err, want)
		}
	}

	// Every row has key 1: the insert fails at the second row, after the gate accepted the charges.
	fails("INSERT INTO d SELECT 1, FLIP_LABEL(y, 0.25, 2) FROM t", "duplicate")
	if n := rows(); n != 0 {
		t.Fatalf("the failed INSERT … SELECT left %d rows", n)
	}
	if s := l.spent("t"); len(s) != 0 {
		t.Fatalf("the failed INSERT … SELECT charged units: %v", s)
	}
	exact(0)
	// A key already stored (found when the appended rows commit).
	l.q("INSERT INTO d VALUES (7, 0)")
	fails("INSERT INTO d SELECT id, FLIP_LABEL(y, 0.25, 2) FROM t", "duplicate")
	exact(0)
	// A NOT NULL column, and a value an INT cannot hold.
	fails("INSERT INTO d (k, r) SELECT id + 100, NULLIF(FLIP_LABEL(y, 0.25, 2), FLIP_LABEL(y, 0.25, 2)) FROM t", "null")
	exact(0)
	fails("INSERT INTO d (k, r) SELECT id + 100, CONCAT('x', FLIP_LABEL(y, 0.25, 2)) FROM t", "")
	exact(0)
	if n := rows(); n != 1 {
		t.Fatalf("d has %d rows after the failed statements, want the 1 stored before", n)
	}

	// Fixed: 20 new rows and exactly their 20 charges.
	l.q("DELETE FROM d")
	l.q("INSERT INTO d SELECT id, FLIP_LABEL(y, 0.25, 2) FROM t")
	if n := rows(); n != 20 {
		t.Fatalf("the INSERT … SELECT wrote %d rows, want 20", n)
	}
	exact(20)
	for u, s := range l.spent("t") {
		if s != 0.25 {
			t.Fatalf("unit %s spent %v, want 0.25", u, s)
		}
	}

	// REPLACE … SELECT and INSERT IGNORE … SELECT: the same.
	l.q("REPLACE INTO d SELECT id, FLIP_LABEL(y, 0.125, 2) FROM t")
	exact(40)
	l.q("INSERT INTO d SELECT id, FLIP_LABEL(y, 0.03125, 2) FROM t ON DUPLICATE KEY UPDATE r = 1 - r")
	exact(60)
	fails("INSERT INTO d SELECT id, NULLIF(FLIP_LABEL(y, 0.03125, 2), FLIP_LABEL(y, 0.03125, 2)) FROM t ON DUPLICATE KEY UPDATE r = 1 - r", "null")
	exact(60)
	l.q("CREATE TABLE e (k INT PRIMARY KEY, r INT NOT NULL)")
	fails("REPLACE INTO e SELECT id, CONCAT('x', FLIP_LABEL(y, 0.0625, 2)) FROM t", "")
	exact(60)
	l.q("INSERT IGNORE INTO e SELECT id % 10, FLIP_LABEL(y, 0.0625, 2) FROM t")
	if n := l.count("SELECT count(*) FROM ldpsql.e"); n != 10 {
		t.Fatalf("INSERT IGNORE … SELECT wrote %d rows, want 10", n)
	}
	exact(80)

	// Over budget (0.46875 spent of 1): refused before anything is written, nothing charged.
	fails("INSERT INTO d SELECT id + 100, FLIP_LABEL(y, 0.9, 2) FROM t", "budget exceeded")
	if n := rows(); n != 20 {
		t.Fatalf("the over-budget INSERT … SELECT left d with %d rows, want 20", n)
	}
	exact(80)
}
