package integration

import (
	"encoding/hex"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The design card's short forms on WDBC (issue #19, item 1), over the MySQL protocol with the README's
// analyst: a DBA gives ldpsql.wdbc.features a default mechanism, the analyst releases it with
// LDP_ENCODE(features, 4) over go-sql-driver and the mysql client, charged as the long form is (the same
// recorded release and memo key, no second charge for the long form after the short one), privatises
// the table with ldp_privatize, trains with TRAIN_NOISY_CLASSIFIER('scratch.released') (the marginal
// objective, with the mechanism's training rows as its prior) and applies the model with PREDICT; and
// every missing default is an error that says how to set it.
func TestShortFormsOnWDBC(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "data.duckdb")
	if out, err := exec.Command(ldpsqlBin, "dataset", "load", "breast-cancer", "--db", dbPath, "--into", "wdbc").CombinedOutput(); err != nil ||
		!strings.Contains(string(out), "loaded 569") {
		t.Fatalf("ldpsql dataset load breast-cancer: %v\n%s", err, out)
	}
	s := startServer(t, dbPath)
	root := s.connect("root", "")
	analyst := s.readmeAnalyst(root)
	// The DBA fits PCA on the first 200 rows' features (the auxiliary rows) and protects wdbc.
	mustExec(t, root, "CREATE TABLE wdbc_aux (id INT PRIMARY KEY, features LONGBLOB NOT NULL)")
	mustExec(t, root, "INSERT INTO wdbc_aux SELECT id, features FROM wdbc WHERE id <= 200")
	mustExec(t, root, `CALL ldp_fit_mechanism('wdbc_pca', 'pca', 'wdbc_aux', 'features', '{"d": 4}')`)
	mustExec(t, root, "CALL ldp_set_budget('wdbc', 20)")

	// Before the default: the error names the column and the call that sets it.
	_, err := queryAll(analyst, "SELECT id, LDP_ENCODE(features, 4) FROM wdbc")
	if err == nil || !strings.Contains(err.Error(), "LDP_ENCODE(col, eps): no default mechanism for ldpsql.wdbc.features; "+
		"CALL ldp_set_default_mechanism('ldpsql.wdbc', 'features', 'mechanism', 'randomiser') first, or write LDP_ENCODE(features, eps, 'mechanism')") {
		t.Fatalf("the short form without a default: %v", err)
	}
	if _, err := analyst.Exec("CALL ldp_set_default_mechanism('wdbc', 'features', 'wdbc_pca', 'laplace')"); err == nil || !strings.Contains(err.Error(), "denied") {
		t.Fatalf("the analyst set a default: %v", err)
	}
	mustExec(t, root, "CALL ldp_set_default_mechanism('wdbc', 'features', 'wdbc_pca', 'laplace')")

	// The analyst's short form: 369 releases of 4 float32, ε 4 charged to each of their units.
	short, err := queryAll(analyst, "SELECT id, LDP_ENCODE(features, 4) FROM wdbc WHERE id > 200 ORDER BY id")
	if err != nil || len(short) != 369 {
		t.Fatalf("the analyst's LDP_ENCODE(features, 4): %d rows, %v", len(short), err)
	}
	for _, r := range short {
		if len(r[1]) != 16 {
			t.Fatalf("unit %s: a release of %d bytes, not 4 float32", r[0], len(r[1]))
		}
	}
	spent := func(where string) string {
		t.Helper()
		got, err := queryAll(root, "SELECT count(*), min(spent), max(spent) FROM ldpsql_catalog.ldp_budget_units WHERE table_name = 'wdbc' AND "+where)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(got[0], " ")
	}
	if got := spent("true"); got != "369 4 4" {
		t.Fatalf("after the short form: units, least and most spent %s; want 369 4 4", got)
	}
	rel, err := queryAll(root, "SELECT DISTINCT function_name, mechanism, randomiser, eps FROM ldpsql_catalog.ldp_releases WHERE table_name = 'wdbc'")
	if err != nil || fmtRows(rel) != "[[LDP_ENCODE wdbc_pca laplace 4]]" {
		t.Fatalf("the recorded releases: %v %v", rel, err)
	}
	// The long form is the same release: the recorded bytes, no new charge.
	long, err := queryAll(analyst, "SELECT id, LDP_ENCODE(features, 4, 'wdbc_pca', 'laplace') FROM wdbc WHERE id > 200 ORDER BY id")
	if err != nil || fmtRows(long) != fmtRows(short) {
		t.Fatalf("the long form after the short one differs (%v)", err)
	}
	if got := spent("true"); got != "369 4 4" {
		t.Fatalf("after the long form: %s", got)
	}

	t.Run("mysql client", func(t *testing.T) {
		client := mariaDBTool(t, "mysql")
		host, port, _ := strings.Cut(s.addr, ":")
		run := func(stmt string) (string, error) {
			out, err := exec.Command(client, "-h", host, "-P", port, "-u", "analyst", "-ppw", "--batch", "--skip-column-names", "ldpsql", "-e", stmt).CombinedOutput()
			return string(out), err
		}
		out, err := run("SELECT id, HEX(LDP_ENCODE(features, 4)) FROM wdbc WHERE id BETWEEN 201 AND 203 ORDER BY id")
		want := ""
		for _, r := range short[:3] {
			want += r[0] + "\t" + strings.ToUpper(hex.EncodeToString([]byte(r[1]))) + "\n"
		}
		if err != nil || out != want {
			t.Fatalf("the short form through the mysql client (err %v):\n%s\nwant the memoised releases\n%s", err, out, want)
		}
		out, err = run("SELECT LDP_ENCODE_JSON(label, 4) FROM wdbc")
		if err == nil || !strings.Contains(out, "LDP_ENCODE_JSON(col, eps): no default mechanism for ldpsql.wdbc.label") {
			t.Fatalf("a column without a default through the mysql client (err %v):\n%s", err, out)
		}
	})
	if got := spent("true"); got != "369 4 4" {
		t.Fatalf("after the mysql client's repeat: %s", got)
	}

	// Charge mode, as a server-side prepared statement: the short and the long form are each charged
	// and recorded as the same release (its memo key).
	mustExec(t, root, "CALL ldp_set_budget('wdbc', 20, 'charge')")
	for _, q := range []string{
		"SELECT id, LDP_ENCODE(features, ?) FROM wdbc WHERE id BETWEEN ? AND ?",
		"SELECT id, LDP_ENCODE(features, ?, 'wdbc_pca', 'laplace') FROM wdbc WHERE id BETWEEN ? AND ?",
	} {
		if rows, err := queryAll(analyst, q, 1, 201, 210); err != nil || len(rows) != 10 {
			t.Fatalf("%s: %d rows, %v", q, len(rows), err)
		}
	}
	if got := spent("unit_key BETWEEN '201' AND '210'"); got != "10 6 6" {
		t.Fatalf("charge mode, the short and the long form at ε 1: %s; want 10 6 6", got)
	}
	pairs, err := queryAll(root, "SELECT unit_key, count(*), count(DISTINCT input_digest) FROM ldpsql_catalog.ldp_releases WHERE table_name = 'wdbc' AND eps = 1 GROUP BY unit_key")
	if err != nil || len(pairs) != 10 {
		t.Fatalf("charge-mode releases: %v %v", pairs, err)
	}
	for _, p := range pairs {
		if p[1] != "2" || p[2] != "1" {
			t.Fatalf("unit %s: %s releases with %s digests; want the short and the long form under one", p[0], p[1], p[2])
		}
	}
	mustExec(t, root, "CALL ldp_set_budget('wdbc', 20, 'memoise')")

	// Everything else that has no default.
	for q, want := range map[string]string{
		"SELECT LDP_ENCODE(label, 4) FROM wdbc":            "no default mechanism for ldpsql.wdbc.label",
		"SELECT LDP_ENCODE(features, 4) FROM wdbc_aux":     "no default mechanism for ldpsql.wdbc_aux.features",
		"SELECT LDP_ENCODE(LDP_VECTOR(1, 2), 4)":           "is not one (an expression",
		"SELECT TRAIN_NOISY_CLASSIFIER('wdbc_aux')":        "table wdbc_aux has no ldp_privatize metadata",
		"SELECT TRAIN_NOISY_CLASSIFIER('scratch.nothing')": "not found",
	} {
		if _, err := queryAll(analyst, q); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q", q, err, want)
		}
	}

	// ldp_privatize, then TRAIN_NOISY_CLASSIFIER with the defaults from the release's metadata.
	mustExec(t, analyst, "CALL ldp_privatize('wdbc', 'features', 'label', 'scratch.released', 8, 0.7, 'wdbc_pca', 'laplace', 2)")
	var id int64
	if err := analyst.QueryRow("SELECT TRAIN_NOISY_CLASSIFIER('scratch.released')").Scan(&id); err != nil {
		t.Fatalf("TRAIN_NOISY_CLASSIFIER('scratch.released'): %v", err)
	}
	if j := waitJob(t, root, id, 5*time.Minute); j.state != "succeeded" {
		t.Fatalf("job %d: %s %s", id, j.state, j.errMsg)
	}
	var raw string
	if err := root.QueryRow("SELECT params FROM ldpsql_catalog.ldp_jobs WHERE id = ?", id).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var params map[string]any
	if err := json.Unmarshal([]byte(raw), &params); err != nil {
		t.Fatal(err)
	}
	if params["model"] != "released_classifier" || params["objective"] != "marginal" || params["aux_table"] != "ldpsql.wdbc_aux" ||
		params["aux_features_col"] != "features" || params["mechanism"] != "wdbc_pca" || params["K"] != 2.0 {
		t.Fatalf("the short form's params: %s", raw)
	}
	// PREDICT: on the clean rows (root reads them), on the releases (the analyst), and privately
	// validated by the analyst (ε 1 per unit).
	var acc float64
	if err := root.QueryRow("SELECT AVG(PREDICT('released_classifier', features) = label) FROM wdbc WHERE id > 200").Scan(&acc); err != nil {
		t.Fatal(err)
	}
	t.Logf("released_classifier: accuracy %.3f on the 369 clean rows not used to fit the mechanism", acc)
	if acc < 0.75 {
		t.Errorf("released_classifier's clean accuracy %.3f; the majority class alone is 0.63", acc)
	}
	if rows, err := queryAll(analyst, "SELECT id, PREDICT('released_classifier', features) FROM scratch.released WHERE id <= 5"); err != nil || len(rows) != 5 {
		t.Fatalf("PREDICT on the releases: %v %v", rows, err)
	}
	var private string
	if err := analyst.QueryRow("SELECT PRIVATE_ACCURACY(PREDICT('released_classifier', features) = label, 1) FROM wdbc WHERE id > 200").Scan(&private); err != nil {
		t.Fatalf("the analyst's private validation: %v", err)
	}
	if p, err := strconv.ParseFloat(private, 64); err != nil || p < 0 || p > 1 {
		t.Fatalf("private accuracy %q", private)
	}
	if _, err := queryAll(analyst, "SELECT TRAIN_NOISY_CLASSIFIER('scratch.released')"); err == nil ||
		!strings.Contains(err.Error(), `a model called "released_classifier" exists`) {
		t.Fatalf("training the short form again: %v", err)
	}
}
