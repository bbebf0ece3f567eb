package integration

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func digest(t testing.TB, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func jsonVector(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.6f", x)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// fillAux creates aux(id, f, y) with n rows of 8 features: two strong directions plus small noise, the
// label the sign of the first.
func fillAux(t testing.TB, db *sql.DB, table string, n int) {
	t.Helper()
	mustExec(t, db, "CREATE TABLE "+table+" (id INT PRIMARY KEY, f LONGBLOB, y INT)")
	rng := rand.New(rand.NewSource(7))
	for start := 0; start < n; start += 500 {
		var vals []string
		for i := start; i < start+500 && i < n; i++ {
			v := make([]float64, 8)
			for j := range v {
				scale := 0.1
				if j < 2 {
					scale = 3
				}
				v[j] = rng.NormFloat64() * scale
			}
			y := 0
			if v[0] > 0 {
				y = 1
			}
			vals = append(vals, fmt.Sprintf("(%d, LDP_VECTOR(%s), %d)", i, strings.Trim(jsonVector(v), "[]"), y))
		}
		mustExec(t, db, "INSERT INTO "+table+" VALUES "+strings.Join(vals, ","))
	}
}

func queryJSONVectors(t testing.TB, db *sql.DB, q string, args ...any) [][]float64 {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out [][]float64
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		var v []float64
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestFitEncodeAndPrivatize(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "data.duckdb"))
	db := s.connect("root", "")
	var builtins int
	if err := db.QueryRow("SELECT COUNT(*) FROM ldpsql_catalog.ldp_mechanisms WHERE name IN ('identity', 'pca')").Scan(&builtins); err != nil || builtins != 2 {
		t.Fatalf("built-in plugins registered at start: %d, %v\n%s", builtins, err, s.stderr)
	}
	fillAux(t, db, "aux", 3000)
	var name, plugin, set string
	var in, out, nrows int64
	var ready bool
	err := db.QueryRow(`CALL ldp_fit_mechanism('p2', 'pca', 'aux', 'f', '{"d": 2, "l": 3}')`).Scan(&name, &plugin, &in, &out, &set, &ready, &nrows)
	if err != nil || in != 8 || out != 2 || set != "l1_ball(radius=3)" || !ready || nrows != 3000 {
		t.Fatalf("fit: %v %v %v %v %v %v %v", err, name, in, out, set, ready, nrows)
	}

	// Without l, pca chooses it from the data: the 5th percentile of the encodings' norms, so about 95 %
	// of the auxiliary rows are clipped (the fit's own diagnostics measure the share).
	err = db.QueryRow(`CALL ldp_fit_mechanism('pauto', 'pca', 'aux', 'f', '{"d": 2}')`).Scan(&name, &plugin, &in, &out, &set, &ready, &nrows)
	if err != nil || !strings.HasPrefix(set, "l1_ball(radius=") || set == "l1_ball(radius=10)" {
		t.Fatalf("fit without l: %v, output set %s", err, set)
	}
	var autoParams string
	if err := db.QueryRow("SELECT params FROM ldpsql_catalog.ldp_models WHERE name = 'pauto'").Scan(&autoParams); err != nil {
		t.Fatal(err)
	}
	var autoDiag struct {
		Diagnostics struct {
			ClippedShare float64 `json:"clipped_share"`
		} `json:"diagnostics"`
	}
	if err := json.Unmarshal([]byte(autoParams), &autoDiag); err != nil {
		t.Fatal(err)
	}
	if c := autoDiag.Diagnostics.ClippedShare; c < 0.9 || c > 0.99 {
		t.Errorf("pca without l clips %.3f of the auxiliary rows, want about 0.95 (%s)", c, set)
	}

	// The noise is calibrated to the recorded set: scale b = 2l/eps on each coordinate, so releases of
	// one input have variance 2b² per coordinate. 3,000 releases: the sample variance has relative
	// standard error sqrt(20/4/3000) ≈ 4%; 25% is over 6 of them.
	const eps = 1.0
	rels := queryJSONVectors(t, db, "SELECT LDP_ENCODE_JSON('[1,1,0,0,0,0,0,0]', ?, 'p2') FROM aux", eps)
	if len(rels) != 3000 {
		t.Fatalf("%d releases", len(rels))
	}
	b := 2 * 3 / eps
	for j := 0; j < 2; j++ {
		var sum, sumSq float64
		for _, r := range rels {
			sum += r[j]
			sumSq += r[j] * r[j]
		}
		mean := sum / 3000
		variance := sumSq/3000 - mean*mean
		if math.Abs(variance/(2*b*b)-1) > 0.25 {
			t.Errorf("coordinate %d: release variance %.1f, want 2b² = %.1f", j, variance, 2*b*b)
		}
	}
	// Packed form: 2 float32 = 8 bytes per row; the JSON and BLOB forms agree in shape.
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM (SELECT LDP_ENCODE(f, 2, 'p2', 'duchi') AS r FROM aux) x WHERE LENGTH(r) = 8").Scan(&n); err != nil || n != 3000 {
		t.Fatalf("LDP_ENCODE BLOBs: %d, %v", n, err)
	}
	var null sql.NullString
	if err := db.QueryRow("SELECT LDP_ENCODE(NULL, 1, 'p2')").Scan(&null); err != nil || null.Valid {
		t.Fatalf("NULL in: %v %v", null, err)
	}

	// Bad input: each error names the problem; nothing is written. aux_nonfinite is aux with one row
	// holding +Inf among its 3,000, scanned in batches.
	mustExec(t, db, "CREATE TABLE aux_nonfinite AS SELECT * FROM aux")
	mustExec(t, db, "INSERT INTO aux_nonfinite VALUES (99999, x'"+strings.Repeat("0000803f", 2)+"0000807f"+strings.Repeat("0000803f", 5)+"', 0)")
	for _, tc := range []struct{ q, want string }{
		{"SELECT LDP_ENCODE('[1,2]', 1, 'p2')", "features have 2 values, mechanism \"p2\" expects 8"},
		{"SELECT LDP_ENCODE('[1,2,x]', 1, 'p2')", "not a JSON array"},
		{"SELECT LDP_ENCODE(f, 0, 'p2') FROM aux", "argument eps = 0"},
		{"SELECT LDP_ENCODE(f, 1, 'nope') FROM aux", "unknown mechanism \"nope\""},
		{"SELECT LDP_ENCODE(f, 1, 'p2', 'gauss') FROM aux", "gauss"},
		{"SELECT LDP_ENCODE(x'0102', 1, 'p2')", "multiple of 4 bytes"},
		// Packed NaN and +Inf (LDP_VECTOR refuses them, a BLOB literal does not).
		{"SELECT LDP_ENCODE(x'" + strings.Repeat("0000803f", 7) + "0000c07f', 1, 'p2')", "argument features has a non-finite value NaN at index 7"},
		{"SELECT LDP_ENCODE(f, 1, 'p2') FROM aux_nonfinite", "argument features has a non-finite value +Inf at index 2"},
		{"SELECT LDP_ENCODE(f, 1, 'identity') FROM aux", "no fitted model"},
		{`CALL ldp_fit_mechanism('p3', 'pca', 'aux', 'f', '{"d": 2,')`, "not a JSON object"},
		{`CALL ldp_fit_mechanism('p2', 'pca', 'aux', 'f', '{"d": 2}')`, "already registered"},
	} {
		if _, err := db.Exec(tc.q); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.q, err, tc.want)
		}
	}

	// ldp_privatize: eps 4 split 0.7/0.3; labels flipped with probability 1/(e^1.2+1) = 0.231.
	var dst string
	var rowsOut int64
	var secs, rps, epsX, epsY float64
	err = db.QueryRow(`CALL ldp_privatize('aux', 'f', 'y', 'aux_priv', 4.0, 0.7, 'p2', 'laplace', 2)`).Scan(&dst, &rowsOut, &secs, &rps, &epsX, &epsY)
	if err != nil || rowsOut != 3000 || math.Abs(epsX-2.8) > 1e-12 || math.Abs(epsY-1.2) > 1e-12 {
		t.Fatalf("privatize: %v rows=%d eps_x=%v eps_y=%v", err, rowsOut, epsX, epsY)
	}
	var flipped int
	if err := db.QueryRow("SELECT COUNT(*) FROM aux a JOIN aux_priv p ON a.id = p.id WHERE a.y <> p.y").Scan(&flipped); err != nil {
		t.Fatal(err)
	}
	pFlip := 1 / (math.Exp(1.2) + 1)
	if se := math.Sqrt(pFlip * (1 - pFlip) / 3000); math.Abs(float64(flipped)/3000-pFlip) > 6*se {
		t.Errorf("label flip rate %.3f, want %.3f", float64(flipped)/3000, pFlip)
	}
	var create string
	if err := db.QueryRow("SHOW CREATE TABLE aux_priv").Scan(&dst, &create); err != nil || !strings.Contains(create, "ldp_privatize") || !strings.Contains(create, "eps_x") {
		t.Fatalf("metadata comment: %v\n%s", err, create)
	}
	// A failure leaves no destination: a source with one bad row (wrong dimension) at the end.
	mustExec(t, db, "CREATE TABLE aux_bad AS SELECT * FROM aux")
	mustExec(t, db, "INSERT INTO aux_bad VALUES (99999, LDP_VECTOR(1, 2, 3), 0)")
	if _, err := db.Exec(`CALL ldp_privatize('aux_bad', 'f', 'y', 'bad_priv', 4.0, 0.7, 'p2', 'laplace', 2)`); err == nil || !strings.Contains(err.Error(), "has 3 features") {
		t.Fatalf("privatize with a bad row: %v", err)
	}
	// Or one row with +Inf (refused by the host as it copies the batch to the plugin), named by its row.
	if _, err := db.Exec(`CALL ldp_privatize('aux_nonfinite', 'f', 'y', 'nonfinite_priv', 4.0, 0.7, 'p2', 'laplace', 2)`); err == nil ||
		!strings.Contains(err.Error(), "argument features has a non-finite value +Inf at index 2 (source row 3001)") {
		t.Fatalf("privatize with a +Inf row: %v", err)
	}
	tables := tableNames(t, db)
	if strings.Contains(tables, "bad_priv") || strings.Contains(tables, "nonfinite_priv") || strings.Contains(tables, "_ldp_tmp") {
		t.Fatalf("a failed ldp_privatize left tables behind: %s", tables)
	}
	if _, err := db.Exec(`CALL ldp_privatize('aux', 'f', 'y', 'aux_priv', 4.0, 0.7, 'p2', 'laplace', 2)`); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("existing destination: %v", err)
	}
	for _, q := range []string{
		`CALL ldp_privatize('aux', 'f', 'y', 'x1', 4.0, 1.5, 'p2', 'laplace', 2)`,
		`CALL ldp_privatize('aux', 'f', 'y', 'x2', -1, 0.5, 'p2', 'laplace', 2)`,
		`CALL ldp_privatize('aux', 'f', 'y', 'x3', 1, 0.5, 'p2', 'laplace', 1)`,
	} {
		if _, err := db.Exec(q); err == nil {
			t.Errorf("%s succeeded", q)
		}
	}
}

