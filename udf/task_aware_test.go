package udf_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dolthub/go-mysql-server/sql"

	"github.com/ldpsql/ldpsql/training/datasets"
	"github.com/ldpsql/ldpsql/training/taskaware"
	"github.com/ldpsql/ldpsql/udf"
)

// fillWDBCMinMax creates wdbc(id, features, label) with the 569 WDBC rows, every feature min-max scaled to
// [0, 1] over the whole data set (as the task-aware paper's code does), and returns the rows.
func fillWDBCMinMax(l *ledgerT) [][]float32 {
	l.t.Helper()
	w, err := datasets.LoadWDBC()
	if err != nil {
		l.t.Fatal(err)
	}
	n := len(w.Features[0])
	lo, hi := make([]float64, n), make([]float64, n)
	for j := range n {
		lo[j], hi[j] = math.Inf(1), math.Inf(-1)
		for _, r := range w.Features {
			lo[j], hi[j] = min(lo[j], r[j]), max(hi[j], r[j])
		}
	}
	l.q("CREATE TABLE wdbc (id INT PRIMARY KEY, features LONGBLOB NOT NULL, label INT NOT NULL)")
	rows := make([][]float32, len(w.Features))
	var vals []string
	for i, r := range w.Features {
		rows[i] = make([]float32, n)
		s := make([]string, n)
		for j := range n {
			rows[i][j] = float32((r[j] - lo[j]) / (hi[j] - lo[j]))
			s[j] = fmt.Sprint(rows[i][j])
		}
		vals = append(vals, fmt.Sprintf("(%d, LDP_VECTOR(%s), %d)", i+1, strings.Join(s, ","), w.Labels[i]))
		if len(vals) == 100 || i == len(w.Features)-1 {
			l.q("INSERT INTO wdbc VALUES " + strings.Join(vals, ","))
			vals = nil
		}
	}
	return rows
}

