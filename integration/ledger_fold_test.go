package integration

import (
	"database/sql"
	"fmt"
	"math/rand"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
)

// A transaction of charges only appends to ldp_releases; a fold counts the releases into
// ldp_budget_units later (engine/ledger_fold.go). A real server is killed with SIGKILL while clients
// release charged data: with folds a day apart (every release of the run waits for its fold when the
// kill comes) and 2 ms apart (kills land during folds). After each kill the file must say, for every
// unit, that the folded spending is exactly the sum of its releases up to the watermark; the restarted
// server must fold everything at open, and its ldp_budget_units must equal the sum of every unit's
// releases, which must hold every release a client received.
func TestLedgerFoldKill(t *testing.T) {
	const units, clients, eps = 8, 4, 0.25 // ε a power of two: every sum is exact in float64
	rng := rand.New(rand.NewSource(9))
	for _, interval := range []string{"24h", "2ms"} {
		t.Run("fold every "+interval, func(t *testing.T) {
			t.Setenv("LDPSQL_LEDGER_FOLD_INTERVAL", interval)
			path := filepath.Join(t.TempDir(), "fold.duckdb")
			srv := startServer(t, path)
			db := srv.connect("root", "")
			mustExec(t, db, "CREATE TABLE hot (id INT PRIMARY KEY, x DOUBLE)")
			for i := 0; i < units; i++ {
				mustExec(t, db, "INSERT INTO hot VALUES (?, ?)", i, float64(i)/units)
			}
			mustExec(t, db, "CALL ldp_set_budget('hot', 1000000, 'charge')")
			received := 0 // releases the clients received, over every kill point
			for point := 0; point < 3; point++ {
				var mu sync.Mutex
				var wg sync.WaitGroup
				for c := 0; c < clients; c++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							rows, err := queryAll(db, fmt.Sprintf("SELECT id, LDP_LAPLACE(x, %g, 0, 1) FROM hot", eps))
							if err != nil {
								return // the kill
							}
							mu.Lock()
							received += len(rows)
							mu.Unlock()
						}
					}()
				}
				delay := time.Duration(150+rng.Intn(500)) * time.Millisecond
				time.Sleep(delay)
				srv.kill()
				wg.Wait()
				db.Close()
				folded, after := foldOnDisk(t, path, eps)
				t.Logf("kill %d, %v in: %d releases received so far; on disk %d folded, %d after the watermark",
					point+1, delay, received, folded, after)
				if interval == "24h" && point > 0 && after == 0 {
					t.Errorf("kill %d: no release waited for its fold; the test did not crash between append and fold", point+1)
				}
				srv = startServer(t, path)
				db = srv.connect("root", "")
				checkUnitsExact(t, db, eps, received)
			}
			// The restarted server folded at open: killed before it could fold anything else, it leaves
			// every release folded.
			srv.kill()
			if _, after := foldOnDisk(t, path, eps); interval == "24h" && after != 0 {
				t.Errorf("after a restart, %d releases are still not folded: the open did not fold", after)
			}
		})
	}
}

// foldOnDisk opens the killed server's file and checks, unit by unit, that ldp_budget_units holds
// exactly the releases up to the watermark, and that there is one watermark. It returns how many
// releases are folded and how many come after the watermark.
func foldOnDisk(t *testing.T, path string, eps float64) (folded, after int64) {
	t.Helper()
	duck, err := sql.Open("duckdb", path+"?access_mode=read_only")
	if err != nil {
		t.Fatal(err)
	}
	defer duck.Close()
	var marks, watermark int64
	if err := duck.QueryRow("SELECT count(*), max(folded_through) FROM ldpsql_catalog.budget_fold").Scan(&marks, &watermark); err != nil {
		t.Fatal(err)
	}
	if marks != 1 {
		t.Fatalf("budget_fold has %d rows, want 1", marks)
	}
	rows, err := queryAll(duck, `
		SELECT coalesce(u.unit_key, r.unit_key), coalesce(u.spent, 0), coalesce(u.releases, 0), coalesce(r.eps, 0), coalesce(r.n, 0)
		FROM (SELECT unit_key, spent, releases FROM ldpsql_catalog.ldp_budget_units WHERE table_name = 'hot') u
		FULL JOIN (SELECT unit_key, sum(eps) AS eps, count(*) AS n FROM ldpsql_catalog.ldp_releases
			WHERE table_name = 'hot' AND id <= ? GROUP BY unit_key) r ON r.unit_key = u.unit_key`, watermark)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r[1] != r[3] || r[2] != r[4] {
			t.Errorf("unit %s on disk: ldp_budget_units says ε %s in %s releases; its releases up to the watermark %d say ε %s in %s",
				r[0], r[1], r[2], watermark, r[3], r[4])
		}
		var n int64
		fmt.Sscan(r[4], &n)
		folded += n
	}
	if err := duck.QueryRow("SELECT count(*) FROM ldpsql_catalog.ldp_releases WHERE id > ?", watermark).Scan(&after); err != nil {
		t.Fatal(err)
	}
	return folded, after
}

// checkUnitsExact checks, over SQL as the DBA, that every unit of hot has spent exactly ε times its
// releases, that ldp_budget_units says so, and that the releases number at least those received.
func checkUnitsExact(t *testing.T, db *sql.DB, eps float64, received int) {
	t.Helper()
	rows, err := queryAll(db, `
		SELECT u.unit_key, u.spent, u.releases, r.eps, r.n
		FROM ldpsql_catalog.ldp_budget_units u
		JOIN (SELECT unit_key, sum(eps) AS eps, count(*) AS n FROM ldpsql_catalog.ldp_releases
			WHERE table_name = 'hot' GROUP BY unit_key) r ON r.unit_key = u.unit_key
		WHERE u.table_name = 'hot'`)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, r := range rows {
		var n int
		var spent float64
		fmt.Sscan(r[2], &n)
		fmt.Sscan(r[1], &spent)
		if r[1] != r[3] || r[2] != r[4] || spent != eps*float64(n) {
			t.Errorf("unit %s after restart: ldp_budget_units says ε %s in %s releases; ldp_releases says ε %s in %s", r[0], r[1], r[2], r[3], r[4])
		}
		total += n
	}
	if total < received {
		t.Errorf("after restart the ledger holds %d releases of hot; the clients received %d", total, received)
	}
}
