package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// Over the MySQL protocol, and across a restart: on a protected table whose unit column has the default,
// insensitive collation, 'alice' and 'ALICE' are one unit (one budget, the ledger key 'alice'); in a
// utf8mb4_0900_bin column they are two.
func TestLedgerUnitsFollowCollationOverTheWire(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "data.duckdb")
	s := startServer(t, dbPath)
	root := s.connect("root", "")
	mustExec(t, root, "CREATE TABLE visits (vid INT PRIMARY KEY, person VARCHAR(40), y INT)")
	mustExec(t, root, "CREATE TABLE visits_bin (vid INT PRIMARY KEY, person VARCHAR(40) COLLATE utf8mb4_0900_bin, y INT)")
	for _, tbl := range []string{"visits", "visits_bin"} {
		mustExec(t, root, "INSERT INTO "+tbl+" VALUES (1, 'alice', 0), (2, 'ALICE', 1), (3, 'Álice', 0), (4, 'bob', 1)")
		mustExec(t, root, "CALL ldp_set_budget('"+tbl+"', 2.5, 'charge', 'person')")
	}
	analyst := s.readmeAnalyst(root)
	// The analyst names rows by the unit column only, so by its exact spelling. (visits_bin compares
	// bytes already; and after a restart, COLLATE utf8mb4_0900_bin on its column is refused as "not valid
	// for CHARACTER SET 'utf8mb4'", a bug of its own.)
	release := func(tbl, spelling string) error {
		where := "person COLLATE utf8mb4_0900_bin = ?"
		if tbl == "visits_bin" {
			where = "person = ?"
		}
		_, err := queryAll(analyst, fmt.Sprintf("SELECT person, FLIP_LABEL(y, 1, 2) FROM %s WHERE %s", tbl, where), spelling)
		return err
	}
	spent := func(tbl string) string {
		rows, err := queryAll(root, "SELECT unit_key, spent FROM ldpsql_catalog.ldp_budget_units WHERE table_name = ? ORDER BY unit_key COLLATE utf8mb4_0900_bin", tbl)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(rows)
	}
	for _, spelling := range []string{"alice", "ALICE"} {
		if err := release("visits", spelling); err != nil {
			t.Fatalf("release of %q: %v", spelling, err)
		}
		if err := release("visits_bin", spelling); err != nil {
			t.Fatalf("binary column, release of %q: %v", spelling, err)
		}
	}
	if got := spent("visits"); got != "[[alice 2]]" {
		t.Fatalf("insensitive unit column: spent %s, want alice 2 only", got)
	}
	if got := spent("visits_bin"); got != "[[ALICE 1] [alice 1]]" {
		t.Fatalf("binary unit column: spent %s", got)
	}

	// After a restart the columns keep their collations and the ledger its keys: a third spelling of
	// alice is over her budget (2 + 1 > 2.5); in the binary table it is a fresh unit.
	root.Close()
	analyst.Close()
	s.stop()
	s = startServer(t, dbPath)
	root = s.connect("root", "")
	analyst = s.connect("analyst", "pw")
	if err := release("visits", "Álice"); err == nil || !strings.Contains(err.Error(), "budget exceeded") {
		t.Fatalf("'Álice' after 'alice' and 'ALICE', across a restart: %v", err)
	}
	if err := release("visits", "bob"); err != nil {
		t.Fatalf("bob: %v", err)
	}
	if err := release("visits_bin", "Álice"); err != nil {
		t.Fatalf("binary column, 'Álice': %v", err)
	}
	if got := spent("visits"); got != "[[alice 2] [bob 1]]" {
		t.Fatalf("after the restart: %s", got)
	}
	if got := spent("visits_bin"); got != "[[ALICE 1] [alice 1] [Álice 1]]" {
		t.Fatalf("binary unit column after the restart: %s", got)
	}
}
