package udf_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dolthub/go-mysql-server/sql"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/training/accuracy"
	"github.com/ldpsql/ldpsql/training/vlm"
	"github.com/ldpsql/ldpsql/udf"
)

// buildPlugins builds the named built-in encoders into a fresh plugin directory.
func buildPlugins(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range names {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, udf.BuiltinPlugins[name]), "./plugins/builtin/"+name)
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building the %s plugin: %v\n%s", name, err, out)
		}
	}
	return dir
}

type diagT struct {
	*ledgerT
	mu     sync.Mutex
	logged []string
}

func newDiagEngine(t *testing.T, plugins ...string) *diagT {
	t.Helper()
	e, err := engine.Open(engine.MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	d := &diagT{ledgerT: &ledgerT{t: t, e: e}}
	logf := func(f string, a ...any) {
		d.mu.Lock()
		d.logged = append(d.logged, fmt.Sprintf(f, a...))
		d.mu.Unlock()
	}
	if _, err := udf.Install(e, udf.Config{PluginDir: buildPlugins(t, plugins...), Logf: logf}); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *diagT) log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.logged, "\n")
}

// fillRank2 creates aux(id, f) with n rows of 8 features: two directions of standard deviation 3 and
// six of 0.1.
func (d *diagT) fillRank2(n int) {
	d.q("CREATE TABLE aux (id INT PRIMARY KEY, f LONGBLOB)")
	rng := rand.New(rand.NewPCG(7, 7))
	for start := 0; start < n; start += 500 {
		var vals []string
		for i := start; i < start+500 && i < n; i++ {
			v := make([]string, 8)
			for j := range v {
				sd := 0.1
				if j < 2 {
					sd = 3
				}
				v[j] = fmt.Sprintf("%.6f", 1+sd*rng.NormFloat64())
			}
			vals = append(vals, fmt.Sprintf("(%d, LDP_VECTOR(%s))", i, strings.Join(v, ",")))
		}
		d.q("INSERT INTO aux VALUES " + strings.Join(vals, ","))
	}
}

// storedDiagnostics returns a model's params, with its "diagnostics" decoded.
func (d *diagT) storedDiagnostics(model string) (map[string]any, map[string]any) {
	d.t.Helper()
	var raw string
	if err := d.e.DuckDB.QueryRow("SELECT params FROM ldpsql_catalog.ldp_models WHERE name = ?", model).Scan(&raw); err != nil {
		d.t.Fatal(err)
	}
	var params map[string]any
	if err := json.Unmarshal([]byte(raw), &params); err != nil {
		d.t.Fatalf("params %s: %v", raw, err)
	}
	diag, ok := params["diagnostics"].(map[string]any)
	if !ok {
		d.t.Fatalf("model %s: no diagnostics in params %s", model, raw)
	}
	return params, diag
}

// metrics turns ldp_evaluate_mechanism's rows into metric → value (NaN for NULL) and metric → note.
func metrics(t *testing.T, rows []sql.Row) (map[string]float64, map[string]string) {
	t.Helper()
	vals, notes := map[string]float64{}, map[string]string{}
	for _, r := range rows {
		m := r[1].(string)
		vals[m] = math.NaN()
		if r[2] != nil {
			vals[m] = r[2].(float64)
		}
		notes[m] = r[3].(string)
	}
	return vals, notes
}