func tableNames(t testing.TB, db *sql.DB) string {
	t.Helper()
	rows, err := db.Query("SHOW TABLES")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		names = append(names, n)
	}
	return strings.Join(names, ",")
}

func TestRegisterMechanismAndPrivileges(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "data.duckdb"))
	db := s.connect("root", "")
	meanpool := filepath.Join(pluginBin, "meanpool")
	sum := digest(t, meanpool)
	notExec := filepath.Join(t.TempDir(), "plain")
	os.WriteFile(notExec, []byte("hello"), 0o644)
	truePath, _ := exec.LookPath("true")
	for _, tc := range []struct{ q, want string }{
		{fmt.Sprintf("CALL ldp_register_mechanism('mp', '%s', '%s')", meanpool, strings.Repeat("0", 64)), "not the"},
		{fmt.Sprintf("CALL ldp_register_mechanism('mp', 'relative/path', '%s')", sum), "must be absolute"},
		{fmt.Sprintf("CALL ldp_register_mechanism('mp', '%s', '%s')", filepath.Join(pluginBin, "missing"), sum), "no such file"},
		{fmt.Sprintf("CALL ldp_register_mechanism('mp', '%s', '%s')", notExec, digest(t, notExec)), "not an executable"},
		{fmt.Sprintf("CALL ldp_register_mechanism('mp', '%s', '%s')", truePath, digest(t, truePath)), "did not start as an ldpsql encoder plugin"},
		{fmt.Sprintf("CALL ldp_register_mechanism('bad name', '%s', '%s')", meanpool, sum), "not a valid name"},
	} {
		if _, err := db.Exec(tc.q); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.q, err, tc.want)
		}
	}
	var count int
	db.QueryRow("SELECT COUNT(*) FROM ldpsql_catalog.ldp_mechanisms WHERE name = 'mp'").Scan(&count)
	if count != 0 {
		t.Fatal("a failed registration registered something")
	}
	mustExec(t, db, fmt.Sprintf("CALL ldp_register_mechanism('mp', '%s', '%s')", meanpool, sum))
	if _, err := db.Exec(fmt.Sprintf("CALL ldp_register_mechanism('mp', '%s', '%s')", meanpool, sum)); err == nil || !strings.Contains(err.Error(), "already registered") {
		t.Fatalf("duplicate: %v", err)
	}
	var by string
	if err := db.QueryRow("SELECT registered_by FROM ldpsql_catalog.ldp_mechanisms WHERE name = 'mp'").Scan(&by); err != nil || !strings.HasPrefix(by, "root@") {
		t.Fatalf("registered_by %q %v", by, err)
	}
	// The third-party encoder works end to end: 784 → 49 values.
	pix := make([]string, 784)
	for i := range pix {
		pix[i] = fmt.Sprint(i % 2)
	}
	rel := queryJSONVectors(t, db, "SELECT LDP_ENCODE_JSON(?, 5, 'mp')", "["+strings.Join(pix, ",")+"]")
	if len(rel) != 1 || len(rel[0]) != 49 {
		t.Fatalf("meanpool release: %v", rel)
	}

	// An ordinary user may query but not register or drop mechanisms.
	mustExec(t, db, "CREATE USER analyst@'%' IDENTIFIED BY 'pw'")
	mustExec(t, db, "GRANT SELECT, EXECUTE ON ldpsql.* TO analyst@'%'")
	adb := s.connect("analyst", "pw")
	if _, err := adb.Exec("SELECT 1"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		fmt.Sprintf("CALL ldp_register_mechanism('mp2', '%s', '%s')", meanpool, sum),
		"CALL ldp_drop_mechanism('mp')",
		`CALL ldp_fit_mechanism('p9', 'pca', 'aux', 'f', '{}')`,
	} {
		if _, err := adb.Exec(q); err == nil || !strings.Contains(strings.ToLower(err.Error()), "denied") {
			t.Errorf("analyst: %s: %v, want access denied", q, err)
		}
	}
	// Granted explicitly, the analyst may.
	mustExec(t, db, "GRANT EXECUTE ON PROCEDURE ldpsql.ldp_drop_mechanism TO analyst@'%'")
	if _, err := adb.Exec("CALL ldp_drop_mechanism('mp')"); err != nil {
		t.Fatalf("granted drop: %v", err)
	}
	if _, err := db.Exec("CALL ldp_drop_mechanism('mp')"); err == nil {
		t.Fatal("dropping an unknown mechanism succeeded")
	}
}