func blobVector(t *testing.T, v any) []float32 {
	t.Helper()
	var b []byte
	switch x := v.(type) {
	case []byte:
		b = x
	case string:
		b = []byte(x)
	default:
		t.Fatalf("a vector of type %T", v)
	}
	f, err := udf.UnpackVector(b)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// The task-aware linear mechanism end to end in SQL, on min-max WDBC (the first 200 rows auxiliary, the
// other 369 released): ldp_fit_mechanism designs it for a weighted reconstruction at ε = 5; the
// declared output set is the ℓ1 ball of radius Δ1/2; LDP_ENCODE releases Z values whose noise has the
// variance 2(Δ1/ε)² of Laplace scale Δ1/ε; LDP_DECODE is the model's LMMSE decoder; ldp_privatize and
// TRAIN_NOISY_CLASSIFIER work on it unchanged, and the classifier beats the majority class on clean rows.
func TestTaskAwareLinearEndToEnd(t *testing.T) {
	l := newLedgerEngine(t, buildPlugins(t, "task_aware_linear"))
	rows := fillWDBCMinMax(l)
	l.q("CREATE TABLE aux (id INT PRIMARY KEY, features LONGBLOB NOT NULL)")
	l.q("INSERT INTO aux SELECT id, features FROM wdbc WHERE id <= 200")
	l.q("CREATE TABLE d2 AS SELECT * FROM wdbc WHERE id > 200")
	weights := make([]string, 30)
	for j := range weights {
		weights[j] = "1"
		if j < 10 {
			weights[j] = "2" // the mean features count twice
		}
	}
	params := fmt.Sprintf(`{"weights": [%s], "eps": 5, "z": 3}`, strings.Join(weights, ", "))

	// Errors name the field.
	_, err := l.as("root", `CALL ldp_fit_mechanism('bad', 'task_aware_linear', 'aux', 'features', '{"weights": [1, 2], "eps": 5}')`)
	wantErr(t, err, "task_aware_linear params: weights has 2 values, the features have 30")
	_, err = l.as("root", `CALL ldp_fit_mechanism('bad', 'task_aware_linear', 'aux', 'features', '{"weights": [1]}')`)
	wantErr(t, err, "task_aware_linear params: eps is required")

	l.q(fmt.Sprintf(`CALL ldp_fit_mechanism('ta', 'task_aware_linear', 'aux', 'features', '%s')`, params))
	var art []byte
	if err := l.e.DuckDB.QueryRow("SELECT artifact FROM ldpsql_catalog.ldp_models WHERE name = 'ta'").Scan(&art); err != nil {
		t.Fatal(err)
	}
	m, err := taskaware.Load(art)
	if err != nil {
		t.Fatal(err)
	}
	var desc string
	if err := l.e.DuckDB.QueryRow("SELECT description FROM ldpsql_catalog.ldp_mechanisms WHERE name = 'ta'").Scan(&desc); err != nil {
		t.Fatal(err)
	}
	var d struct {
		InputDim, OutputDim int
		OutputSet           struct {
			Kind   int
			Radius float64
		}
	}
	if err := json.Unmarshal([]byte(desc), &d); err != nil {
		t.Fatal(err)
	}
	if d.InputDim != 30 || d.OutputDim != m.Z || d.OutputSet.Radius != m.Delta1/2 || m.N != 200 {
		t.Fatalf("recorded description %s; model Z = %d, Δ1 = %v, fitted on %d rows", desc, m.Z, m.Delta1, m.N)
	}
	t.Logf("fitted: Z = %d (cap %d), Δ1 = %.4g, b at ε = 5: %.4g, loss %.4f (mean predictor %.4f, task-agnostic %.4f)",
		m.Z, m.ZMax, m.Delta1, m.NoiseScale, m.Loss, m.LossMean, m.LossTaskAgnostic)

	// LDP_ENCODE at ε = 5, thirty releases of each of the 369 rows: the noise around the clean encoding
	// has mean 0 and variance 2b² per coordinate, b = Δ1/ε (11,070 values at Z = 1).
	enc := l.q("WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < 30) " +
		"SELECT d2.id, LDP_ENCODE(d2.features, 5, 'ta') FROM d2, k")
	clean, err := m.Encode(rows[200:])
	if err != nil {
		t.Fatal(err)
	}
	checkReleaseNoise(t, enc, clean, 201, m.NoiseVar)

	// LDP_DECODE is the model's decoder, bit for bit; the decoded releases reconstruct the weighted task
	// better than the auxiliary mean does.
	dec := l.q("SELECT id, LDP_DECODE(LDP_ENCODE(features, 5, 'ta'), 'ta') FROM d2 ORDER BY id")
	var mse, msem float64
	for _, r := range dec {
		x := blobVector(t, r[1])
		if len(x) != 30 {
			t.Fatalf("decoded %d values", len(x))
		}
		i := toInt64(t, r[0]) - 1
		for j := range x {
			w := 1.0
			if j < 10 {
				w = 2
			}
			mse += w * w * math.Pow(float64(x[j])-float64(rows[i][j]), 2)
			msem += w * w * math.Pow(m.Mean[j]-float64(rows[i][j]), 2)
		}
	}
	// A latent decoded by SQL and in process.
	lat := make([]float32, m.Z)
	args := make([]string, m.Z)
	for k := range lat {
		lat[k] = float32(k) - 0.75
		args[k] = fmt.Sprint(lat[k])
	}
	one := l.q("SELECT LDP_DECODE(LDP_VECTOR(" + strings.Join(args, ", ") + "), 'ta')")
	want, _ := m.Decode([][]float32{lat})
	if got := blobVector(t, one[0][0]); fmt.Sprint(got) != fmt.Sprint(want[0]) {
		t.Fatalf("LDP_DECODE %v, the model's decoder %v", got, want[0])
	}
	mse /= float64(len(dec))
	msem /= float64(len(dec))
	t.Logf("released rows: E‖K(x̂ − x)‖² = %.4f, with the auxiliary mean %.4f", mse, msem)
	if !(mse < msem) {
		t.Errorf("decoded releases %.4f, no better than the mean %.4f", mse, msem)
	}

	// ldp_privatize (ε = 10 split evenly: the features at ε_x = 5, the design's ε) and
	// TRAIN_NOISY_CLASSIFIER with the mechanism's own training rows as the marginal prior.
	l.q("CALL ldp_privatize('d2', 'features', 'label', 'd2_priv', 10, 0.5, 'ta', 'laplace', 2)")
	rows2 := l.q("SELECT TRAIN_NOISY_CLASSIFIER('d2_priv', '{\"model\": \"clf\", \"objective\": \"marginal\", \"aux_table\": \"aux\", \"seed\": 1}')")
	id := toInt64(t, rows2[0][0])
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	job, err := l.e.Jobs.Wait(ctx, id)
	if err != nil || job.State != "succeeded" {
		t.Fatalf("job %d: %s %s %v", id, job.State, job.Error, err)
	}
	acc := toFloat(t, l.q("SELECT AVG(PREDICT('clf', features) = label) FROM d2")[0][0])
	major := toFloat(t, l.q("SELECT GREATEST(AVG(label), 1 - AVG(label)) FROM d2")[0][0])
	t.Logf("classifier trained on the ldp_privatize'd rows: accuracy %.3f on the clean rows (majority class %.3f)", acc, major)
	if !(acc > major+0.05) {
		t.Errorf("accuracy %.3f, majority class %.3f; job epochs %d loss %v params %s warning %q", acc, major, job.Epoch, job.Loss, job.Params, job.Warning)
	}
}

// The trained task-aware mechanism (Algorithm 1) end to end in SQL on min-max WDBC: the first 398 rows,
// labelled, train it (the paper's split) as a job; the declared output set is the ℓ1 ball of radius
// Δ1/2 the artifact's weights give; LDP_ENCODE adds Laplace noise of scale Δ1/ε; LDP_DECODE is the
// trained decoder; ldp_privatize and TRAIN_NOISY_CLASSIFIER work on it unchanged. Bad params, a missing
// label column and a NULL label are refused with errors that name them.
func TestTaskAwareTrainedEndToEnd(t *testing.T) {
	l := newLedgerEngine(t, buildPlugins(t, "task_aware"))
	rows := fillWDBCMinMax(l)
	l.q("CREATE TABLE aux AS SELECT * FROM wdbc WHERE id <= 398")
	l.q("CREATE TABLE d2 AS SELECT * FROM wdbc WHERE id > 398")

	_, err := l.as("root", `CALL ldp_train_mechanism('bad', 'task_aware', 'aux', 'features', '{"eps": 10}')`)
	wantErr(t, err, `task_aware params: give "label"`)
	_, err = l.as("root", `CALL ldp_train_mechanism('bad', 'task_aware', 'aux', 'features', '{"label": "diagnosis", "eps": 10}')`)
	wantErr(t, err, "label column diagnosis")
	l.q("CREATE TABLE nolabel AS SELECT id, features, CASE WHEN id = 7 THEN NULL ELSE label END AS label FROM aux")
	bad := toInt64(t, l.q(`CALL ldp_train_mechanism('bad', 'task_aware', 'nolabel', 'features', '{"label": "label", "eps": 10}')`)[0][0])
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if job, _ := l.e.Jobs.Wait(ctx, bad); job.State != "failed" || !strings.Contains(job.Error, "has no label (NULL)") {
		t.Fatalf("a NULL label: job %s, %q", job.State, job.Error)
	}

	id := toInt64(t, l.q(`CALL ldp_train_mechanism('ta', 'task_aware', 'aux', 'features', '{"label": "label", "eps": 10, "encoder": "mlp", "epochs": 60, "task_epochs": 400}')`)[0][0])
	if job, err := l.e.Jobs.Wait(ctx, id); err != nil || job.State != "succeeded" {
		t.Fatalf("job %d: %s %s %v", id, job.State, job.Error, err)
	}
	var art []byte
	if err := l.e.DuckDB.QueryRow("SELECT artifact FROM ldpsql_catalog.ldp_models WHERE name = 'ta'").Scan(&art); err != nil {
		t.Fatal(err)
	}
	m, err := taskaware.LoadNetwork(art)
	if err != nil {
		t.Fatal(err)
	}
	var desc string
	if err := l.e.DuckDB.QueryRow("SELECT description FROM ldpsql_catalog.ldp_mechanisms WHERE name = 'ta'").Scan(&desc); err != nil {
		t.Fatal(err)
	}
	var d struct {
		InputDim, OutputDim int
		OutputSet           struct{ Radius float64 }
	}
	if err := json.Unmarshal([]byte(desc), &d); err != nil {
		t.Fatal(err)
	}
	if d.InputDim != 30 || d.OutputDim != 3 || d.OutputSet.Radius != m.Delta1/2 || m.N != 398 || m.Encoder != "mlp" {
		t.Fatalf("recorded description %s; model Z = %d, Δ1 = %v, trained on %d rows", desc, m.Z, m.Delta1, m.N)
	}

	// Twenty releases of each of the 171 rows at ε = 10: mean 0 and variance 2(Δ1/ε)² around the clean
	// encoding (10,260 values).
	enc := l.q("WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < 20) " +
		"SELECT d2.id, LDP_ENCODE(d2.features, 10, 'ta') FROM d2, k")
	clean, err := m.Encode(rows[398:])
	if err != nil {
		t.Fatal(err)
	}
	checkReleaseNoise(t, enc, clean, 399, 2*math.Pow(m.Delta1/10, 2))
	lat := []float32{0.5, -1, 0.25}
	got := blobVector(t, l.q("SELECT LDP_DECODE(LDP_VECTOR(0.5, -1, 0.25), 'ta')")[0][0])
	if wantDec, _ := m.Decode([][]float32{lat}); fmt.Sprint(got) != fmt.Sprint(wantDec[0]) {
		t.Fatalf("LDP_DECODE %v, the trained decoder %v", got, wantDec[0])
	}

	// The classifier learns from the 398 training rows' releases and is scored on the 171 held-out clean
	// rows: 12 runs gave 0.877–0.942 (mean 0.91). Trained on the 171 rows' releases instead, one fresh
	// noise draw in about 20 fell to 0.766, under the bound.
	l.q("CALL ldp_privatize('aux', 'features', 'label', 'aux_priv', 20, 0.5, 'ta', 'laplace', 2)")
	cid := toInt64(t, l.q("SELECT TRAIN_NOISY_CLASSIFIER('aux_priv', '{\"model\": \"clf\", \"objective\": \"marginal\", \"aux_table\": \"aux\", \"seed\": 1}')")[0][0])
	if job, err := l.e.Jobs.Wait(ctx, cid); err != nil || job.State != "succeeded" {
		t.Fatalf("classifier job %d: %s %s %v", cid, job.State, job.Error, err)
	}
	acc := toFloat(t, l.q("SELECT AVG(PREDICT('clf', features) = label) FROM d2")[0][0])
	major := toFloat(t, l.q("SELECT GREATEST(AVG(label), 1 - AVG(label)) FROM d2")[0][0])
	t.Logf("Δ1 %.3f; classifier on the ldp_privatize'd training rows (ε = 20): accuracy %.3f on the held-out clean rows (majority class %.3f)", m.Delta1, acc, major)
	if !(acc > major+0.05) {
		t.Errorf("accuracy %.3f, majority class %.3f", acc, major)
	}
}

// checkReleaseNoise checks LDP_ENCODE releases against the clean encodings: rows of (id, release), id
// firstID the first clean row; every release has len(clean[0]) values, and the noise e around the clean
// encoding is Laplace with variance want per value. Over n values its mean has standard error
// sqrt(want/n) and, as a Laplace's E[e⁴] = 6·want², its mean square has standard error want·sqrt(5/n);
// both are held to 6 standard errors (two-sided normal tail 2·10⁻⁹ each).
func checkReleaseNoise(t *testing.T, rows []sql.Row, clean [][]float32, firstID int64, want float64) {
	t.Helper()
	var sum, sumSq float64
	for _, r := range rows {
		z := blobVector(t, r[1])
		c := clean[toInt64(t, r[0])-firstID]
		if len(z) != len(c) {
			t.Fatalf("a release of %d values, the encoder gives %d", len(z), len(c))
		}
		for k, v := range z {
			e := float64(v) - float64(c[k])
			sum += e
			sumSq += e * e
		}
	}
	n := float64(len(rows) * len(clean[0]))
	mean, ms := sum/n, sumSq/n
	zMean, zVar := mean/math.Sqrt(want/n), (ms-want)/(want*math.Sqrt(5/n))
	t.Logf("release noise over %.0f values: mean %.4g, mean square %.4g, want %.4g (z %.2f and %.2f)", n, mean, ms, want, zMean, zVar)
	if math.Abs(zMean) > 6 || math.Abs(zVar) > 6 {
		t.Fatalf("release noise: mean %v, mean square %v (z %.2f and %.2f); want 0 and %v", mean, ms, zMean, zVar, want)
	}
}
