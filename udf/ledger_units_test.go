package udf_test

import (
	"fmt"
	"strings"
	"testing"
)

// A unit column's collation decides which spellings are one unit: in the default utf8mb4_0900_ai_ci
// 'alice', 'ALICE' and 'Álice' are one person with one budget (as they are one value in SQL), keyed by
// the canonical spelling 'alice'; in a binary column they stay three units.
func TestLedgerUnitsFollowCollation(t *testing.T) {
	l := newLedgerEngine(t, "")
	l.q("CREATE TABLE visits (vid INT PRIMARY KEY, person VARCHAR(40), y INT)") // the default collation: ai_ci
	l.q("CREATE TABLE visits_bin (vid INT PRIMARY KEY, person VARCHAR(40) COLLATE utf8mb4_0900_bin, y INT)")
	for _, tbl := range []string{"visits", "visits_bin"} {
		l.q("INSERT INTO " + tbl + " VALUES (1, 'alice', 0), (2, 'ALICE', 1), (3, 'Álice', 0), (4, 'bob', 1), (5, 'Bob', 0)")
		l.q("CALL ldp_set_budget('" + tbl + "', 2, 'charge', 'person')")
	}
	l.createAnalyst("analyst")
	// The analyst may name rows by the unit column only (vid is raw data), so by its exact spelling.
	spelling := map[int]string{1: "alice", 2: "ALICE", 3: "Álice", 4: "bob", 5: "Bob"}
	release := func(tbl string, vid int) error {
		_, err := l.as("analyst", fmt.Sprintf("SELECT person, FLIP_LABEL(y, 1, 2) FROM %s WHERE person COLLATE utf8mb4_0900_bin = '%s'", tbl, spelling[vid]))
		return err
	}
	// Insensitive: the release of 'alice' spends ALICE's budget; the third spelling is over it, and so
	// is 'alice' again.
	for _, vid := range []int{1, 2} {
		if err := release("visits", vid); err != nil {
			t.Fatalf("release of row %d: %v", vid, err)
		}
	}
	if s := l.spent("visits"); s["alice"] != 2 || len(s) != 1 {
		t.Fatalf("'alice' and 'ALICE' at ε 1 each: spent %v, want alice: 2 and no other unit", s)
	}
	for _, vid := range []int{3, 1, 2} {
		if err := release("visits", vid); err == nil || !strings.Contains(err.Error(), "budget exceeded") {
			t.Fatalf("row %d of the exhausted unit alice: %v", vid, err)
		}
	}
	// A DBA's explicit unit_key names a unit as the unit column would: 'BOB' is bob's budget.
	l.q("SELECT FLIP_LABEL(y, 1.5, 2, 'BOB') FROM visits WHERE vid = 1")
	if err := release("visits", 5); err == nil || !strings.Contains(err.Error(), "budget exceeded") {
		t.Fatalf("'Bob' after the DBA charged 'BOB' 1.5 of 2: %v", err)
	}
	if s := l.spent("visits"); s["bob"] != 1.5 || len(s) != 2 {
		t.Fatalf("after the explicit unit key: %v", s)
	}
	// An aggregate's releases fold the same way: RR_FREQUENCY over bob's rows is over his budget.
	if _, err := l.as("analyst", "SELECT RR_FREQUENCY(y, 0.5, 2, 1) FROM visits WHERE person = 'bob'"); err == nil || !strings.Contains(err.Error(), "budget exceeded") {
		t.Fatalf("RR_FREQUENCY over 'bob' and 'Bob' (2 × 0.5 on 1.5 of 2): %v", err)
	}

	// Binary: three units, each with its own budget.
	for _, vid := range []int{1, 2, 3} {
		if err := release("visits_bin", vid); err != nil {
			t.Fatalf("binary column, row %d: %v", vid, err)
		}
	}
	if s := l.spent("visits_bin"); s["alice"] != 1 || s["ALICE"] != 1 || s["Álice"] != 1 || len(s) != 3 {
		t.Fatalf("binary unit column: %v", s)
	}
}

