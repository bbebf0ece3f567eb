package udf

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"

	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/training/diagnostics"
)

// Mechanism diagnostics (package training/diagnostics): how good an encoder is and what survives its
// privatisation at ε, computed on the DBA's auxiliary rows and never released, so they cost no
// privacy budget. They run after every ldp_fit_mechanism and ldp_train_mechanism job, and on demand
// with CALL ldp_evaluate_mechanism('name', 'aux_table', 'features_col', eps [, K]); the last result is
// stored under "diagnostics" in the model's ldp_models.params.

// DefaultDiagnosticsEps is the ε at which a fit or training job evaluates its mechanism when its params
// give no "eps_target".
const DefaultDiagnosticsEps = 4.0

// diagOptions are the diagnostics' settings in a fit or training job's params.
type diagOptions struct {
	eps      float64 // "eps_target"
	epsGiven bool    // whether the params gave eps_target (else eps is DefaultDiagnosticsEps)
	k        int     // "k_target": classes for the accuracy bound (0: diagnostics.DefaultK)
}

// Keys of a fit or training job's params that are the diagnostics', not the plugin's.
const (
	paramEpsTarget = "eps_target"
	paramKTarget   = "k_target"
)

// splitDiagnosticParams takes "eps_target" and "k_target" out of params (a JSON object), returning the
// rest for the plugin or trainer (unchanged when neither is present) and the diagnostics' options.
func splitDiagnosticParams(fn, params string) (json.RawMessage, diagOptions, error) {
	opts := diagOptions{eps: DefaultDiagnosticsEps}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(params), &obj); err != nil || obj == nil {
		return json.RawMessage(params), opts, nil // the plugin or trainer reports what is wrong
	}
	rawEps, hasEps := obj[paramEpsTarget]
	rawK, hasK := obj[paramKTarget]
	if !hasEps && !hasK {
		return json.RawMessage(params), opts, nil
	}
	if hasEps {
		if err := json.Unmarshal(rawEps, &opts.eps); err != nil || math.IsNaN(opts.eps) || !(opts.eps >= mechanisms.MinEpsilon && opts.eps <= mechanisms.MaxEpsilon) {
			return nil, opts, fmt.Errorf("%s: params: %s = %s must be a number in [%g, %g] (the eps the diagnostics evaluate the mechanism at)",
				fn, paramEpsTarget, rawEps, mechanisms.MinEpsilon, mechanisms.MaxEpsilon)
		}
		opts.epsGiven = true
		delete(obj, paramEpsTarget)
	}
	if hasK {
		if err := json.Unmarshal(rawK, &opts.k); err != nil || opts.k < 2 || opts.k > 1<<20 {
			return nil, opts, fmt.Errorf("%s: params: %s = %s must be an integer ≥ 2 (the classes of the diagnostics' accuracy bound)", fn, paramKTarget, rawK)
		}
		delete(obj, paramKTarget)
	}
	rest, err := json.Marshal(obj)
	return rest, opts, err
}

// evaluateSchema is ldp_evaluate_mechanism's result: one row per metric.
var evaluateSchema = sql.Schema{
	{Name: "mechanism", Type: types.LongText},
	{Name: "metric", Type: types.LongText},
	{Name: "value", Type: types.Float64, Nullable: true},
	{Name: "note", Type: types.LongText},
}

func (p *procedures) diagnosticsDetails() []sql.ExternalStoredProcedureDetails {
	return []sql.ExternalStoredProcedureDetails{
		{Name: "ldp_evaluate_mechanism", Schema: evaluateSchema, AdminOnly: true, Function: p.evaluate},
		{Name: "ldp_evaluate_mechanism", Schema: evaluateSchema, AdminOnly: true, Function: p.evaluateK},
	}
}

// evaluate is CALL ldp_evaluate_mechanism('name', 'aux_table', 'features_col', eps).
func (p *procedures) evaluate(ctx *sql.Context, name, table, col string, eps float64) (sql.RowIter, error) {
	return p.evaluateK(ctx, name, table, col, eps, 0)
}

