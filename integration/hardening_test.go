package integration

import (
	"database/sql"
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fillWide creates table(id, f, y) with n rows of dim features in [0, 1] and labels y in 0..3, in
// multi-row INSERTs.
func fillWide(t testing.TB, db *sql.DB, table string, n, dim int) {
	t.Helper()
	mustExec(t, db, "CREATE TABLE "+table+" (id INT PRIMARY KEY, f LONGBLOB, y INT)")
	rng := rand.New(rand.NewSource(5))
	for start := 0; start < n; start += 1000 {
		var vals []string
		for i := start; i < start+1000 && i < n; i++ {
			v := make([]float64, dim)
			for j := range v {
				v[j] = rng.Float64()
			}
			vals = append(vals, fmt.Sprintf("(%d, LDP_VECTOR(%s), %d)", i, strings.Trim(jsonVector(v), "[]"), i%4))
		}
		mustExec(t, db, "INSERT INTO "+table+" VALUES "+strings.Join(vals, ","))
	}
}

// ledgerState is what a failed statement must leave unchanged: the tables, the rows of the source, and
// the ledger's record.
type ledgerState struct {
	tables   string
	rows     int
	spent    float64
	releases int
}

func snapshot(t *testing.T, db *sql.DB, table string) ledgerState {
	t.Helper()
	var s ledgerState
	rows, err := db.Query("SHOW TABLES")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	rows.Close()
	s.tables = strings.Join(names, ",")
	if err := db.QueryRow("SELECT COUNT(*) FROM " + table).Scan(&s.rows); err != nil {
		t.Fatal(err)
	}
	var spent sql.NullFloat64
	if err := db.QueryRow("SELECT SUM(spent) FROM ldpsql_catalog.ldp_budget_units").Scan(&spent); err != nil {
		t.Fatal(err)
	}
	s.spent = spent.Float64
	if err := db.QueryRow("SELECT COUNT(*) FROM ldpsql_catalog.ldp_releases").Scan(&s.releases); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestBadInputChangesNothing sends bad input of every kind against a protected table: each statement
// fails with an error naming the problem, and the tables, the source rows and the ledger are unchanged.
func TestBadInputChangesNothing(t *testing.T) {
	srv := startServer(t, filepath.Join(t.TempDir(), "bad.duckdb"))
	db := srv.connect("root", "")
	fillWide(t, db, "src", 300, 8)
	mustExec(t, db, `CALL ldp_fit_mechanism('pca4', 'pca', 'src', 'f', '{"d": 4, "l": 3}')`)
	mustExec(t, db, "CALL ldp_set_budget('src', 5)")
	// One good release, so that the ledger is not empty.
	mustExec(t, db, "SELECT id, FLIP_LABEL(y, 1, 4) FROM src WHERE id < 10")
	before := snapshot(t, db, "src")
	if before.spent == 0 || before.releases == 0 {
		t.Fatalf("the good release was not charged: %+v", before)
	}
	for _, c := range []struct{ q, want string }{
		{"SELECT LDP_ENCODE(LDP_VECTOR(1, 2, 3), 1, 'pca4')", "expects 8"},
		{"SELECT LDP_ENCODE('[1,2,3,4,5,6,7,\"x\"]', 1, 'pca4')", "features"},
		{"SELECT LDP_ENCODE('[1,2,3,4,5,6,7,8]', 0, 'pca4')", "eps"},
		{"SELECT LDP_ENCODE('[1,2,3,4,5,6,7,8]', -1, 'pca4')", "eps"},
		{"SELECT LDP_ENCODE('[1,2,3,4,5,6,7,8]', 1e6, 'pca4')", "eps"},
		{"SELECT LDP_ENCODE('[1,2,3,4,5,6,7,8]', 1, 'nosuch')", "unknown mechanism"},
		{"SELECT LDP_ENCODE('[1,2,3,4,5,6,7,8]', 1, 'pca4', 'gaussian')", "randomiser"},
		{"SELECT LDP_VECTOR(1, 'abc')", "LDP_VECTOR"},
		{"SELECT FLIP_LABEL(4, 1, 4)", "label"},
		{"SELECT FLIP_LABEL(1, 1, 1)", "K"},
		{"SELECT id, LDP_ENCODE(f, 1e6, 'pca4') FROM src", "eps"},
		{"SELECT id, LDP_ENCODE(f, 1, 'nosuch') FROM src", "unknown mechanism"},
		{"SELECT id, FLIP_LABEL(y, 1, 2) FROM src", "label"},
		{"SELECT id, FLIP_LABEL(y, 0, 4) FROM src", "eps"},
		{"SELECT id, LDP_ENCODE(f, 6, 'pca4') FROM src", "budget exceeded"},
		{"CALL ldp_privatize('src', 'f', 'y', 'out1', 1, 0.7, 'pca4', 'laplace', 2)", "label"},
		{"CALL ldp_privatize('src', 'f', 'y', 'out2', 1, 1.5, 'pca4', 'laplace', 4)", "lambda"},
		{"CALL ldp_privatize('src', 'f', 'y', 'out3', 1, 0.7, 'nosuch', 'laplace', 4)", "unknown mechanism"},
		{"CALL ldp_privatize('src', 'f', 'y', 'out4', 9, 0.7, 'pca4', 'laplace', 4)", "budget exceeded"},
		{"CALL ldp_privatize('src', 'nope', 'y', 'out5', 1, 0.7, 'pca4', 'laplace', 4)", "nope"},
		{`CALL ldp_fit_mechanism('pca_bad', 'pca', 'src', 'f', '{"d": 4, "l": }')`, "JSON"},
		{`CALL ldp_fit_mechanism('pca_bad', 'pca', 'src', 'f', '{"d": -4}')`, "d"},
		{`CALL ldp_train_mechanism('vlm_bad', 'vlm', 'src', 'f', '{"epochs": "ten"}')`, "epochs"},
		{`SELECT TRAIN_NOISY_CLASSIFIER('src', '{"objective": ')`, "JSON"},
		{"CALL ldp_set_budget('src', -1)", "eps"},
		{"CALL ldp_set_budget('src', 2, 'sometimes')", "mode"},
		{"CALL ldp_set_budget('nosuch', 2)", "nosuch"},
	} {
		_, err := db.Exec(c.q)
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(c.want)) {
			t.Errorf("%s: error %v, want one mentioning %q", c.q, err, c.want)
		}
		if after := snapshot(t, db, "src"); after != before {
			t.Errorf("%s changed state: %+v -> %+v", c.q, before, after)
		}
	}
	// NULL in gives NULL out on unprotected input, and is never an error.
	var null sql.NullString
	if err := db.QueryRow("SELECT LDP_ENCODE(NULL, 1, 'pca4')").Scan(&null); err != nil || null.Valid {
		t.Errorf("LDP_ENCODE(NULL): %v %v", null, err)
	}
}

// TestKillDuringPrivatize kills the server (SIGKILL) while ldp_privatize writes a protected table's
// release, then restarts it: the file opens, the destination is either absent or complete, no temporary
// table is left behind, and every released row was charged to its unit. The first kill comes early in the
// run; the second at 90% of the time a whole run takes, near the charge and the commit.
func TestKillDuringPrivatize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kill.duckdb")
	srv := startServer(t, path)
	db := srv.connect("root", "")
	const n = 60000
	fillWide(t, db, "src", n, 16)
	mustExec(t, db, `CALL ldp_fit_mechanism('pca4', 'pca', 'src', 'f', '{"d": 4, "l": 3}')`)
	// Charge mode: every run releases fresh noise and is charged (memoise mode would return the first
	// run's releases to the later ones, uncharged, as it should).
	mustExec(t, db, "CALL ldp_set_budget('src', 10, 'charge')")
	spentBefore := 0.0
	killAfter := func(dst string, delay time.Duration) {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			_, err := db.Exec(fmt.Sprintf("CALL ldp_privatize('src', 'f', 'y', '%s', 2, 0.7, 'pca4', 'laplace', 4)", dst))
			done <- err
		}()
		time.Sleep(delay)
		srv.kill()
		<-done
		srv = startServer(t, path)
		db = srv.connect("root", "")
		var rowsLeft int
		if err := db.QueryRow("SELECT COUNT(*) FROM src").Scan(&rowsLeft); err != nil || rowsLeft != n {
			t.Fatalf("source after the kill: %d rows, %v", rowsLeft, err)
		}
		st := snapshot(t, db, "src")
		if strings.Contains(st.tables, "_ldp_tmp_") {
			t.Errorf("a temporary table survived the restart: %s", st.tables)
		}
		var charged int
		if err := db.QueryRow("SELECT COUNT(*) FROM ldpsql_catalog.ldp_budget_units WHERE spent >= ?", spentBefore/n+2).Scan(&charged); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(","+st.tables+",", ","+dst+",") {
			var released int
			if err := db.QueryRow("SELECT COUNT(*) FROM " + dst).Scan(&released); err != nil {
				t.Fatal(err)
			}
			if released != n || charged != n {
				t.Errorf("%s has %d rows, %d units charged; want all %d of both", dst, released, charged, n)
			}
			t.Logf("killed after %s: after the commit, %d rows released and charged", delay, released)
		} else {
			t.Logf("killed after %s: before the commit, no destination; %d units charged (a charge without a release is allowed, never the reverse)", delay, charged)
		}
		spentBefore = st.spent
	}
	killAfter("released", 700*time.Millisecond)
	// A whole run, timed, then a kill near its end.
	start := time.Now()
	mustExec(t, db, "CALL ldp_privatize('src', 'f', 'y', 'released2', 2, 0.7, 'pca4', 'laplace', 4)")
	whole := time.Since(start)
	spentBefore = snapshot(t, db, "src").spent
	killAfter("released3", whole*9/10)
}