func TestMechanismDiagnostics(t *testing.T) {
	d := newDiagEngine(t, "pca", "identity")
	d.fillRank2(2000)

	// PCA with d = 2 on rank-2 data: a good encoder. At eps_target = 30 with l = 20 the noise variance is
	// 2(2·20/30)² = 3.56 per dimension, so the privatised reconstruction error per feature is about
	// (2·3.56 + 6·0.01)/8 = 0.90 against the mean predictor's (2·9 + 6·0.01)/8 = 2.26.
	d.q(`CALL ldp_fit_mechanism('p2', 'pca', 'aux', 'f', '{"d": 2, "l": 20, "eps_target": 30}')`)
	params, diag := d.storedDiagnostics("p2")
	if params["d"] != 2.0 || params["l"] != 20.0 || params["eps_target"] != 30.0 {
		t.Errorf("the fit's own params are not kept: %v", params)
	}
	if diag["collapsed"] != false || diag["eps"] != 30.0 || diag["active_dims"] != 2.0 || diag["rows"] != 2000.0 ||
		diag["table"] != "aux" || len(diag["warnings"].([]any)) != 0 {
		t.Errorf("p2 diagnostics at fit: %v", diag)
	}

	// PCA with d = 8 on the same data: six of its eight dimensions carry only the small noise (variance
	// 0.01, a thousandth of the first two's), which the diagnostics call collapse, in ldp_models and in
	// the server log.
	d.q(`CALL ldp_fit_mechanism('p8', 'pca', 'aux', 'f', '{"d": 8, "l": 20}')`)
	_, diag8 := d.storedDiagnostics("p8")
	if diag8["collapsed"] != true || diag8["active_dims"] != 2.0 || diag8["eps"] != udf.DefaultDiagnosticsEps ||
		!strings.Contains(fmt.Sprint(diag8["warnings"]), "only 2 of 8") {
		t.Errorf("p8 diagnostics at fit: %v", diag8)
	}
	if log := d.log(); !strings.Contains(log, `ldp_fit_mechanism: mechanism "p8"`) || !strings.Contains(log, "WARNING") || strings.Contains(log, `"p2" at`) {
		t.Errorf("server log:\n%s", log)
	}

	// The identity on its box: no accuracy bound (a box), nothing clipped of the rows it was fitted on.
	d.q(`CALL ldp_fit_mechanism('box', 'identity', 'aux', 'f', '{}')`)
	_, diagBox := d.storedDiagnostics("box")
	if diagBox["accuracy_bound"] != nil || !strings.Contains(fmt.Sprint(diagBox["accuracy_bound_note"]), "box") || diagBox["mse_clean"] != 0.0 {
		t.Errorf("box diagnostics: %v", diagBox)
	}

	// On demand, at another eps: one row per metric, stored too.
	vals, notes := metrics(t, d.q(`CALL ldp_evaluate_mechanism('p2', 'aux', 'f', 30)`))
	near := func(metric string, want, rel float64) {
		t.Helper()
		if math.Abs(vals[metric]-want) > rel*want {
			t.Errorf("%s = %.4g, want %.4g ± %.0f%% (%s)", metric, vals[metric], want, 100*rel, notes[metric])
		}
	}
	near("mse_mean", (2*9+6*0.01)/8, 0.1)
	near("mse_private", (2*2*(40.0/30)*(40.0/30)+6*0.01)/8, 0.1)
	near("noise_var", 2*(40.0/30)*(40.0/30), 1e-9)
	near("latent_var_max", 9, 0.1)
	if vals["collapsed"] != 0 || vals["active_dims"] != 2 || vals["active_dims_at_eps"] != 2 || vals["notes"] != 0 || vals["rows"] != 2000 {
		t.Errorf("p2 at eps 30: %v %v", vals, notes)
	}
	if want, _ := accuracy.Bound(30, 2); vals["accuracy_bound"] != want {
		t.Errorf("accuracy bound %v, want %v", vals["accuracy_bound"], want)
	}
	vals, notes = metrics(t, d.q(`CALL ldp_evaluate_mechanism('p2', 'aux', 'f', 1)`))
	if vals["private_vs_mean"] < 1 || vals["notes"] != 1 || vals["collapsed"] != 0 || vals["active_dims_at_eps"] != 0 {
		t.Errorf("p2 at eps 1 (noise variance 3200): %v %v", vals, notes)
	}
	if _, diag := d.storedDiagnostics("p2"); diag["eps"] != 1.0 {
		t.Errorf("the on-demand evaluation is not stored: eps %v", diag["eps"])
	}
	// With K classes: the bound needs d ≥ K/2.
	vals, notes = metrics(t, d.q(`CALL ldp_evaluate_mechanism('p2', 'aux', 'f', 30, 10)`))
	if !math.IsNaN(vals["accuracy_bound"]) || !strings.Contains(notes["accuracy_bound"], "d = 2 < K/2 = 5") {
		t.Errorf("K = 10 on d = 2: %v %q", vals["accuracy_bound"], notes["accuracy_bound"])
	}
	vals, _ = metrics(t, d.q(`CALL ldp_evaluate_mechanism('p2', 'aux', 'f', 30, 4)`))
	if want, _ := accuracy.Bound(30, 4); vals["accuracy_bound"] != want {
		t.Errorf("K = 4: %v, want %v", vals["accuracy_bound"], want)
	}

	for q, want := range map[string]string{
		`CALL ldp_evaluate_mechanism('nope', 'aux', 'f', 4)`:                                   "unknown mechanism",
		`CALL ldp_evaluate_mechanism('p2', 'aux', 'f', 0)`:                                     "eps",
		`CALL ldp_evaluate_mechanism('p2', 'aux', 'f', 4, 1)`:                                  "K = 1",
		`CALL ldp_evaluate_mechanism('p2', 'missing', 'f', 4)`:                                 "missing",
		`CALL ldp_fit_mechanism('p3', 'pca', 'aux', 'f', '{"d": 2, "eps_target": "high"}')`:    "eps_target",
		`CALL ldp_fit_mechanism('p3', 'pca', 'aux', 'f', '{"d": 2, "k_target": 1}')`:           "k_target",
		`CALL ldp_fit_mechanism('p3', 'pca', 'aux', 'f', '{"d": 2, "eps_target": 4, "x": 1}')`: "unknown field",
	} {
		if _, err := d.as("root", q); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", q, err, want)
		}
	}
	// A DBA procedure: it reads raw rows.
	d.q("CREATE USER analyst@'%'")
	d.q("GRANT SELECT, EXECUTE ON ldpsql.* TO analyst@'%'")
	if _, err := d.as("analyst", `CALL ldp_evaluate_mechanism('p2', 'aux', 'f', 4)`); err == nil || !strings.Contains(strings.ToLower(err.Error()), "denied") {
		t.Errorf("analyst calling ldp_evaluate_mechanism: %v, want access denied", err)
	}
}