// evaluateK is CALL ldp_evaluate_mechanism('name', 'aux_table', 'features_col', eps, K): K is the number
// of classes of the accuracy bound.
func (p *procedures) evaluateK(ctx *sql.Context, name, table, col string, eps float64, k int64) (sql.RowIter, error) {
	const fn = "ldp_evaluate_mechanism"
	if math.IsNaN(eps) || !(eps >= mechanisms.MinEpsilon && eps <= mechanisms.MaxEpsilon) {
		return nil, fmt.Errorf("%s: eps = %v must be a number in [%g, %g]", fn, eps, mechanisms.MinEpsilon, mechanisms.MaxEpsilon)
	}
	if k != 0 && (k < 2 || k > 1<<20) {
		return nil, fmt.Errorf("%s: K = %d must be an integer ≥ 2", fn, k)
	}
	if _, err := p.mechs.resolve(ctx, name); err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	sample, seen, err := p.sampleTable(ctx, fn, table, col)
	if err != nil {
		return nil, err
	}
	rep, err := p.diagnose(ctx, fn, name, sample, table, col, diagOptions{eps: eps, k: int(k)})
	if err != nil {
		return nil, err
	}
	return sql.RowsToRowIter(diagnosticRows(name, rep, seen)...), nil
}

// sampleTable reads a features column into a seeded reservoir sample of at most diagnostics.MaxSample
// rows; seen is the number of non-NULL rows read.
func (p *procedures) sampleTable(ctx *sql.Context, fn, table, col string) ([][]float32, int, error) {
	r, err := p.newVectorReader(ctx, fn, table, col)
	if err != nil {
		return nil, 0, err
	}
	defer r.close()
	res := diagnostics.NewReservoir(diagnostics.MaxSample, diagnostics.DefaultSeed)
	for {
		batch, err := r.next()
		if err == io.EOF {
			return res.Rows(), res.Seen(), nil
		}
		if err != nil {
			return nil, 0, err
		}
		for _, v := range batch {
			res.Add(v)
		}
	}
}

// sampleRows is sampleTable for rows in memory.
func sampleRows(rows [][]float32) [][]float32 {
	res := diagnostics.NewReservoir(diagnostics.MaxSample, diagnostics.DefaultSeed)
	for _, v := range rows {
		res.Add(v)
	}
	return res.Rows()
}

