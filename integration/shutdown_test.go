package integration

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SIGTERM during a long ldp_privatize of a protected table (issue #20 item 6): the server lets the
// running statement finish within its grace period, or cancels it after, and then checkpoints. After a
// restart the destination is either there with all its rows and exactly their charges, or absent with
// no charge; the DuckDB WAL was checkpointed (no .wal file, or an empty one).
func TestShutdownDuringPrivatize(t *testing.T) {
	const rows = 20000
	for _, tc := range []struct {
		name  string
		grace string
		after time.Duration // SIGTERM this long after the temporary table appears
		want  string        // "written" or "absent"
	}{
		{"waits", "60s", 0, "written"},
		{"cancels", "1ms", 50 * time.Millisecond, "absent"}, // "written" if it ended before the SIGTERM
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "term.duckdb")
			srv := startServer(t, path, "--shutdown-grace", tc.grace)
			db := srv.connect("root", "")
			fillWide(t, db, "src", rows, 16)
			mustExec(t, db, `CALL ldp_fit_mechanism('pca4', 'pca', 'src', 'f', '{"d": 4, "l": 3}')`)
			mustExec(t, db, "CALL ldp_set_budget('src', 10, 'charge')")

			done := make(chan error, 1)
			start := time.Now()
			go func() {
				_, err := db.Exec("CALL ldp_privatize('src', 'f', 'y', 'dst', 1, 0.7, 'pca4', 'laplace', 4)")
				done <- err
			}()
			// SIGTERM once the privatize is under way: its temporary table exists.
			waitForTable(t, db, "_ldp_tmp_dst", done)
			time.Sleep(tc.after)
			sent := time.Now()
			if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			var exitErr error
			select {
			case exitErr = <-srv.exited:
			case <-time.After(90 * time.Second):
				_ = srv.cmd.Process.Kill()
				t.Fatalf("serve did not exit within 90 s of SIGTERM\n%s", srv.stderr)
			}
			clientErr := <-done
			t.Logf("SIGTERM %v into ldp_privatize of %d rows; serve exited %v after it (%v); the client got %v",
				sent.Sub(start).Round(time.Millisecond), rows, time.Since(sent).Round(time.Millisecond), exitErr, clientErr)
			log := srv.stderr.String()
			if exitErr != nil || !strings.Contains(log, "database closed cleanly") {
				t.Fatalf("no clean exit after SIGTERM (%v):\n%s", exitErr, log)
			}
			if strings.Contains(log, "write transactions active") || strings.Contains(log, "checkpointing") {
				t.Fatalf("the checkpoint failed:\n%s", log)
			}
			if fi, err := os.Stat(path + ".wal"); err == nil && fi.Size() > 0 {
				t.Errorf("the WAL holds %d bytes after a clean exit: not checkpointed", fi.Size())
			}

			srv = startServer(t, path)
			db = srv.connect("root", "")
			exists := tableExists(t, db, "dst")
			releases := scalarInt(t, db, "SELECT COUNT(*) FROM ldpsql_catalog.ldp_releases WHERE table_name = 'src' AND function_name = 'ldp_privatize'")
			units := scalarInt(t, db, "SELECT COUNT(*) FROM ldpsql_catalog.ldp_budget_units WHERE table_name = 'src'")
			var spentMin, spentMax float64
			if units > 0 {
				if err := db.QueryRow("SELECT MIN(spent), MAX(spent) FROM ldpsql_catalog.ldp_budget_units WHERE table_name = 'src'").Scan(&spentMin, &spentMax); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("after restart: destination exists %v, %d releases charged to %d units (spent %g..%g)", exists, releases, units, spentMin, spentMax)
			switch {
			case exists:
				if n := scalarInt(t, db, "SELECT COUNT(*) FROM dst"); n != rows {
					t.Errorf("the destination has %d rows, want all %d", n, rows)
				}
				if releases != 2*rows || units != rows || spentMin != 1 || spentMax != 1 {
					t.Errorf("the destination's charges: %d releases to %d units (spent %g..%g), want %d releases, every one of %d units ε 1",
						releases, units, spentMin, spentMax, 2*rows, rows)
				}
				if clientErr != nil {
					t.Errorf("the destination was written but the client was told %v", clientErr)
				}
			default:
				if releases != 0 || units != 0 {
					t.Errorf("no destination, but %d releases charged to %d units", releases, units)
				}
				if clientErr == nil {
					t.Errorf("the client was told ldp_privatize succeeded, but there is no destination")
				}
			}
			want := tc.want
			if tc.want == "absent" && !strings.Contains(log, "cancelled 1 of 1 running statements") {
				want = "written" // it had ended when the signal came: nothing was running to cancel
			}
			if got := map[bool]string{true: "written", false: "absent"}[exists]; got != want {
				t.Errorf("with --shutdown-grace %s the destination is %s, want %s", tc.grace, got, tc.want)
			}
			for _, r := range mustQueryAll(t, db, "SHOW TABLES") {
				if strings.HasPrefix(r[0], "_ldp_tmp_") {
					t.Errorf("a temporary ldp_privatize table survived: %s", r[0])
				}
			}
			t.Logf("the server's log:\n%s", log)
			// The user can go on: privatize (again, or for the first time) succeeds within the budget.
			mustExec(t, db, "CALL ldp_privatize('src', 'f', 'y', 'dst2', 1, 0.7, 'pca4', 'laplace', 4)")
		})
	}
}

// waitForTable waits until a table whose name starts with prefix is listed (or done reports first).
func waitForTable(t *testing.T, db *sql.DB, prefix string, done chan error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("ldp_privatize ended before SIGTERM (%v): make it longer", err)
		default:
		}
		for _, r := range mustQueryAll(t, db, "SHOW TABLES") {
			if strings.HasPrefix(r[0], prefix) {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no table %s… appeared in 60 s", prefix)
}

func tableExists(t *testing.T, db *sql.DB, name string) bool {
	t.Helper()
	for _, r := range mustQueryAll(t, db, "SHOW TABLES") {
		if strings.EqualFold(r[0], name) {
			return true
		}
	}
	return false
}

func scalarInt(t *testing.T, db *sql.DB, q string) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func mustQueryAll(t *testing.T, db *sql.DB, q string) [][]string {
	t.Helper()
	rows, err := queryAll(db, q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return rows
}
