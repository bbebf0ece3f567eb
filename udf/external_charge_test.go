package udf_test

import (
	"fmt"
	"strings"
	"testing"
)

// externalStatus runs ldp_charge_external as root and returns each unit's status and releases.
func (l *ledgerT) externalStatus(table, batch string, epsX, epsY float64, units string) map[string]string {
	l.t.Helper()
	rows := l.q(fmt.Sprintf("CALL ldp_charge_external('%s', '%s', %g, %g, '%s')", table, batch, epsX, epsY, units))
	out := map[string]string{}
	for _, r := range rows {
		out[r[0].(string)] = fmt.Sprintf("%v %v", r[1], r[2])
	}
	return out
}

// ldp_charge_external charges each released row to its unit (ε_x + ε_y each), refuses the units that
// would go over their budget without charging them, charges a retried batch once, refuses a batch id
// reused for other releases, and is the DBA's alone.
func TestChargeExternal(t *testing.T) {
	for _, mode := range []string{"memoise", "charge"} {
		t.Run(mode, func(t *testing.T) {
			l := newLedgerEngine(t, "")
			l.fillT("t", 10)
			l.q(fmt.Sprintf("CALL ldp_set_budget('t', 3, '%s')", mode))

			// Unit 1 spends 2 before the job: a release of 1.5 takes it over its budget of 3; so do three of
			// unit 2.
			got := l.externalStatus("t", "warm-up", 1, 1, `["1"]`)
			if got["1"] != "1 charged" {
				t.Fatalf("warm-up: %v", got)
			}
			got = l.externalStatus("t", "job/p0/b0", 1, 0.5, `["0", "1", "2", "2", "2"]`)
			want := map[string]string{"0": "1 charged", "1": "1 refused", "2": "3 refused"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("first call: %v, want %v", got, want)
			}
			if s := l.spent("t"); s["0"] != 1.5 || s["1"] != 2 || s["2"] != 0 {
				t.Fatalf("spent after the first call: %v", s)
			}
			// Unit 3 has two rows in one batch: 2 × 1.5 = 3, exactly its budget.
			if got := l.externalStatus("t", "job/p0/b1", 1, 0.5, `["3", "3"]`); got["3"] != "2 charged" {
				t.Fatalf("two rows of a unit: %v", got)
			}
			// The retry of a batch (a rerun job) charges nothing again.
			got = l.externalStatus("t", "job/p0/b0", 1, 0.5, `["0", "1", "2", "2", "2"]`)
			want = map[string]string{"0": "1 already charged", "1": "1 refused", "2": "3 refused"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("retry: %v, want %v", got, want)
			}
			if s := l.spent("t"); s["0"] != 1.5 || s["3"] != 3 {
				t.Fatalf("spent after the retry: %v", s)
			}
			// The same batch id for other releases of a unit it charged is refused, not taken as a retry.
			if got := l.externalStatus("t", "job/p0/b0", 1, 0.5, `["0", "0"]`); got["0"] != "2 refused" {
				t.Fatalf("a reused batch id: %v", got)
			}
			if got := l.externalStatus("t", "job/p0/b0", 0.5, 0.5, `["0"]`); got["0"] != "1 refused" {
				t.Fatalf("a reused batch id at another ε: %v", got)
			}
			// Every charge is in ldp_releases: 1 warm-up ×2, unit 0 ×2, unit 3 2×2.
			if n := l.count("SELECT count(*) FROM ldpsql_catalog.ldp_releases WHERE function_name = 'ldp_charge_external'"); n != 8 {
				t.Fatalf("%d releases recorded, want 8", n)
			}
			if s := l.spent("t"); s["0"] != 1.5 || s["1"] != 2 {
				t.Fatalf("spent at the end: %v", s)
			}

			for _, bad := range []struct{ call, want string }{
				{`CALL ldp_charge_external('open_t', 'b', 1, 0, '["1"]')`, "not found"},
				{`CALL ldp_charge_external('t', '', 1, 0, '["1"]')`, "batch id"},
				{`CALL ldp_charge_external('t', 'b', 0, 0, '["1"]')`, "eps_x 0 is not a release ε"},
				{`CALL ldp_charge_external('t', 'b', 1, -1, '["1"]')`, "eps_y -1"},
				{`CALL ldp_charge_external('t', 'b', 1, 0, '[1]')`, "a JSON array of unit keys"},
				{`CALL ldp_charge_external('t', 'b', 1, 0, '["1", ""]')`, "unit 2 of the array is empty"},
			} {
				if _, err := l.as("root", bad.call); err == nil || !strings.Contains(err.Error(), bad.want) {
					t.Errorf("%s: %v, want %q", bad.call, err, bad.want)
				}
			}
			l.fillT("pub", 3)
			if _, err := l.as("root", `CALL ldp_charge_external('pub', 'b', 1, 0, '["1"]')`); err == nil || !strings.Contains(err.Error(), "has no privacy budget") {
				t.Errorf("an unprotected table: %v", err)
			}

			// An analyst, even granted EXECUTE on the procedure itself, is refused and charges nothing.
			l.createAnalyst("analyst")
			l.q("GRANT EXECUTE ON PROCEDURE ldpsql.ldp_charge_external TO analyst@'%'")
			if _, err := l.as("analyst", `CALL ldp_charge_external('t', 'x', 1, 0, '["5"]')`); err == nil || !strings.Contains(err.Error(), "only a DBA") {
				t.Errorf("an analyst: %v", err)
			}
			if s := l.spent("t"); s["5"] != 0 {
				t.Errorf("the analyst's call charged unit 5: %v", s)
			}
		})
	}
}