// A VLM trained on rows that are all the same encodes every row to the same point: its job succeeds
// with a collapse warning in ldp_jobs and the server log.
func TestTrainJobCollapseWarning(t *testing.T) {
	d := newDiagEngine(t, "vlm")
	d.q("CREATE TABLE same (id INT PRIMARY KEY, f LONGBLOB)")
	var vals []string
	for i := range 300 {
		vals = append(vals, fmt.Sprintf("(%d, LDP_VECTOR(0.5, 0.25, 0.75, 0.5))", i))
	}
	d.q("INSERT INTO same VALUES " + strings.Join(vals, ","))
	rows := d.q(`CALL ldp_train_mechanism('flat', 'vlm', 'same', 'f', '{"d": 4, "l": 2, "linear": true, "epochs": 2, "seed": 1, "eps_target": 8}')`)
	id := rows[0][0].(int64)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job, err := d.e.Jobs.Wait(ctx, id)
	if err != nil || job.State != engine.JobSucceeded {
		t.Fatalf("job: %+v %v", job, err)
	}
	if !strings.Contains(job.Warning, "collapse: only 0 of 4") {
		t.Errorf("job warning %q, want collapse", job.Warning)
	}
	if got := d.q(fmt.Sprintf("SELECT warning FROM ldpsql_catalog.ldp_jobs WHERE id = %d", id)); fmt.Sprint(got) == "[[<nil>]]" {
		t.Errorf("ldp_jobs.warning from SQL: %v", got)
	}
	if log := d.log(); !strings.Contains(log, `ldp_train_mechanism: mechanism "flat"`) || !strings.Contains(log, "collapse") {
		t.Errorf("server log:\n%s", log)
	}
	params, diag := d.storedDiagnostics("flat")
	if diag["eps"] != 8.0 || diag["collapsed"] != true {
		t.Errorf("stored: %v", diag)
	}
	// eps_target without eps_pretrain sets the training noise, and the model's params record it.
	if params["eps_pretrain"] != vlm.EpsPretrainFor(8) || params["eps_target"] != 8.0 {
		t.Errorf("params %v: want eps_pretrain %g from eps_target 8", params, vlm.EpsPretrainFor(8))
	}
	d.q(`CALL ldp_train_mechanism('flat2', 'vlm', 'same', 'f', '{"d": 4, "l": 2, "linear": true, "epochs": 1, "seed": 1, "eps_target": 8, "eps_pretrain": 3}')`)
	if _, err := d.e.Jobs.Wait(ctx, id+1); err != nil {
		t.Fatal(err)
	}
	if params, _ := d.storedDiagnostics("flat2"); params["eps_pretrain"] != 3.0 {
		t.Errorf("an explicit eps_pretrain is kept: %v", params)
	}
}
