package udf_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ldpsql/ldpsql/training/clm"
)

// The CLM end to end in SQL on min-max WDBC: trained as a job on the first 398 rows with tabular views
// and the Table B.1 training noise chosen from eps_target; the declared output set is the ℓ1 ball of
// radius l; LDP_ENCODE adds Laplace noise of scale 2l/ε around the artifact's own encoding; LDP_DECODE
// is a clear error (a CLM has no decoder); ldp_privatize and TRAIN_NOISY_CLASSIFIER work on it.
func TestCLMTrainedEndToEnd(t *testing.T) {
	l := newLedgerEngine(t, buildPlugins(t, "clm"))
	rows := fillWDBCMinMax(l)
	l.q("CREATE TABLE aux AS SELECT * FROM wdbc WHERE id <= 398")
	l.q("CREATE TABLE d2 AS SELECT * FROM wdbc WHERE id > 398")

	_, err := l.as("root", `CALL ldp_train_mechanism('bad', 'clm', 'aux', 'features', '{"tau": -1}')`)
	wantErr(t, err, "tau")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bad := toInt64(t, l.q(`CALL ldp_train_mechanism('bad', 'clm', 'aux', 'features', '{"image_shape": [5, 5]}')`)[0][0])
	if job, _ := l.e.Jobs.Wait(ctx, bad); job.State != "failed" || !strings.Contains(job.Error, "image_shape [5 5 1] holds 25 values; the rows have 30 features") {
		t.Fatalf("an image shape of 25 values for 30 features: job %s, %q", job.State, job.Error)
	}

	id := toInt64(t, l.q(`CALL ldp_train_mechanism('c', 'clm', 'aux', 'features', '{"d": 8, "l": 5, "epochs": 40, "batch_size": 64, "eps_target": 2.8}')`)[0][0])
	if job, err := l.e.Jobs.Wait(ctx, id); err != nil || job.State != "succeeded" {
		t.Fatalf("job %d: %s %s %v", id, job.State, job.Error, err)
	}
	var art []byte
	var params string
	if err := l.e.DuckDB.QueryRow("SELECT artifact, params FROM ldpsql_catalog.ldp_models WHERE name = 'c'").Scan(&art, &params); err != nil {
		t.Fatal(err)
	}
	m, err := clm.Load(art)
	if err != nil {
		t.Fatal(err)
	}
	// eps_target 2.8 is total ε 4: Table B.1 trains with eps_pretrain 30.
	if m.Config().EpsPretrain != 30 || !strings.Contains(params, `"eps_pretrain":30`) || m.N != 398 {
		t.Fatalf("eps_pretrain %v (params %s), trained on %d rows; want 30 recorded, 398", m.Config().EpsPretrain, params, m.N)
	}
	var desc string
	if err := l.e.DuckDB.QueryRow("SELECT description FROM ldpsql_catalog.ldp_mechanisms WHERE name = 'c'").Scan(&desc); err != nil {
		t.Fatal(err)
	}
	var d struct {
		InputDim, OutputDim int
		HasDecoder          bool
		OutputSet           struct{ Radius float64 }
	}
	if err := json.Unmarshal([]byte(desc), &d); err != nil {
		t.Fatal(err)
	}
	if d.InputDim != 30 || d.OutputDim != 8 || d.OutputSet.Radius != 5 || d.HasDecoder {
		t.Fatalf("recorded description %s", desc)
	}

	// Twenty releases of each of the 171 rows at ε = 10: mean 0 and variance 2(2l/ε)² = 2 around the
	// clean encoding (27,360 values).
	enc := l.q("WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < 20) " +
		"SELECT d2.id, LDP_ENCODE(d2.features, 10, 'c') FROM d2, k")
	clean, err := m.Encode(rows[398:])
	if err != nil {
		t.Fatal(err)
	}
	checkReleaseNoise(t, enc, clean, 399, 2)
	_, err = l.as("root", "SELECT LDP_DECODE(LDP_VECTOR(0, 0, 0, 0, 0, 0, 0, 0), 'c')")
	wantErr(t, err, "no decoder")

	l.q("CALL ldp_privatize('d2', 'features', 'label', 'd2_priv', 20, 0.5, 'c', 'laplace', 2)")
	cid := toInt64(t, l.q("SELECT TRAIN_NOISY_CLASSIFIER('d2_priv', '{\"model\": \"clf\", \"objective\": \"marginal\", \"aux_table\": \"aux\", \"seed\": 1}')")[0][0])
	if job, err := l.e.Jobs.Wait(ctx, cid); err != nil || job.State != "succeeded" {
		t.Fatalf("classifier job %d: %s %s %v", cid, job.State, job.Error, err)
	}
	acc := toFloat(t, l.q("SELECT AVG(PREDICT('clf', features) = label) FROM d2")[0][0])
	major := toFloat(t, l.q("SELECT GREATEST(AVG(label), 1 - AVG(label)) FROM d2")[0][0])
	t.Logf("classifier trained on the CLM's ldp_privatize'd rows at ε 20: accuracy %.3f on the clean rows (majority class %.3f)", acc, major)
	if !(acc > major+0.05) {
		t.Errorf("accuracy %.3f, majority class %.3f", acc, major)
	}
}
