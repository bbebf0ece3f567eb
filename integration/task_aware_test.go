package integration

import (
	"encoding/json"
	"math"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ldpsql/ldpsql/training/datasets"
	"github.com/ldpsql/ldpsql/training/taskaware"
)

var auditRowRE = regexp.MustCompile(`(?m)^\| (LDP_ENCODE\(ta, laplace\)) +\| ([0-9.e+-]+) +\| ([0-9.e+-]+) +\| ([0-9.+-]+|[+-]Inf|NaN) +\| ([0-9.+-]+|[+-]Inf|NaN) +\| ([0-9]+) +\| (PASS|FAIL) +\|$`)

// `ldpsql audit encode:ta` on the task-aware linear mechanism, fitted with the CLI on 200 min-max scaled
// WDBC rows (weights 1, designed for ε = 60 so that its latent has several dimensions; the audit releases
// at ε = 1, which the host calibrates on the same recorded ball): through LDP_ENCODE_JSON itself (the plugin, the host's clip
// into the recorded ℓ1 ball and the Laplace randomiser), the audit passes at ε = 1, both for the default
// candidates (±10⁶ along a few directions, clipped by the encoder to vertices of its input box) and for
// the two opposite vertices whose encodings are Δ1 apart; on that pair the point estimate is ε itself,
// so the declared radius is Δ1/2 with no slack: the noise is exactly the b = Δ1/ε of the paper.
func TestTaskAwareLinearAudit(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "ta.duckdb")
	run := cliRunner(t)
	// The first 200 WDBC rows, min-max scaled over the whole data set, as the auxiliary rows.
	rows, vals := wdbcAuxRows(t, 200, false)
	weights := strings.TrimSuffix(strings.Repeat("1, ", 30), ", ")
	run("sql", "--db", db, "-e", "CREATE TABLE aux (id INT PRIMARY KEY, features LONGBLOB NOT NULL); "+
		"INSERT INTO aux VALUES "+strings.Join(vals, ", ")+"; "+
		`CALL ldp_fit_mechanism('ta', 'task_aware_linear', 'aux', 'features', '{"weights": [`+weights+`], "eps": 60, "z": 4}')`)

	// The same fit in process gives the extreme pair; its radius is the one recorded in the catalog.
	m, err := taskaware.FitRows(taskaware.Params{Weights: ones30(), Eps: 60, Z: 4}, rows)
	if err != nil {
		t.Fatal(err)
	}
	if m.Z < 2 {
		t.Fatalf("Z = %d: the audit wants a latent of several dimensions", m.Z)
	}
	t.Logf("Z = %d, radius %v", m.Z, m.Radius)
	out := run("sql", "--db", db, "-e", "SELECT description FROM ldpsql_catalog.ldp_mechanisms WHERE name = 'ta'")
	mr := regexp.MustCompile(`"Radius": ?([0-9.e+-]+)`).FindStringSubmatch(out)
	if mr == nil {
		t.Fatalf("no radius in the recorded description:\n%s", out)
	}
	if r, _ := strconv.ParseFloat(mr[1], 64); math.Abs(r-m.Radius) > 1e-9*m.Radius {
		t.Fatalf("recorded radius %v, the in-process fit's %v", r, m.Radius)
	}
	pair, _ := json.Marshal(m.ExtremeVertices)

	for _, tc := range []struct {
		name   string
		inputs []string
	}{
		{"default candidates", nil},
		{"the extreme pair", []string{"--inputs", string(pair)}},
	} {
		args := append([]string{"audit", "encode:ta", "--db", db, "--eps", "1", "--samples", "300000"}, tc.inputs...)
		out := run(args...)
		got := auditRowRE.FindStringSubmatch(out)
		if got == nil || got[7] != "PASS" {
			t.Fatalf("%s: no PASS row in\n%s", tc.name, out)
		}
		point, _ := strconv.ParseFloat(got[4], 64)
		t.Logf("%s: ε̂ point %s, lower %s, effective ε %s", tc.name, got[4], got[5], got[3])
		if tc.inputs != nil && (point < 0.8 || point > 1.2) {
			t.Errorf("%s: point estimate %v, want about ε = 1 (encodings Δ1 apart)\n%s", tc.name, point, out)
		}
	}
}

