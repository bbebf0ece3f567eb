package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// PRIVATE_ACCURACY, RR_FREQUENCY and LDP_LAPLACE on a protected table over the MySQL protocol: an
// analyst may put raw columns inside them (PRIVATE_ACCURACY: any expression of the row), every row's
// release is charged to its unit before the result comes back, a repeat is memoised, over budget
// nothing comes back, and raw columns stay denied everywhere else.
func TestLedgerAggregatesOverTheWire(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "data.duckdb"))
	root := s.connect("root", "")
	fillAux(t, root, "people", 200) // id, f (8 features), y (0 or 1)
	mustExec(t, root, "CALL ldp_set_budget('people', 3)")
	analyst := s.readmeAnalyst(root)

	for _, q := range []string{
		"SELECT y FROM people",
		"SELECT PRIVATE_ACCURACY(y = 1, 1) FROM people WHERE y = 0",
		"SELECT PRIVATE_ACCURACY(y = @x, 1) FROM people",
		"SELECT RR_FREQUENCY(y, 1, 2, 1) FROM people GROUP BY y",
		"SELECT LDP_LAPLACE(y + 1, 1, 0, 2) FROM people",
	} {
		if rows, err := queryAll(analyst, q); err == nil || !strings.Contains(strings.ToLower(err.Error()), "denied") {
			t.Errorf("analyst: %s: %d rows, %v; want access denied", q, len(rows), err)
		}
	}

	spent := func() string {
		t.Helper()
		got, err := queryAll(root, "SELECT count(*), min(spent), max(spent) FROM ldpsql_catalog.ldp_budget_units WHERE table_name = 'people'")
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(got)
	}
	acc, err := queryAll(analyst, "SELECT PRIVATE_ACCURACY(y = 1, 1) FROM people")
	if err != nil || len(acc) != 1 || acc[0][0] == "" {
		t.Fatalf("analyst PRIVATE_ACCURACY: %v %v", acc, err)
	}
	again, err := queryAll(analyst, "SELECT PRIVATE_ACCURACY(y = 1, 1) FROM people")
	if err != nil || fmt.Sprint(again) != fmt.Sprint(acc) {
		t.Fatalf("the memoised repeat: %v (first %v), %v", again, acc, err)
	}
	if got := spent(); got != "[[200 1 1]]" {
		t.Fatalf("after PRIVATE_ACCURACY: %s", got)
	}
	if _, err := queryAll(analyst, "SELECT RR_FREQUENCY(y, 1, 2, 1), RR_FREQUENCY(y, 1, 2, 0) FROM people"); err != nil {
		t.Fatalf("analyst RR_FREQUENCY: %v", err)
	}
	if rows, err := queryAll(analyst, "SELECT id, LDP_LAPLACE(y, 1, 0, 1) FROM people"); err != nil || len(rows) != 200 {
		t.Fatalf("analyst LDP_LAPLACE: %d rows, %v", len(rows), err)
	}
	if got := spent(); got != "[[200 3 3]]" {
		t.Fatalf("after RR_FREQUENCY and LDP_LAPLACE: %s", got)
	}
	// Over budget: an error and no row, for each of the three.
	for _, q := range []string{
		"SELECT PRIVATE_ACCURACY(y = 0, 0.5) FROM people",
		"SELECT RR_FREQUENCY(y, 0.5, 2, 1) FROM people",
		"SELECT id, LDP_LAPLACE(y, 0.5, 0, 1) FROM people",
	} {
		rows, err := queryAll(analyst, q)
		if err == nil || len(rows) != 0 || !strings.Contains(err.Error(), "budget exceeded") {
			t.Errorf("over budget: %s: %d rows, %v", q, len(rows), err)
		}
	}
	if got := spent(); got != "[[200 3 3]]" {
		t.Fatalf("refused statements charged: %s", got)
	}
	got, err := queryAll(root, "SELECT function_name, count(*) FROM ldpsql_catalog.ldp_releases GROUP BY 1 ORDER BY 1")
	if err != nil || fmt.Sprint(got) != "[[LDP_LAPLACE 200] [PRIVATE_ACCURACY 200] [RR_FREQUENCY 200]]" {
		t.Fatalf("ldp_releases: %v %v", got, err)
	}
}
