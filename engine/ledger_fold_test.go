package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Between folds, every read of the units' spending (Ledger.Spent, a SQL SELECT of ldp_budget_units,
// the unit-columns check of SetBudget, the charge check after a reopen) counts the releases the fold has
// not reached; a fold moves them into ldp_budget_units without changing any read.
func TestLedgerFoldReadsExact(t *testing.T) {
	t.Setenv("LDPSQL_LEDGER_FOLD_INTERVAL", "24h") // no background fold during the test
	path := filepath.Join(t.TempDir(), "db.duckdb")
	e := openT(t, path)
	ctx := context.Background()
	tbl := TableRef{Database: "ldpsql", Table: "t"}
	if err := e.Ledger.SetBudget(ctx, Budget{TableRef: tbl, EpsTotal: 4, Mode: BudgetCharge, UnitColumns: []string{"id"}}); err != nil {
		t.Fatal(err)
	}
	unit := func(u int) string { return unitCharges(tbl, 1, "", u)[0].Unit }
	units := []string{unit(0), unit(1), unit(2)}
	want := map[string]float64{units[0]: 0, units[1]: 0, units[2]: 0}
	charge := func(eps float64, tag string, us ...int) {
		t.Helper()
		if err := e.Ledger.Charge(ctx, "root", unitCharges(tbl, eps, tag, us...)); err != nil {
			t.Fatal(err)
		}
		for _, u := range us {
			want[unit(u)] += eps
		}
	}
	check := func(when string, folded int64) {
		t.Helper()
		spent, err := e.Ledger.Spent(ctx, tbl, units)
		if err != nil {
			t.Fatal(err)
		}
		rows := mustQuery(t, e, "SELECT unit_key, spent, releases FROM ldpsql_catalog.ldp_budget_units WHERE table_name = 't'")
		sqlSpent := map[string]float64{}
		for _, r := range rows {
			sqlSpent[r[0].(string)] = r[1].(float64)
		}
		for _, u := range units {
			if spent[u] != want[u] || sqlSpent[u] != want[u] {
				t.Errorf("%s: unit %s: Spent says %v, SELECT says %v, want %v", when, u, spent[u], sqlSpent[u], want[u])
			}
		}
		if n := countRows(t, e, "SELECT count(*) FROM ldpsql_catalog.ldp_releases WHERE id > (SELECT folded_through FROM ldpsql_catalog.budget_fold)"); n != folded {
			t.Errorf("%s: %d releases wait for the fold, want %d", when, n, folded)
		}
	}
	charge(1, "a", 0, 1)
	charge(0.5, "b", 1)
	check("before any fold", 3)
	if n := countRows(t, e, "SELECT count(*) FROM ldpsql_catalog.ldp_budget_units"); n != 0 {
		t.Errorf("a charge wrote %d rows of ldp_budget_units; only the fold should", n)
	}
	// The unit columns cannot change once a unit is charged, folded or not.
	if err := e.Ledger.SetBudget(ctx, Budget{TableRef: tbl, EpsTotal: 4, UnitColumns: []string{"other"}}); err == nil ||
		!strings.Contains(err.Error(), "2 units have been charged") {
		t.Errorf("changing the unit columns of charged units: %v", err)
	}
	if err := e.Ledger.Fold(); err != nil {
		t.Fatal(err)
	}
	check("after a fold", 0)
	charge(1, "c", 1, 2)
	check("after a fold and a charge", 2)
	// The budget is checked against folded and unfolded spending alike: unit 1 has 1.5 left.
	if err := e.Ledger.Charge(ctx, "root", unitCharges(tbl, 2, "over", 1)); err == nil {
		t.Error("a charge over unit 1's budget succeeded")
	}
	if err := e.Ledger.Fold(); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, e, "SELECT count(*) FROM ldpsql_catalog.ldp_budget_units"); n != 3 {
		t.Errorf("ldp_budget_units has %d rows after two folds, want one per unit: 3", n)
	}
	charge(0.25, "d", 0)
	// Without a clean close (the fold at close), the releases since the last fold are counted again on
	// the next open.
	e.Ledger.closeFold.Do(func() { close(e.Ledger.stopFold); <-e.Ledger.foldStopped })
	e.Ledger.mu.Lock()
	e.Ledger.closed = true // as after a crash: no fold at close
	e.Ledger.mu.Unlock()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openT(t, path)
	defer e.Close()
	check("after reopening", 0)
	if err := e.Ledger.Charge(ctx, "root", unitCharges(tbl, 1.5, "over", 1)); err != nil {
		t.Errorf("unit 1 has exactly 1.5 left after the reopen: %v", err)
	}
	if err := e.Ledger.Charge(ctx, "root", unitCharges(tbl, 2.75+1e-6, "over2", 0)); err == nil {
		t.Error("unit 0 has 2.75 left after the reopen; a charge of more succeeded")
	}
}

// A RENAME of a protected table moves its ledger rows while the background fold may be updating them:
// it runs under the ledger's lock, so it never meets the fold (or a charge) as a DuckDB write conflict.
func TestRenameProtectedTableDuringFolds(t *testing.T) {
	t.Setenv("LDPSQL_LEDGER_FOLD_INTERVAL", "1ms")
	e := openT(t, filepath.Join(t.TempDir(), "db.duckdb"))
	defer e.Close()
	ctx := context.Background()
	mustQuery(t, e, "CREATE TABLE t0 (id INT PRIMARY KEY)")
	names := []string{"t0", "t1"}
	tbl := TableRef{Database: "ldpsql", Table: "t0"}
	if err := e.Ledger.SetBudget(ctx, Budget{TableRef: tbl, EpsTotal: 1e6, Mode: BudgetCharge, UnitColumns: []string{"id"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 150 {
		tbl.Table = names[i%2]
		if err := e.Ledger.Charge(ctx, "root", unitCharges(tbl, 1, fmt.Sprint(i), 0, 1, 2, 3)); err != nil {
			t.Fatalf("charge %d: %v", i, err)
		}
		time.Sleep(time.Duration(i%3) * time.Millisecond) // let a fold start, sometimes
		if _, _, err := e.Query(e.NewContext(ctx), "RENAME TABLE "+names[i%2]+" TO "+names[(i+1)%2]); err != nil {
			t.Fatalf("rename %d: %v", i, err)
		}
	}
	tbl.Table = names[0]
	spent, err := e.Ledger.Spent(ctx, tbl, []string{unitCharges(tbl, 1, "", 0)[0].Unit})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range spent {
		if v != 150 {
			t.Fatalf("after 150 charges of 1 across 150 renames: spent %v", spent)
		}
	}
}