func ones30() []float64 {
	w := make([]float64, 30)
	for i := range w {
		w[i] = 1
	}
	return w
}

var hexRE = regexp.MustCompile(`[0-9A-F]{200,}`)

// The trained task-aware mechanism through the CLI: `ldpsql train --kind task_aware` on 200 labelled
// min-max WDBC rows (linear encoder, Z = 3), then `ldpsql audit encode:ta` at ε = 1 on the two opposite
// vertices the artifact records: they encode Δ1 apart, so the point estimate is ε itself and the audit
// passes (the declared radius Δ1/2 has no slack, and is enough).
func TestTaskAwareTrainedAudit(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "tat.duckdb")
	run := cliRunner(t)
	_, vals := wdbcAuxRows(t, 200, true)
	run("sql", "--db", db, "-e", "CREATE TABLE aux (id INT PRIMARY KEY, features LONGBLOB NOT NULL, label INT NOT NULL); "+
		"INSERT INTO aux VALUES "+strings.Join(vals, ", "))
	out := run("train", "--db", db, "--kind", "task_aware", "--name", "ta", "--table", "aux",
		"--params", `{"label": "label", "eps": 5, "z": 3, "epochs": 40, "task_epochs": 200}`)
	if !strings.Contains(out, `mechanism "ta" is registered`) {
		t.Fatalf("ldpsql train:\n%s", out)
	}
	hex := hexRE.FindString(run("sql", "--db", db, "-e", "SELECT HEX(artifact) FROM ldpsql_catalog.ldp_models WHERE name = 'ta'"))
	art := make([]byte, len(hex)/2)
	for i := range art {
		v, err := strconv.ParseUint(hex[2*i:2*i+2], 16, 8)
		if err != nil {
			t.Fatal(err)
		}
		art[i] = byte(v)
	}
	m, err := taskaware.LoadNetwork(art)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.ExtremeVertices) != 2 || m.Z != 3 {
		t.Fatalf("Z = %d, extreme vertices %v", m.Z, m.ExtremeVertices)
	}
	pair, _ := json.Marshal(m.ExtremeVertices)
	out = run("audit", "encode:ta", "--db", db, "--eps", "1", "--samples", "300000", "--inputs", string(pair))
	got := auditRowRE.FindStringSubmatch(out)
	if got == nil || got[7] != "PASS" {
		t.Fatalf("no PASS row in\n%s", out)
	}
	point, _ := strconv.ParseFloat(got[4], 64)
	t.Logf("Δ1 %.3f; ε̂ point %s, lower %s", m.Delta1, got[4], got[5])
	if point < 0.8 || point > 1.2 {
		t.Errorf("point estimate %v, want about ε = 1 (encodings Δ1 apart)\n%s", point, out)
	}
}

// cliRunner returns a function that runs the ldpsql binary with args and returns its output, failing
// the test on a non-zero exit.
func cliRunner(t *testing.T) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		out, err := exec.Command(ldpsqlBin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("ldpsql %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
}

// wdbcAuxRows returns the first n WDBC rows, min-max scaled over the whole data set, and the same rows
// as SQL tuples (id, LDP_VECTOR(…)) for an INSERT, with the label appended when withLabel.
func wdbcAuxRows(t *testing.T, n int, withLabel bool) ([][]float32, []string) {
	t.Helper()
	w, err := datasets.LoadWDBC()
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := make([]float64, 30), make([]float64, 30)
	for j := range lo {
		lo[j], hi[j] = math.Inf(1), math.Inf(-1)
		for _, r := range w.Features {
			lo[j], hi[j] = min(lo[j], r[j]), max(hi[j], r[j])
		}
	}
	rows, vals := make([][]float32, n), make([]string, n)
	for i := range rows {
		rows[i] = make([]float32, 30)
		s := make([]string, 30)
		for j := range rows[i] {
			rows[i][j] = float32((w.Features[i][j] - lo[j]) / (hi[j] - lo[j]))
			s[j] = strconv.FormatFloat(float64(rows[i][j]), 'g', -1, 32)
		}
		label := ""
		if withLabel {
			label = ", " + strconv.Itoa(w.Labels[i])
		}
		vals[i] = "(" + strconv.Itoa(i+1) + ", LDP_VECTOR(" + strings.Join(s, ", ") + ")" + label + ")"
	}
	return rows, vals
}