// Keys sent by an ETL job fold as the unit column's collation compares them: 'ALICE' and 'Álice' are
// the unit SQL's releases of 'alice' charge (one budget), each answered under the key as sent; a binary
// unit column keeps them apart.
func TestChargeExternalFoldsUnitKeys(t *testing.T) {
	l := newLedgerEngine(t, "")
	l.q("CREATE TABLE visits (vid INT PRIMARY KEY, person VARCHAR(40), y INT)")
	l.q("CREATE TABLE visits_bin (vid INT PRIMARY KEY, person VARCHAR(40) COLLATE utf8mb4_0900_bin, y INT)")
	for _, tbl := range []string{"visits", "visits_bin"} {
		l.q("INSERT INTO " + tbl + " VALUES (1, 'alice', 0), (2, 'ALICE', 1)")
		l.q("CALL ldp_set_budget('" + tbl + "', 2, 'charge', 'person')")
	}
	l.q("SELECT FLIP_LABEL(y, 1, 2) FROM visits WHERE vid = 1") // alice spends 1 of 2 in SQL
	got := l.externalStatus("visits", "job/b0", 0.5, 0, `["ALICE", "Álice", "bob"]`)
	want := map[string]string{"ALICE": "1 charged", "Álice": "1 charged", "bob": "1 charged"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("insensitive unit column: %v, want %v", got, want)
	}
	if s := l.spent("visits"); s["alice"] != 2 || s["bob"] != 0.5 || len(s) != 2 {
		t.Fatalf("spent %v, want alice 2 (1 in SQL, 2 × 0.5 sent as ALICE and Álice) and bob 0.5", s)
	}
	if got := l.externalStatus("visits", "job/b1", 0.5, 0, `["aLiCe"]`); got["aLiCe"] != "1 refused" {
		t.Fatalf("a fourth spelling of the exhausted unit: %v", got)
	}
	got = l.externalStatus("visits_bin", "job/b0", 1, 0, `["alice", "ALICE", "alice"]`)
	if got["alice"] != "2 charged" || got["ALICE"] != "1 charged" {
		t.Fatalf("binary unit column: %v", got)
	}
	if s := l.spent("visits_bin"); s["alice"] != 2 || s["ALICE"] != 1 {
		t.Fatalf("binary unit column: spent %v", s)
	}
}
