package integration

import (
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// The fault suite (issue #20): a real `serve` process is killed with SIGKILL at random points while
// clients release charged data, insert rows, run ldp_privatize and train a classifier, then restarted on
// the same file, and what the clients were told is checked against what the file holds.
//
//	go test -run TestFault -v ./integration/ -args -fault.points 20   (or LDPSQL_FAULT_POINTS=20)
//	go test -run TestFault -v ./integration/ -args -fault.seed 7      (another schedule)
var (
	faultPoints = flag.Int("fault.points", envInt("LDPSQL_FAULT_POINTS", 5), "kill points of TestFaultKillPoints")
	faultSeed   = flag.Int64("fault.seed", envInt64("LDPSQL_FAULT_SEED", 20), "seed of the kill schedule and the workload")
)

func envInt(name string, def int) int {
	return int(envInt64(name, int64(def)))
}

func envInt64(name string, def int64) int64 {
	if v, err := strconv.ParseInt(os.Getenv(name), 10, 64); err == nil {
		return v
	}
	return def
}

const (
	faultRows       = 500 // rows (units) of the protected source src
	faultHotUnits   = 8   // units of hot, whose tight budget concurrent statements compete for
	faultHotPerKill = 3   // statements' worth of ε that hot's budget grows by at each kill point
	faultMaxKill    = 1500 * time.Millisecond
	faultMinKill    = 10 * time.Millisecond
)

// ledgerKey names the releases of one function to one unit: what the client-side record counts.
type ledgerKey struct{ table, function, unit string }

// faultRecord is what the clients of one kill point were told, and what they sent without an answer.
type faultRecord struct {
	mu sync.Mutex
	// acked counts the releases that reached a client (rows it received), per table, function and unit;
	// unanswered counts the releases of the statements the kill cut off, which may or may not have been
	// charged.
	acked, unanswered map[ledgerKey]int
	// laplace holds every LDP_LAPLACE value a client received, by table and unit: each must be recorded
	// in ldp_releases, byte for byte.
	laplace map[ledgerKey][]float64
	// insertsAcked and insertsUnanswered are the ids of single-row INSERTs into writes.
	insertsAcked, insertsUnanswered []int64
	// privatizeAcked and privatizeUnanswered are ldp_privatize destinations.
	privatizeAcked, privatizeUnanswered []string
	refused                             int      // statements the server refused (over budget): they wrote nothing
	statements                          int      // statements answered with success
	unexpected                          []string // errors the server should not have answered with
}

// fail records an error no statement of the workload should meet; the client stops.
func (rec *faultRecord) fail(format string, args ...any) bool {
	rec.unexpected = append(rec.unexpected, fmt.Sprintf(format, args...))
	return false
}

func newFaultRecord() *faultRecord {
	return &faultRecord{acked: map[ledgerKey]int{}, unanswered: map[ledgerKey]int{}, laplace: map[ledgerKey][]float64{}}
}

// killedErr reports whether err is what a client sees when the server dies under it (anything but an
// error the server sent): the statement may have run to its end or not at all.
func killedErr(err error) bool {
	var me *mysql.MySQLError
	return err != nil && !errors.As(err, &me)
}

// faultRelease is one charged release statement: which table and units it releases, and its SQL.
type faultRelease struct {
	table, function string
	units           []string
	query           string
}

func drawRelease(rng *rand.Rand) faultRelease {
	if rng.Intn(4) == 0 {
		units := make([]string, faultHotUnits)
		for i := range units {
			units[i] = strconv.Itoa(i)
		}
		return faultRelease{"hot", "LDP_LAPLACE", units, "SELECT id, LDP_LAPLACE(x, 1, 0, 1) FROM hot"}
	}
	lo := rng.Intn(faultRows - 5)
	units := []string{}
	for id := lo; id < lo+5; id++ {
		units = append(units, strconv.Itoa(id))
	}
	where := fmt.Sprintf(" FROM src WHERE id BETWEEN %d AND %d", lo, lo+4)
	switch rng.Intn(3) {
	case 0:
		return faultRelease{"src", "LDP_LAPLACE", units, "SELECT id, LDP_LAPLACE(y, 0.01, 0, 3)" + where}
	case 1:
		return faultRelease{"src", "FLIP_LABEL", units, "SELECT id, FLIP_LABEL(y, 0.01, 4)" + where}
	default:
		return faultRelease{"src", "LDP_ENCODE", units, "SELECT id, LDP_ENCODE(f, 0.01, 'pca4')" + where}
	}
}

// runRelease runs one release, recording the rows that reached the client; false once the server is
// gone.
func (rec *faultRecord) runRelease(db *sql.DB, r faultRelease) bool {
	rows, err := db.Query(r.query)
	var got []string
	var values []float64
	var badValue error
	if err == nil {
		for rows.Next() {
			var id string
			var v sql.RawBytes
			if err = rows.Scan(&id, &v); err != nil {
				break
			}
			got = append(got, id)
			if r.function == "LDP_LAPLACE" {
				x, perr := strconv.ParseFloat(string(v), 64)
				if perr != nil {
					badValue = perr
				}
				values = append(values, x)
			}
		}
		if err == nil {
			err = rows.Err()
		}
		rows.Close()
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	// Every row that reached the client is a release that must have been charged, whatever came after.
	for i, id := range got {
		k := ledgerKey{r.table, r.function, id}
		rec.acked[k]++
		if values != nil {
			rec.laplace[k] = append(rec.laplace[k], values[i])
		}
	}
	switch {
	case badValue != nil:
		return rec.fail("%s returned a value that is not a number: %v", r.query, badValue)
	case err == nil:
		rec.statements++
		return true
	case killedErr(err):
		// The units whose rows did not arrive may have been charged.
		received := map[string]bool{}
		for _, id := range got {
			received[id] = true
		}
		for _, u := range r.units {
			if !received[u] {
				rec.unanswered[ledgerKey{r.table, r.function, u}]++
			}
		}
		return false
	case strings.Contains(err.Error(), "budget exceeded"):
		rec.refused++
		return true
	}
	return rec.fail("%s: %v", r.query, err)
}

// faultWorkload runs the clients of one kill point until the server dies: two release clients, two
// INSERT clients and one ldp_privatize client.
func faultWorkload(db *sql.DB, point int, seed int64, rec *faultRecord) (wait func()) {
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func(rng *rand.Rand) {
			defer wg.Done()
			for rec.runRelease(db, drawRelease(rng)) {
			}
		}(rand.New(rand.NewSource(seed + int64(w))))
	}
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; ; seq++ {
				id := int64(point)*1_000_000 + int64(w)*100_000 + int64(seq)
				_, err := db.Exec(fmt.Sprintf("INSERT INTO writes VALUES (%d, %d, 'point %d worker %d row %d')", id, point, point, w, seq))
				rec.mu.Lock()
				switch {
				case err == nil:
					rec.insertsAcked = append(rec.insertsAcked, id)
				case killedErr(err):
					rec.insertsUnanswered = append(rec.insertsUnanswered, id)
				default:
					rec.fail("INSERT of row %d: %v", id, err)
				}
				rec.mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k := 0; ; k++ {
			dst := fmt.Sprintf("priv_p%d_%d", point, k)
			_, err := db.Exec(privatizeSQL(dst))
			rec.mu.Lock()
			switch {
			case err == nil:
				rec.privatizeAcked = append(rec.privatizeAcked, dst)
				for u := 0; u < faultRows; u++ {
					rec.acked[ledgerKey{"src", "ldp_privatize", strconv.Itoa(u)}] += 2 // the features and the label
				}
			case killedErr(err):
				rec.privatizeUnanswered = append(rec.privatizeUnanswered, dst)
				for u := 0; u < faultRows; u++ {
					rec.unanswered[ledgerKey{"src", "ldp_privatize", strconv.Itoa(u)}] += 2
				}
			default:
				rec.fail("ldp_privatize into %s: %v", dst, err)
			}
			rec.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return wg.Wait
}

func privatizeSQL(dst string) string {
	return fmt.Sprintf("CALL ldp_privatize('src', 'f', 'y', '%s', 0.01, 0.7, 'pca4', 'laplace', 4)", dst)
}

// ledgerCounts reads how many releases ldp_releases records, per table, function and unit.
func ledgerCounts(t *testing.T, db *sql.DB) map[ledgerKey]int {
	t.Helper()
	rows, err := queryAll(db, "SELECT table_name, function_name, unit_key, count(*) FROM ldpsql_catalog.ldp_releases GROUP BY table_name, function_name, unit_key")
	if err != nil {
		t.Fatal(err)
	}
	out := map[ledgerKey]int{}
	for _, r := range rows {
		n, _ := strconv.Atoi(r[3])
		out[ledgerKey{r[0], r[1], r[2]}] = n
	}
	return out
}

// checkLedgerConsistent checks the ledger against itself: one ldp_budget_units row per unit, whose
// spent and releases are the sum and count of its ldp_releases rows, none over its table's budget, and
// release ids unique.
func checkLedgerConsistent(t *testing.T, db *sql.DB) {
	t.Helper()
	for _, c := range []struct{ what, q string }{
		{"units with more than one ldp_budget_units row", `SELECT table_name, unit_key, count(*) FROM ldpsql_catalog.ldp_budget_units GROUP BY table_name, unit_key HAVING count(*) > 1`},
		{"units whose spent or releases disagree with ldp_releases", `
			SELECT coalesce(u.table_name, r.table_name), coalesce(u.unit_key, r.unit_key), u.spent, r.eps, u.releases, r.n
			FROM ldpsql_catalog.ldp_budget_units u
			FULL OUTER JOIN (SELECT db, table_name, unit_key, sum(eps) AS eps, count(*) AS n FROM ldpsql_catalog.ldp_releases GROUP BY db, table_name, unit_key) r
				ON u.db = r.db AND u.table_name = r.table_name AND u.unit_key = r.unit_key
			WHERE u.unit_key IS NULL OR r.unit_key IS NULL OR abs(u.spent - r.eps) > 1e-9 OR u.releases <> r.n`},
		{"units over their budget", `
			SELECT u.table_name, u.unit_key, u.spent, b.eps_total FROM ldpsql_catalog.ldp_budget_units u
			JOIN ldpsql_catalog.ldp_budget b ON u.db = b.db AND u.table_name = b.table_name
			WHERE u.spent > b.eps_total + 1e-9`},
		{"release ids recorded twice", `SELECT id, count(*) FROM ldpsql_catalog.ldp_releases GROUP BY id HAVING count(*) > 1`},
	} {
		rows, err := queryAll(db, c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		if len(rows) > 0 {
			if len(rows) > 10 {
				rows = rows[:10]
			}
			t.Errorf("ledger inconsistent: %s: %v", c.what, rows)
		}
	}
}

// checkLaplaceRecorded checks that every LDP_LAPLACE value a client received is recorded, as the
// released value of a release of its unit.
func checkLaplaceRecorded(t *testing.T, db *sql.DB, received map[ledgerKey][]float64) {
	t.Helper()
	rows, err := queryAll(db, "SELECT table_name, unit_key, hex(released_value) FROM ldpsql_catalog.ldp_releases WHERE function_name = 'LDP_LAPLACE'")
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[ledgerKey][]float64{}
	for _, r := range rows {
		b, err := hex.DecodeString(r[2])
		if err != nil || len(b) != 8 {
			t.Fatalf("an LDP_LAPLACE released_value %q is not 8 bytes: %v", r[2], err)
		}
		k := ledgerKey{r[0], "LDP_LAPLACE", r[1]}
		recorded[k] = append(recorded[k], math.Float64frombits(binary.LittleEndian.Uint64(b)))
	}
	missing := 0
	for k, values := range received {
		for _, v := range values {
			found := false
			for _, w := range recorded[k] {
				// The wire carries the value as text; allow its last digit.
				if math.Abs(v-w) <= 1e-12*math.Max(1, math.Abs(w)) {
					found = true
					break
				}
			}
			if !found {
				missing++
				if missing <= 5 {
					t.Errorf("LDP_LAPLACE of unit %s of %s returned %v, which ldp_releases does not record (a release without its charge)", k.unit, k.table, v)
				}
			}
		}
	}
}

// TestFaultKillPoints is the fault suite: at each of -fault.points kill points, drawn from -fault.seed,
// it kills the server during a mixed workload, restarts it on the same file and checks that every
// acknowledged write is there, every release that reached a client was charged, the ledger is
// consistent and within budget, ldp_privatize wrote all of a destination or none of it, the job the
// kill interrupted is recorded as failed with a reason, and every statement can be run again.
func TestFaultKillPoints(t *testing.T) {
	points, seed := *faultPoints, *faultSeed
	if testing.Short() {
		points = min(points, 2)
	}
	rng := rand.New(rand.NewSource(seed))
	schedule := make([]time.Duration, points)
	for i := range schedule {
		schedule[i] = faultMinKill + time.Duration(rng.Int63n(int64(faultMaxKill-faultMinKill)))
	}
	t.Logf("kill schedule (seed %d, -fault.seed to change): %v", seed, schedule)

	path := filepath.Join(t.TempDir(), "fault.duckdb")
	srv := startServer(t, path)
	db := srv.connect("root", "")
	fillWide(t, db, "src", faultRows, 16)
	mustExec(t, db, `CALL ldp_fit_mechanism('pca4', 'pca', 'src', 'f', '{"d": 4, "l": 3}')`)
	mustExec(t, db, "CREATE TABLE train_set AS SELECT * FROM src") // unprotected: the classifier jobs train on its release
	mustExec(t, db, "CALL ldp_privatize('train_set', 'f', 'y', 'train_released', 2, 0.7, 'pca4', 'laplace', 4)")
	mustExec(t, db, "CALL ldp_set_budget('src', 1000000, 'charge')")
	mustExec(t, db, "CREATE TABLE hot (id INT PRIMARY KEY, x DOUBLE)")
	for i := 0; i < faultHotUnits; i++ {
		mustExec(t, db, fmt.Sprintf("INSERT INTO hot VALUES (%d, %g)", i, float64(i)/faultHotUnits))
	}
	mustExec(t, db, "CREATE TABLE writes (id BIGINT PRIMARY KEY, point INT NOT NULL, payload VARCHAR(64) NOT NULL)")

	for point, delay := range schedule {
		hotBudget := float64(faultHotPerKill * (point + 1))
		mustExec(t, db, fmt.Sprintf("CALL ldp_set_budget('hot', %g, 'charge')", hotBudget))
		model := fmt.Sprintf("m_p%d", point)
		var jobID int64
		if err := db.QueryRow(fmt.Sprintf(`SELECT TRAIN_NOISY_CLASSIFIER('train_released', '{"model": "%s", "objective": "forward", "epochs": 100000, "patience": 100000}')`, model)).Scan(&jobID); err != nil {
			t.Fatal(err)
		}
		before := ledgerCounts(t, db)
		rec := newFaultRecord()
		wait := faultWorkload(db, point, seed*1000+int64(point)*10, rec)
		time.Sleep(delay)
		srv.kill()
		wait()
		t.Logf("kill point %d/%d: SIGKILL %v into the workload: %d statements answered, %d refused over budget, %d INSERTs acknowledged (%d cut off), ldp_privatize %v done (%v cut off)",
			point+1, points, delay, rec.statements, rec.refused, len(rec.insertsAcked), len(rec.insertsUnanswered), rec.privatizeAcked, rec.privatizeUnanswered)

		restart := time.Now()
		srv = startServer(t, path)
		db = srv.connect("root", "")
		restarted := time.Since(restart)
		failuresBefore := t.Failed()
		checkAfterKill(t, db, point, rec, before)
		checkJobInterrupted(t, db, jobID, model)
		if t.Failed() && !failuresBefore {
			t.Fatalf("kill point %d (SIGKILL %v after the workload started, -fault.seed %d) failed; server log:\n%s", point+1, delay, seed, srv.stderr)
		}
		checked := time.Since(restart)
		retryAfterKill(t, db, point, rec, model)
		t.Logf("kill point %d/%d: restarted in %v, checked in %v, retried in %v", point+1, points,
			restarted.Round(time.Millisecond), (checked - restarted).Round(time.Millisecond), (time.Since(restart) - checked).Round(time.Millisecond))
	}
}

// checkAfterKill checks the restarted server's file against what the clients of one kill point were
// told (before: ldp_releases' counts when the workload started).
func checkAfterKill(t *testing.T, db *sql.DB, point int, rec *faultRecord, before map[ledgerKey]int) {
	t.Helper()
	for _, e := range rec.unexpected {
		t.Errorf("before the kill: %s", e)
	}
	// Every acknowledged INSERT is there, whole; nothing that was never sent is.
	rows, err := queryAll(db, fmt.Sprintf("SELECT id, payload FROM writes WHERE point = %d", point))
	if err != nil {
		t.Fatal(err)
	}
	present := map[int64]string{}
	for _, r := range rows {
		id, _ := strconv.ParseInt(r[0], 10, 64)
		present[id] = r[1]
	}
	for _, id := range rec.insertsAcked {
		want := fmt.Sprintf("point %d worker %d row %d", point, id%1_000_000/100_000, id%100_000)
		if got, ok := present[id]; !ok || got != want {
			t.Errorf("acknowledged INSERT of row %d lost after the kill: %q (present %v)", id, got, ok)
		}
		delete(present, id)
	}
	for _, id := range rec.insertsUnanswered {
		delete(present, id)
	}
	if len(present) > 0 {
		t.Errorf("rows no client sent are present: %v", present)
	}

	// Every release that reached a client was charged, and nothing was charged that no statement asked
	// for: per table, function and unit, acknowledged ≤ charged ≤ acknowledged + cut off.
	after := ledgerCounts(t, db)
	keys := map[ledgerKey]bool{}
	for k := range after {
		keys[k] = true
	}
	for k := range rec.acked {
		keys[k] = true
	}
	bad := 0
	for k := range keys {
		charged := after[k] - before[k]
		if charged < rec.acked[k] || charged > rec.acked[k]+rec.unanswered[k] {
			if bad++; bad <= 5 {
				t.Errorf("%s of unit %s of %s: %d releases charged during the kill point; %d reached a client, %d more were cut off",
					k.function, k.unit, k.table, charged, rec.acked[k], rec.unanswered[k])
			}
		}
	}
	checkLaplaceRecorded(t, db, rec.laplace)
	checkLedgerConsistent(t, db)

	// ldp_privatize: a destination is whole or absent, no temporary table survives, and the charges are
	// all of a run or none of it: every unit charged alike, for each destination present and for no
	// other (the charges commit with the destination's rename: no charge without its table).
	tables, err := queryAll(db, "SHOW TABLES")
	if err != nil {
		t.Fatal(err)
	}
	exists := map[string]bool{}
	for _, r := range tables {
		exists[r[0]] = true
		if strings.HasPrefix(r[0], "_ldp_tmp_") {
			t.Errorf("a temporary ldp_privatize table survived the restart: %s", r[0])
		}
	}
	written := 0
	for _, dst := range append(append([]string{}, rec.privatizeAcked...), rec.privatizeUnanswered...) {
		if !exists[dst] {
			continue
		}
		written++
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM " + dst).Scan(&n); err != nil || n != faultRows {
			t.Errorf("ldp_privatize destination %s has %d rows (%v), want all %d", dst, n, err, faultRows)
		}
	}
	for _, dst := range rec.privatizeAcked {
		if !exists[dst] {
			t.Errorf("acknowledged ldp_privatize destination %s is missing", dst)
		}
	}
	runs := map[int]int{}
	for u := 0; u < faultRows; u++ {
		k := ledgerKey{"src", "ldp_privatize", strconv.Itoa(u)}
		runs[after[k]-before[k]]++
	}
	if len(runs) != 1 {
		t.Errorf("ldp_privatize charged units unevenly (releases charged: units): %v", runs)
	}
	for charged := range runs {
		if charged != 2*written {
			t.Errorf("ldp_privatize charged %d releases per unit for %d destinations written", charged, written)
		}
	}
}

// checkJobInterrupted checks that the job the kill cut off is recorded as failed, with the reason, and
// stored no model.
func checkJobInterrupted(t *testing.T, db *sql.DB, id int64, model string) {
	t.Helper()
	if j := job(t, db, id); j.state != "failed" || !strings.Contains(j.errMsg, "interrupted") {
		t.Errorf("job %d after the kill: %s %q; want failed, interrupted", id, j.state, j.errMsg)
	}
	var models int
	if err := db.QueryRow("SELECT COUNT(*) FROM ldpsql_catalog.ldp_models WHERE name = ?", model).Scan(&models); err != nil || models != 0 {
		t.Errorf("the interrupted job stored model %s: %d, %v", model, models, err)
	}
}

// retryAfterKill runs again what the kill cut off, and one release of each kind: all succeed.
func retryAfterKill(t *testing.T, db *sql.DB, point int, rec *faultRecord, model string) {
	t.Helper()
	retry := newFaultRecord()
	for _, q := range []faultRelease{
		{"src", "LDP_LAPLACE", nil, "SELECT id, LDP_LAPLACE(y, 0.01, 0, 3) FROM src WHERE id < 5"},
		{"src", "FLIP_LABEL", nil, "SELECT id, FLIP_LABEL(y, 0.01, 4) FROM src WHERE id < 5"},
		{"src", "LDP_ENCODE", nil, "SELECT id, LDP_ENCODE(f, 0.01, 'pca4') FROM src WHERE id < 5"},
	} {
		if !retry.runRelease(db, q) || retry.refused > 0 {
			t.Fatalf("after the restart: %s failed", q.query)
		}
	}
	for _, id := range rec.insertsUnanswered {
		var n int
		if err := db.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM writes WHERE id = %d", id)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			mustExec(t, db, fmt.Sprintf("INSERT INTO writes VALUES (%d, %d, 'point %d worker %d row %d')", id, point, point, id%1_000_000/100_000, id%100_000))
		}
	}
	for _, dst := range rec.privatizeUnanswered {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'ldpsql' AND table_name = ?", dst).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			mustExec(t, db, privatizeSQL(dst))
		}
	}
	// The interrupted job's model, trained again briefly (the hot budget's contention is retried by the
	// next kill point, which raises it).
	var id int64
	if err := db.QueryRow(fmt.Sprintf(`SELECT TRAIN_NOISY_CLASSIFIER('train_released', '{"model": "%s", "objective": "forward", "epochs": 2}')`, model)).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if j := waitJob(t, db, id, time.Minute); j.state != "succeeded" {
		t.Fatalf("the interrupted job run again: %s %s", j.state, j.errMsg)
	}
}
