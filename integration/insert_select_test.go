package integration

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An INSERT … SELECT of releases commits its rows with their charges over the MySQL protocol (issue #20
// item 6): one that fails after its releases were accepted — a duplicate key, a NOT NULL column —
// leaves neither rows nor charges, one over the budget fails before writing, REPLACE … SELECT and a
// server-side prepared INSERT … SELECT charge exactly their rows' releases, and inside a client's
// transaction the releases are charged when the statement writes and stay charged after ROLLBACK (or
// after the statement fails and takes the transaction with it), as the README says.
func TestInsertSelectChargesWithItsRows(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "insel.duckdb"))
	root := s.connect("root", "")
	fillAux(t, root, "people", 300) // id, f (8 features), y (0 or 1)
	mustExec(t, root, "CALL ldp_set_budget('people', 3)")
	analyst := s.readmeAnalyst(root)
	mustExec(t, root, "CREATE TABLE scratch.k (id INT PRIMARY KEY, y INT NOT NULL)")
	ledger := func() (int64, float64) { return ledgerTotals(t, root, "people") }
	// exact: the ledger holds these releases, and the units' spending adds up to them.
	exact := func(wantReleases int64, wantSpent float64) {
		t.Helper()
		if n, sp := ledger(); n != wantReleases || sp != wantSpent {
			t.Fatalf("the ledger holds %d releases (ε %g in all), want %d (ε %g)", n, sp, wantReleases, wantSpent)
		}
		var units sql.NullFloat64
		if err := root.QueryRow("SELECT SUM(spent) FROM ldpsql_catalog.ldp_budget_units WHERE table_name = 'people'").Scan(&units); err != nil {
			t.Fatal(err)
		}
		if units.Float64 != wantSpent {
			t.Fatalf("the units have spent ε %g in all, their releases ε %g", units.Float64, wantSpent)
		}
	}
	rows := func() int64 { return scalarInt(t, root, "SELECT COUNT(*) FROM scratch.k") }
	fails := func(db *sql.DB, q, want string) { t.Helper(); execFails(t, db, q, want) }

	// A duplicate key within the statement, after the releases were accepted: nothing.
	fails(analyst, "INSERT INTO scratch.k SELECT 1, FLIP_LABEL(y, 0.5, 2) FROM ldpsql.people", "duplicate")
	exact(0, 0)
	// A key already stored: nothing more than that row.
	mustExec(t, root, "INSERT INTO scratch.k VALUES (42, 0)")
	fails(analyst, "INSERT INTO scratch.k SELECT id, FLIP_LABEL(y, 0.5, 2) FROM ldpsql.people", "duplicate")
	exact(0, 0)
	// A NOT NULL column.
	fails(root, "INSERT INTO scratch.k SELECT id + 1000, NULLIF(FLIP_LABEL(y, 0.5, 2), FLIP_LABEL(y, 0.5, 2)) FROM people", "null")
	exact(0, 0)
	if n := rows(); n != 1 {
		t.Fatalf("scratch.k has %d rows after the failed statements, want 1", n)
	}
	// Over the budget (ε 4 of 3): refused before anything is written.
	fails(analyst, "INSERT INTO scratch.k SELECT id + 1000, FLIP_LABEL(y, 4, 2) FROM ldpsql.people", "budget exceeded")
	exact(0, 0)

	// Fixed: 300 rows and exactly their 300 charges; then REPLACE, and a server-side prepared statement.
	mustExec(t, root, "DELETE FROM scratch.k")
	mustExec(t, analyst, "INSERT INTO scratch.k SELECT id, FLIP_LABEL(y, 0.5, 2) FROM ldpsql.people")
	exact(300, 150)
	mustExec(t, root, "REPLACE INTO scratch.k SELECT id, FLIP_LABEL(y, 0.25, 2) FROM ldpsql.people") // REPLACE needs DELETE, which the analyst lacks
	exact(600, 225)
	mustExec(t, root, "CREATE TABLE scratch.p (id INT PRIMARY KEY, y INT)")
	res, err := analyst.Exec("INSERT INTO scratch.p SELECT id, FLIP_LABEL(y, ?, 2) FROM ldpsql.people", 0.125)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 300 {
		t.Fatalf("the prepared INSERT … SELECT reports %d rows affected, want 300", n)
	}
	exact(900, 262.5)

	// Inside a client's transaction: charged when the statement writes, and not refunded by ROLLBACK,
	// nor when a failing statement rolls the transaction back.
	ctx := context.Background()
	conn, err := root.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{"BEGIN", "DELETE FROM scratch.k", "INSERT INTO scratch.k SELECT id, FLIP_LABEL(y, 0.0625, 2) FROM people", "ROLLBACK"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if n := rows(); n != 300 {
		t.Fatalf("scratch.k has %d rows after the ROLLBACK, want the 300 of before", n)
	}
	exact(1200, 281.25)
	if _, err := conn.ExecContext(ctx, "SET autocommit = 0"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "INSERT INTO scratch.p SELECT 7, FLIP_LABEL(y, 0.03125, 2) FROM people"); err == nil ||
		!strings.Contains(strings.ToLower(err.Error()), "duplicate") {
		t.Fatalf("an INSERT … SELECT of one key 300 times in a transaction: %v, want a duplicate-key error", err)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if n := scalarInt(t, root, "SELECT COUNT(*) FROM scratch.p"); n != 300 {
		t.Fatalf("scratch.p has %d rows, want 300", n)
	}
	exact(1500, 290.625)
}

// SIGKILL during an INSERT … SELECT of releases of a protected table, at points from before its rows
// are computed to after they commit: after the restart the destination holds every row with exactly
// their charges, or none of them with none.
func TestKillDuringInsertSelect(t *testing.T) {
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
		mustExec(t, db, fmt.Sprintf("CREATE TABLE %s (id INT PRIMARY KEY, y INT)", name))
		done := make(chan error, 1)
		go func() {
			_, err := db.Exec(fmt.Sprintf("INSERT INTO %s SELECT id, FLIP_LABEL(y, 0.5, 4) FROM src", name))
			done <- err
		}()
		time.Sleep(delay)
		srv.kill()
		clientErr := <-done
		srv = startServer(t, path)
		db = srv.connect("root", "")
		n := scalarInt(t, db, "SELECT COUNT(*) FROM "+name)
		now := scalarInt(t, db, "SELECT COUNT(*) FROM ldpsql_catalog.ldp_releases WHERE table_name = 'src'")
		outcome := "absent"
		switch {
		case n == rows && now-releases == rows:
			outcome = "written"
		case n == 0 && now == releases:
			if clientErr == nil {
				t.Errorf("%s (SIGKILL after %v): the client was told it succeeded, but no row is there", name, delay)
			}
		default:
			t.Errorf("%s (SIGKILL after %v): %d rows with %d releases charged, want %d with %d or none with none", name, delay, n, now-releases, rows, rows)
		}
		outcomes[outcome]++
		t.Logf("%s: SIGKILL %v into the statement: %s (the client got %v)", name, delay, outcome, clientErr)
		releases = now
	}
	t.Logf("outcomes: %v", outcomes)
}
