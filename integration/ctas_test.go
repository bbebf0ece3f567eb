package integration

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A failed CREATE TABLE … AS SELECT leaves nothing over the MySQL protocol (issue #20 item 6): no table
// and no charge, whether it fails on the budget (an analyst on a protected table), on a bad label, on a
// duplicate key after its releases were accepted, or on a value it cannot compute (no ledger at all);
// and the same statement, its cause fixed, then succeeds, charging exactly its rows' releases once.
func TestCreateSelectFailureLeavesNothing(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "ctas.duckdb"))
	root := s.connect("root", "")
	fillAux(t, root, "people", 300) // id, f (8 features), y (0 or 1)
	mustExec(t, root, "CALL ldp_set_budget('people', 3)")
	analyst := s.readmeAnalyst(root)
	ledger := func() (int64, float64) { return ledgerTotals(t, root, "people") }
	units := func() (n int64, lo, hi float64) {
		t.Helper()
		var l, h sql.NullFloat64
		if err := root.QueryRow("SELECT COUNT(*), MIN(spent), MAX(spent) FROM ldpsql_catalog.ldp_budget_units WHERE table_name = 'people'").Scan(&n, &l, &h); err != nil {
			t.Fatal(err)
		}
		return n, l.Float64, h.Float64
	}
	fails := func(db *sql.DB, q, want string) { t.Helper(); execFails(t, db, q, want) }
	absent := func(db *sql.DB, dbName, table string) {
		t.Helper()
		for _, r := range mustQueryAll(t, db, "SHOW TABLES FROM "+dbName) {
			if strings.EqualFold(r[0], table) {
				t.Fatalf("the failed CREATE TABLE … AS SELECT left %s.%s", dbName, table)
			}
		}
	}
	unchanged := func(wantReleases int64, wantSpent float64) {
		t.Helper()
		if n, sp := ledger(); n != wantReleases || sp != wantSpent {
			t.Fatalf("the ledger holds %d releases (ε %g in all), want %d (ε %g)", n, sp, wantReleases, wantSpent)
		}
	}

	// The analyst, over budget (ε 4 of 3): nothing written, nothing charged; the retry at ε 2 succeeds.
	fails(analyst, "CREATE TABLE scratch.rel AS SELECT id, FLIP_LABEL(y, 4, 2) AS y FROM ldpsql.people", "budget exceeded")
	absent(root, "scratch", "rel")
	unchanged(0, 0)
	mustExec(t, analyst, "CREATE TABLE scratch.rel AS SELECT id, FLIP_LABEL(y, 2, 2) AS y FROM ldpsql.people")
	if n := scalarInt(t, root, "SELECT COUNT(*) FROM scratch.rel"); n != 300 {
		t.Fatalf("scratch.rel has %d rows, want 300", n)
	}
	unchanged(300, 600)

	// A duplicate key in the new table, after the releases were accepted: the rows and their charges
	// commit together, so neither does. Fixed (one row per key), it charges ε 0.5 to every unit.
	const dup = "CREATE TABLE scratch.keyed (k INT PRIMARY KEY, y INT) AS SELECT 1 AS k, FLIP_LABEL(y, 0.5, 2) AS y FROM ldpsql.people"
	fails(analyst, dup, "duplicate")
	absent(root, "scratch", "keyed")
	unchanged(300, 600)
	mustExec(t, analyst, strings.Replace(dup, "SELECT 1 AS k", "SELECT id AS k", 1))
	unchanged(600, 750)
	if n, lo, hi := units(); n != 300 || lo != 2.5 || hi != 2.5 {
		t.Fatalf("%d units charged, spent %g..%g; want 300 units, each ε 2.5", n, lo, hi)
	}

	// The DBA, a bad label (5 is outside K = 2): nothing; fixed, it succeeds.
	fails(root, "CREATE TABLE lab AS SELECT id, FLIP_LABEL(y + 5, 0.25, 2) AS y FROM people", "label")
	absent(root, "ldpsql", "lab")
	unchanged(600, 750)
	mustExec(t, root, "CREATE TABLE lab AS SELECT id, FLIP_LABEL(y, 0.25, 2) AS y FROM people")
	unchanged(900, 825)

	// No ledger: a value the SELECT cannot compute part way through.
	mustExec(t, root, "CREATE TABLE js (id INT PRIMARY KEY, j VARCHAR(20))")
	mustExec(t, root, `INSERT INTO js VALUES (1, '{"a": 1}'), (2, '{"a": 2}'), (3, 'not json')`)
	const bad = "CREATE TABLE js2 AS SELECT id, JSON_EXTRACT(j, '$.a') AS a FROM js"
	if _, err := root.Exec(bad); err == nil {
		t.Fatal("a CTAS over invalid JSON succeeded")
	}
	absent(root, "ldpsql", "js2")
	if _, err := root.Exec(bad); err == nil || strings.Contains(err.Error(), "already exists") {
		t.Fatalf("the retry: %v, want the same JSON error, not 'already exists'", err)
	}
	mustExec(t, root, "UPDATE js SET j = '{\"a\": 3}' WHERE id = 3")
	mustExec(t, root, bad)
	if n := scalarInt(t, root, "SELECT COUNT(*) FROM js2"); n != 3 {
		t.Fatalf("js2 has %d rows, want 3", n)
	}
}