// TestKillDuringClassifierJob kills the server while TRAIN_NOISY_CLASSIFIER's job runs: after the restart
// the job is recorded as failed and no model was stored.
func TestKillDuringClassifierJob(t *testing.T) {
	path := filepath.Join(t.TempDir(), "killjob.duckdb")
	srv := startServer(t, path)
	db := srv.connect("root", "")
	fillClusters(t, db, "aux", 3000, 21, false)
	fillClusters(t, db, "d2", 3000, 22, true)
	mustExec(t, db, `CALL ldp_fit_mechanism('pca2', 'pca', 'aux', 'f', '{"d": 2, "l": 6}')`)
	mustExec(t, db, "CALL ldp_privatize('d2', 'f', 'y', 'd2_pca', 8, 0.7, 'pca2', 'laplace', 4)")
	var id int64
	if err := db.QueryRow(`SELECT TRAIN_NOISY_CLASSIFIER('d2_pca', '{"model": "m_killed", "aux_table": "aux", "epochs": 100000, "patience": 100000}')`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for j := job(t, db, id); !j.epoch.Valid || j.epoch.Int64 < 1; j = job(t, db, id) {
		if time.Now().After(deadline) || j.state != "running" {
			t.Fatalf("job did not start training: %+v", j)
		}
		time.Sleep(100 * time.Millisecond)
	}
	srv.kill()
	srv = startServer(t, path)
	db = srv.connect("root", "")
	if j := job(t, db, id); j.state != "failed" || !strings.Contains(j.errMsg, "interrupted") {
		t.Errorf("job after the kill: %+v", j)
	}
	var models int
	if err := db.QueryRow("SELECT COUNT(*) FROM ldpsql_catalog.ldp_models WHERE name = 'm_killed'").Scan(&models); err != nil || models != 0 {
		t.Errorf("a killed job stored its model: %d, %v", models, err)
	}
}