// Broken and hostile plugins cannot weaken the guarantee or take the server down.
func TestFaultyPlugins(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "data.duckdb"))
	db := s.connect("root", "")
	for _, p := range []string{"liar", "crash", "hang"} {
		path := filepath.Join(pluginBin, p)
		mustExec(t, db, fmt.Sprintf("CALL ldp_register_mechanism('%s', '%s', '%s')", p, path, digest(t, path)))
	}
	healthy := func(mech, features string) {
		t.Helper()
		if rel := queryJSONVectors(t, db, "SELECT LDP_ENCODE_JSON(?, 1, ?)", features, mech); len(rel) != 1 {
			t.Fatalf("%s after a fault: %v", mech, rel)
		}
	}
	// Vectors far outside the declared ball (radius 1) are re-clipped by the host: at eps = 50 the noise
	// scale is 2/50, so every release lies within 1 + a few tenths of the ball.
	rels := queryJSONVectors(t, db, "SELECT LDP_ENCODE_JSON('[2,0,0,0]', 50, 'liar') FROM ldpsql_catalog.ldp_mechanisms")
	for _, r := range rels {
		if l1 := math.Abs(r[0]) + math.Abs(r[1]); l1 > 2 {
			t.Fatalf("release %v of a 1e30 encoding was not re-clipped", r)
		}
	}
	// NaN encodings do not fail the statement (which rows fail would reveal them): those rows are
	// released from the ball's centre, 0, and the server log names the faulty plugin. At eps = 50 the
	// noise scale is 2/50, so every such release lies near 0.
	for _, r := range queryJSONVectors(t, db, "SELECT LDP_ENCODE_JSON('[1,0,0,0]', 50, 'liar') FROM ldpsql_catalog.ldp_mechanisms") {
		if l1 := math.Abs(r[0]) + math.Abs(r[1]); l1 > 1 {
			t.Fatalf("release %v of a NaN encoding is not centred on 0", r)
		}
	}
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && !strings.Contains(s.stderr.String(), "non-finite or wrong-length"); {
		time.Sleep(50 * time.Millisecond) // the log reaches the pipe asynchronously
	}
	if !strings.Contains(s.stderr.String(), "non-finite or wrong-length encodings") {
		t.Errorf("the server log does not name the faulty plugin:\n%s", s.stderr)
	}
	for _, tc := range []struct{ q, want string }{
		{"SELECT LDP_ENCODE('[3,0,0,0]', 1, 'liar')", "malformed"},
		{"SELECT LDP_ENCODE('[4,0,0,0]', 1, 'liar')", "malformed"},
		{"SELECT LDP_ENCODE('[-1,0]', 1, 'crash')", "crash"},
		{"SELECT LDP_ENCODE('[-1,0]', 1, 'hang')", "timed out"},
	} {
		start := time.Now()
		_, err := db.Exec(tc.q)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.q, err, tc.want)
		}
		if time.Since(start) > 20*time.Second {
			t.Errorf("%s took %s", tc.q, time.Since(start))
		}
	}
	healthy("liar", "[0,0,0,0]")
	healthy("crash", "[1,2]")
	healthy("hang", "[1,2]")

	// A binary replaced after registration is refused when it next starts.
	swapped := filepath.Join(t.TempDir(), "swapped")
	copyFile(t, filepath.Join(pluginBin, "crash"), swapped)
	mustExec(t, db, fmt.Sprintf("CALL ldp_register_mechanism('swapped', '%s', '%s')", swapped, digest(t, swapped)))
	copyFile(t, filepath.Join(pluginBin, "hang"), swapped)
	if _, err := db.Exec("SELECT LDP_ENCODE('[1,2]', 1, 'swapped')"); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("changed binary: %v", err)
	}
	var one int
	if err := db.QueryRow("SELECT 1").Scan(&one); err != nil {
		t.Fatalf("server stopped serving: %v", err)
	}
	db.Close()
	s.stop()
	// No plugin process outlives the server.
	out, _ := exec.Command("pgrep", "-f", pluginBin).Output()
	if len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("plugin processes left after the server stopped: %s", out)
	}
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(to)
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}
