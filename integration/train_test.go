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

// fillUnit creates table(id, f) with n rows of dim features in [0, 1] from a 2-factor model.
func fillUnit(t testing.TB, db *sql.DB, table string, n, dim int) {
	t.Helper()
	mustExec(t, db, "CREATE TABLE "+table+" (id INT PRIMARY KEY, f LONGBLOB)")
	rng := rand.New(rand.NewSource(3))
	for start := 0; start < n; start += 500 {
		var vals []string
		for i := start; i < start+500 && i < n; i++ {
			a, b := rng.Float64(), rng.Float64()
			v := make([]float64, dim)
			for j := range v {
				v[j] = min(1, max(0, 0.5*a*float64(j%2)+0.5*b*float64((j+1)%2)+0.05*rng.Float64()))
			}
			vals = append(vals, fmt.Sprintf("(%d, LDP_VECTOR(%s))", i, strings.Trim(jsonVector(v), "[]")))
		}
		mustExec(t, db, "INSERT INTO "+table+" VALUES "+strings.Join(vals, ","))
	}
}

type jobRow struct {
	state, errMsg string
	epoch         sql.NullInt64
}

func job(t testing.TB, db *sql.DB, id int64) jobRow {
	t.Helper()
	var j jobRow
	var e sql.NullString
	if err := db.QueryRow("SELECT state, epoch, error FROM ldpsql_catalog.ldp_jobs WHERE id = ?", id).Scan(&j.state, &j.epoch, &e); err != nil {
		t.Fatal(err)
	}
	j.errMsg = e.String
	return j
}

func waitJob(t testing.TB, db *sql.DB, id int64, timeout time.Duration) jobRow {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		j := job(t, db, id)
		if j.state != "running" || time.Now().After(deadline) {
			return j
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestTrainVLMJobEncodeDecode(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "data.duckdb")
	s := startServer(t, dbPath)
	db := s.connect("root", "")
	fillUnit(t, db, "aux", 1000, 20)
	params := `{"d": 2, "l": 3, "eps_pretrain": 10, "epochs": 3, "hidden": [16, 8], "seed": 1}`
	for _, tc := range []struct{ q, want string }{
		{`CALL ldp_train_mechanism('v', 'vlm', 'aux', 'f', '{"d": 2,')`, "params"},
		{`CALL ldp_train_mechanism('v', 'vlm', 'aux', 'f', '{"dims": 2}')`, "dims"},
		{`CALL ldp_train_mechanism('v', 'vlm', 'missing', 'f', '{}')`, "missing"},
		{`CALL ldp_train_mechanism('v', 'cnn', 'aux', 'f', '{}')`, "cannot be trained"},
	} {
		if _, err := db.Exec(tc.q); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.q, err, tc.want)
		}
	}
	start := time.Now()
	var id int64
	if err := db.QueryRow(`CALL ldp_train_mechanism('v', 'vlm', 'aux', 'f', '` + params + `')`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("the CALL took %s: it must return the job id at once", time.Since(start))
	}
	j := waitJob(t, db, id, 120*time.Second)
	if j.state != "succeeded" || j.epoch.Int64 != 3 {
		t.Fatalf("training job: %+v\n%s", j, s.stderr)
	}
	var rows int64
	if err := db.QueryRow("SELECT training_rows FROM ldpsql_catalog.ldp_models WHERE name = 'v'").Scan(&rows); err != nil || rows != 1000 {
		t.Fatalf("ldp_models: %d %v", rows, err)
	}
	rel := queryJSONVectors(t, db, "SELECT LDP_ENCODE_JSON(f, 4, 'v') FROM aux LIMIT 5")
	if len(rel) != 5 || len(rel[0]) != 2 {
		t.Fatalf("VLM releases: %v", rel)
	}
	// Feature-level release: the decoder maps the noisy latent back to 20 features in [0, 1].
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM (SELECT LDP_DECODE(LDP_ENCODE(f, 4, 'v'), 'v') AS x FROM aux) d WHERE LENGTH(x) = 80").Scan(&n); err != nil || n != 1000 {
		t.Fatalf("LDP_DECODE: %d %v", n, err)
	}
	if _, err := db.Exec("SELECT LDP_DECODE(LDP_VECTOR(1, 2, 3), 'v')"); err == nil || !strings.Contains(err.Error(), "releases 2") {
		t.Fatalf("decode of a wrong-size release: %v", err)
	}

	// Cancel.
	if err := db.QueryRow(`CALL ldp_train_mechanism('v2', 'vlm', 'aux', 'f', '{"d": 2, "epochs": 100000, "hidden": [16, 8]}')`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	mustExec(t, db, "CALL ldp_cancel_job(?)", id)
	if j := waitJob(t, db, id, 30*time.Second); j.state != "cancelled" {
		t.Fatalf("cancelled job: %+v", j)
	}
	if _, err := db.Exec("CALL ldp_cancel_job(?)", id); err == nil {
		t.Fatal("cancelling a finished job succeeded")
	}

	// A job running when the server is killed is marked failed at the next start, and the server and
	// the trained mechanism work.
	if err := db.QueryRow(`CALL ldp_train_mechanism('v3', 'vlm', 'aux', 'f', '{"d": 2, "epochs": 100000, "hidden": [16, 8]}')`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	db.Close()
	s.kill()
	s2 := startServer(t, dbPath)
	db2 := s2.connect("root", "")
	if j := job(t, db2, id); j.state != "failed" || !strings.Contains(j.errMsg, "interrupted") {
		t.Fatalf("job after kill -9: %+v", j)
	}
	if rel := queryJSONVectors(t, db2, "SELECT LDP_ENCODE_JSON(f, 4, 'v') FROM aux LIMIT 1"); len(rel) != 1 {
		t.Fatal("trained mechanism unusable after restart")
	}
}