// SIGKILL during a CREATE TABLE … AS SELECT of releases of a protected table, at points from before its
// rows are computed to after they commit: after the restart its table is there with every row and
// exactly their charges, or absent with none — never empty, never charged without its rows.
func TestKillDuringCreateSelect(t *testing.T) {
	const rows = 20000
	path := filepath.Join(t.TempDir(), "kill.duckdb")
	srv := startServer(t, path)
	db := srv.connect("root", "")
	fillWide(t, db, "src", rows, 4)
	mustExec(t, db, "CALL ldp_set_budget('src', 10, 'charge')")
	releases := int64(0)
	outcomes := map[string]int{}
	for i, delay := range []time.Duration{5 * time.Millisecond, 60 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond, 1200 * time.Millisecond} {
		name := fmt.Sprintf("c%d", i)
		done := make(chan error, 1)
		go func() {
			_, err := db.Exec(fmt.Sprintf("CREATE TABLE %s AS SELECT id, FLIP_LABEL(y, 0.5, 4) AS y FROM src", name))
			done <- err
		}()
		time.Sleep(delay)
		srv.kill()
		clientErr := <-done
		srv = startServer(t, path)
		db = srv.connect("root", "")
		exists := tableExists(t, db, name)
		now := scalarInt(t, db, "SELECT COUNT(*) FROM ldpsql_catalog.ldp_releases WHERE table_name = 'src'")
		outcome := "absent"
		if exists {
			outcome = "written"
			if n := scalarInt(t, db, "SELECT COUNT(*) FROM "+name); n != rows {
				t.Errorf("%s (SIGKILL after %v): %d rows, want all %d", name, delay, n, rows)
			}
			if now-releases != rows {
				t.Errorf("%s (SIGKILL after %v): written with %d releases charged, want %d", name, delay, now-releases, rows)
			}
		} else {
			if now != releases {
				t.Errorf("%s (SIGKILL after %v): absent, but %d releases charged", name, delay, now-releases)
			}
			if clientErr == nil {
				t.Errorf("%s (SIGKILL after %v): the client was told it succeeded, but it is absent", name, delay)
			}
		}
		if strings.Contains(srv.stderr.String(), "left empty by a CREATE TABLE") {
			outcome += ", its empty table dropped at the restart"
		}
		outcomes[outcome]++
		t.Logf("%s: SIGKILL %v into the statement: %s (the client got %v)", name, delay, outcome, clientErr)
		releases = now
	}
	t.Logf("outcomes: %v", outcomes)
}