// diagnose evaluates mechanism name on sample, stores the report in its model's params (when it has a
// model) and logs its warnings.
func (p *procedures) diagnose(ctx context.Context, fn, name string, sample [][]float32, table, col string, opts diagOptions) (*diagnostics.Report, error) {
	mech, err := p.mechs.resolve(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	if len(sample) > 0 && len(sample[0]) != mech.desc.InputDim {
		return nil, fmt.Errorf("%s: %s.%s has %d features, mechanism %q expects %d", fn, table, col, len(sample[0]), name, mech.desc.InputDim)
	}
	codec := diagnostics.Codec{Encode: mech.encode}
	if mech.desc.HasDecoder {
		codec.Decode = func(ctx context.Context, latents [][]float32) ([][]float32, error) {
			out, err := mech.plugin.Decode(ctx, latents)
			if err != nil {
				return nil, fmt.Errorf("mechanism %q: %w", name, err)
			}
			return out, nil
		}
	}
	rep, err := diagnostics.Evaluate(ctx, sample, codec, diagnostics.Config{Set: mech.set, Eps: opts.eps, K: opts.k})
	if err != nil {
		return nil, fmt.Errorf("%s: mechanism %q: %w", fn, name, err)
	}
	rep.Table, rep.Column = table, col
	if mech.record.Model != "" {
		if err := p.storeDiagnostics(ctx, mech.record.Model, rep); err != nil {
			return nil, fmt.Errorf("%s: storing the diagnostics of %q: %w", fn, name, err)
		}
	}
	if len(rep.Warnings) > 0 {
		p.log("%s: mechanism %q at eps = %g on %s: WARNING: %s", fn, name, opts.eps, table, strings.Join(rep.Warnings, "; "))
	}
	return rep, nil
}

// storeDiagnostics records rep under "diagnostics" in the model's params, keeping the other keys.
func (p *procedures) storeDiagnostics(ctx context.Context, model string, rep *diagnostics.Report) error {
	m, err := p.mechs.catalog.Model(ctx, model)
	if err != nil {
		return err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(m.Params, &obj); err != nil || obj == nil {
		obj = map[string]json.RawMessage{}
		if len(m.Params) > 0 && string(m.Params) != "null" {
			obj["params"] = m.Params // not an object: kept whole
		}
	}
	raw, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	obj["diagnostics"] = raw
	params, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	return p.mechs.catalog.SetModelParams(ctx, model, params)
}

// diagnoseAfterFit runs the diagnostics at the end of ldp_fit_mechanism and ldp_train_mechanism. The
// mechanism is registered by then, so a failure is a warning, not an error; the returned warning
// (empty when all is well) is for the job's record.
func (p *procedures) diagnoseAfterFit(ctx context.Context, fn, name string, sample [][]float32, table, col string, opts diagOptions) string {
	rep, err := p.diagnose(ctx, fn, name, sample, table, col, opts)
	if err != nil {
		p.log("%s: mechanism %q is registered, but its diagnostics failed: %v", fn, name, err)
		return "diagnostics failed: " + err.Error()
	}
	return strings.Join(rep.Warnings, "; ")
}

// diagnosticRows renders a report as ldp_evaluate_mechanism's rows.
func diagnosticRows(name string, rep *diagnostics.Report, seen int) []sql.Row {
	var rows []sql.Row
	add := func(metric string, value *float64, note string) {
		var v any
		if value != nil {
			v = *value
		}
		rows = append(rows, sql.Row{name, metric, v, note})
	}
	f := func(x float64) *float64 { return &x }
	position := "‖z‖₁/l: 0 the centre, 1 the boundary"
	noise := "per coordinate, of the " + rep.Randomiser + " noise at eps"
	if strings.HasPrefix(rep.OutputSet, "box") {
		position = "mean over coordinates of |z − mid|/half-width: 0 the centre, 1 a corner"
	}
	if rep.Randomiser == mechanisms.RandomiserLaplace {
		if strings.HasPrefix(rep.OutputSet, "box") {
			noise = "mean over coordinates of 2(d·(hi−lo)/eps)², the Laplace noise at eps"
		} else {
			noise = "2(2l/eps)² per coordinate, the Laplace noise at eps"
		}
	}
	add("eps", f(rep.Eps), fmt.Sprintf("%s randomiser; diagnostics cost no privacy budget (nothing is released)", rep.Randomiser))
	add("rows", f(float64(rep.Rows)), fmt.Sprintf("rows of %s.%s evaluated (a seeded sample of at most %d of its %d); %d held out",
		rep.Table, rep.Column, diagnostics.MaxSample, seen, rep.HoldoutRows))
	add("clipped_share", f(rep.ClippedShare), "share of encodings on or outside the boundary of the output set")
	add("norm_q10", f(rep.NormQ10), "10% quantile of the position in the set, "+position)
	add("norm_q50", f(rep.NormQ50), "median position in the set")
	add("norm_q90", f(rep.NormQ90), "90% quantile of the position in the set")
	add("d", f(float64(rep.D)), "latent dimensions; output set "+rep.OutputSet)
	add("active_dims", f(float64(rep.ActiveDims)), fmt.Sprintf("dimensions whose variance is at least %g of the largest's", diagnostics.ActiveRelative))
	add("active_dims_at_eps", f(float64(rep.ActiveDimsAtEps)), fmt.Sprintf("dimensions whose variance is at least %g of the noise variance at eps", diagnostics.ActiveVsNoise))
	add("latent_var_max", f(maxOf(rep.LatentVariance)), "per dimension: "+formatList(rep.LatentVariance))
	add("latent_var_min", f(minOf(rep.LatentVariance)), "")
	add("noise_var", f(meanOf(rep.NoiseVariance)), noise)
	na := rep.ReconstructionNote
	add("mse_mean", rep.MSEMean, or(na, "held-out rows: squared error per feature of the mean of the other rows"))
	add("mse_clean", rep.MSEClean, or(na, "held-out rows: decode(encode(x)), no noise"))
	add("mse_private", rep.MSEPrivate, or(na, fmt.Sprintf("held-out rows: decode(release at eps), %d releases of each", rep.DrawsPerRow)))
	add("private_vs_mean", rep.PrivateVsMean, or(na, fmt.Sprintf("mse_private / mse_mean; above %g: the release is hardly better than the mean", 1-diagnostics.ExplainedMin)))
	add("accuracy_bound", rep.AccuracyBound, rep.AccuracyBoundNote)
	collapsed := 0.0
	if rep.Collapsed {
		collapsed = 1
	}
	add("collapsed", &collapsed, or(strings.Join(rep.Warnings, "; "), "no"))
	add("notes", f(float64(len(rep.Notes))), strings.Join(rep.Notes, "; "))
	return rows
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func formatList(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.3g", x)
	}
	return strings.Join(parts, ", ")
}

func maxOf(xs []float64) float64 {
	m := math.Inf(-1)
	for _, x := range xs {
		m = math.Max(m, x)
	}
	return m
}

func minOf(xs []float64) float64 {
	m := math.Inf(1)
	for _, x := range xs {
		m = math.Min(m, x)
	}
	return m
}

func meanOf(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