// ldp_privatize keys its charges as the release functions do: a source whose 'alice' and 'ALICE' rows
// are one unit charges that unit for both rows, and refuses where the two together are over its budget.
func TestLedgerPrivatizeUnitsFollowCollation(t *testing.T) {
	l := newLedgerEngine(t, buildIdentityPlugin(t))
	l.q("CREATE TABLE aux (id INT PRIMARY KEY, f LONGBLOB)")
	l.q("INSERT INTO aux VALUES (1, LDP_VECTOR(0, 0)), (2, LDP_VECTOR(1, 1))")
	l.q(`CALL ldp_fit_mechanism('box', 'identity', 'aux', 'f', '{}')`)
	for _, tbl := range []string{"people", "people_bin"} {
		collate := ""
		if tbl == "people_bin" {
			collate = " COLLATE utf8mb4_0900_bin"
		}
		l.q("CREATE TABLE " + tbl + " (id INT PRIMARY KEY, person VARCHAR(40)" + collate + ", f LONGBLOB, y INT)")
		l.q("INSERT INTO " + tbl + " VALUES (1, 'alice', LDP_VECTOR(0.1, 0.2), 0), (2, 'ALICE', LDP_VECTOR(0.3, 0.4), 1), (3, 'carol', LDP_VECTOR(0.5, 0.6), 1)")
		l.q("CALL ldp_set_budget('" + tbl + "', 3, 'charge', 'person')")
	}
	// (An analyst's ldp_privatize may copy only unit columns, and these tables' primary key is id: the DBA
	// privatizes them.)
	// ε_x = 1 per row: alice's two rows spend 2 of 3.
	for _, tbl := range []string{"people", "people_bin"} {
		if _, err := l.as("root", fmt.Sprintf("CALL ldp_privatize('%s', 'f', '', '%s_1', 1, 1, 'box', 'laplace', 2)", tbl, tbl)); err != nil {
			t.Fatalf("ldp_privatize of %s: %v", tbl, err)
		}
	}
	if s := l.spent("people"); s["alice"] != 2 || s["carol"] != 1 || len(s) != 2 {
		t.Fatalf("insensitive source: %v", s)
	}
	if s := l.spent("people_bin"); s["alice"] != 1 || s["ALICE"] != 1 || len(s) != 3 {
		t.Fatalf("binary source: %v", s)
	}
	// Again: alice would reach 4 > 3 where her spellings are one unit; apart, each reaches 2.
	_, err := l.as("root", "CALL ldp_privatize('people', 'f', '', 'people_2', 1, 1, 'box', 'laplace', 2)")
	if err == nil || !strings.Contains(err.Error(), "budget exceeded") {
		t.Fatalf("the second ldp_privatize of the insensitive source: %v", err)
	}
	if s := l.spent("people"); s["alice"] != 2 {
		t.Fatalf("a refused ldp_privatize charged: %v", s)
	}
	if _, err := l.as("root", "CALL ldp_privatize('people_bin', 'f', '', 'people_bin_2', 1, 1, 'box', 'laplace', 2)"); err != nil {
		t.Fatalf("the second ldp_privatize of the binary source: %v", err)
	}
}

// LDP_UNIT_KEY names a row's unit as the ledger does, whatever the unit columns' types (a decimal, a
// date and a binary string here, and a folded string): the unit a server-side release of the row is
// charged to is the key LDP_UNIT_KEY gives its unit columns. An analyst may apply it to the unit
// columns, which they may read anyway, and to no other column of a protected table.
func TestLDPUnitKeyIsTheLedgersKey(t *testing.T) {
	l := newLedgerEngine(t, "")
	l.q("CREATE TABLE acct (id INT PRIMARY KEY, amount DECIMAL(10,2), day DATE, tag VARBINARY(4), who VARCHAR(20), y INT)")
	l.q("INSERT INTO acct VALUES (1, 12.50, '2024-01-02', X'00ff', 'ÁLICE', 0), (2, -3.00, '1999-12-31', X'', 'bob', 1)")
	for i, units := range []string{"amount", "day", "tag", "who", "amount,day,tag"} {
		t.Run(units, func(t *testing.T) {
			u := fmt.Sprintf("u%d", i)
			l.q("CREATE TABLE " + u + " AS SELECT * FROM acct")
			l.q(fmt.Sprintf("CALL ldp_set_budget('%s', 10, 'charge', '%s')", u, units))
			want := map[string]float64{}
			for _, id := range []int{1, 2} {
				l.q(fmt.Sprintf("SELECT FLIP_LABEL(y, 1, 2) FROM %s WHERE id = %d", u, id))
				key := l.q(fmt.Sprintf("SELECT LDP_UNIT_KEY(%s) FROM %s WHERE id = %d", units, u, id))[0][0].(string)
				want[key]++
			}
			if got := l.spent(u); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("the ledger charged %v; LDP_UNIT_KEY names %v", got, want)
			}
		})
	}
	if k := l.q("SELECT LDP_UNIT_KEY(amount), LDP_UNIT_KEY(day), LDP_UNIT_KEY(tag), LDP_UNIT_KEY(who), LDP_UNIT_KEY(id, who), LDP_UNIT_KEY(NULL, 1) FROM acct WHERE id = 1"); fmt.Sprint(k) != `[[12.5 2024-01-02T00:00:00Z x'00ff' alice ["1","alice"] <nil>]]` {
		t.Errorf("LDP_UNIT_KEY of row 1: %v", k)
	}
	l.q("CALL ldp_set_budget('acct', 10, 'charge', 'who')")
	l.createAnalyst("analyst")
	if _, err := l.as("analyst", "SELECT LDP_UNIT_KEY(who) FROM acct"); err != nil {
		t.Errorf("an analyst's LDP_UNIT_KEY of the unit column: %v", err)
	}
	for _, q := range []string{"SELECT LDP_UNIT_KEY(amount) FROM acct", "SELECT LDP_UNIT_KEY(who, y) FROM acct", "SELECT who FROM acct WHERE LDP_UNIT_KEY(y) = '1'"} {
		if _, err := l.as("analyst", q); err == nil || !strings.Contains(err.Error(), "denied") {
			t.Errorf("analyst: %s: %v, want access denied", q, err)
		}
	}
}
