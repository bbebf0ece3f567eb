package udf

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/training/classifier"
	"github.com/ldpsql/ldpsql/training/spread"

	"github.com/ldpsql/ldpsql/training/nn"
)

// Noise-aware classifiers. TRAIN_NOISY_CLASSIFIER('table', '{params}') starts a job (engine.Jobs) that
// trains a classifier on a privatised table with a likelihood that models how the table was noised,
// and stores it in ldp_models (plugin 'classifier'); PREDICT('model', features) applies it.
//
// Objectives (params "objective"):
//
//   - "marginal" (thesis Eq 4.11): the classifier sees only the clean latents of an auxiliary table
//     (params "aux_table"), encoded by the same mechanism without noise; each privatised row (z̃, ỹ)
//     is explained as a mixture over those latents, through the Laplace density of the privatisation
//     noise and the k-RR label channel. For an ℓ1-ball mechanism released with the Laplace randomiser.
//     The classifier is meant for clean points.
//   - "forward" (Eq 4.12): the classifier sees the releases themselves; only the label noise is
//     modelled (forward loss correction). Any mechanism and randomiser.
//   - "em": multinomial logistic regression fitted to the spread likelihood by importance-sampled EM
//     (Barber), modelling the per-coordinate Laplace noise of the features and the label noise.
//   - "clean": no privacy, for the ε = ∞ reference: the table holds raw features (encoded by the
//     mechanism without noise) and clean labels.
//
// The noise parameters (mechanism, randomiser, eps_x, eps_y, K, columns) come from the metadata that
// ldp_privatize records on the table; params may repeat them, and a value that contradicts the
// metadata is an error. The privatised rows are split (params "val_fraction", default 0.1; 0 for the
// em objective, which does not validate) into a training part and a validation part used for early
// stopping, and for choosing among restarts, on the same noisy likelihood, which spends no further
// privacy. "val_fraction": 0 trains on every row for the whole epoch budget and keeps the last model.

// ClassifierPlugin is the plugin column of a classifier in ldp_models.
const ClassifierPlugin = "classifier"

// classifierFormat versions classifierArtifact.
const classifierFormat = 1

// classifierArtifact is what ldp_models holds for a classifier: the model and how to feed it.
type classifierArtifact struct {
	Format    int    `json:"format"`
	Kind      string `json:"kind"` // "mlp" (training/classifier) or "spread" (training/spread)
	Objective string `json:"objective"`
	Mechanism string `json:"mechanism"`
	// InputDim and OutputDim are the mechanism's: the classifier reads OutputDim values (a clipped
	// encoding or a release); raw features of InputDim values are encoded first.
	InputDim  int    `json:"input_dim"`
	OutputDim int    `json:"output_dim"`
	K         int    `json:"K"`
	Model     []byte `json:"model"`
}

// trainParams are TRAIN_NOISY_CLASSIFIER's params once merged with the table's metadata.
type trainParams struct {
	Model          string   `json:"model"`
	Objective      string   `json:"objective"`
	Mechanism      string   `json:"mechanism"`
	Randomiser     string   `json:"randomiser,omitempty"`
	FeaturesCol    string   `json:"features_col"`
	LabelCol       string   `json:"label_col"`
	AuxTable       string   `json:"aux_table,omitempty"`
	AuxFeaturesCol string   `json:"aux_features_col,omitempty"`
	EpsX           *float64 `json:"eps_x,omitempty"`
	EpsY           *float64 `json:"eps_y,omitempty"`
	K              int      `json:"K"`
	// ValFraction is the share of rows held out for validation; nil: the default (0.1, or 0 for em).
	ValFraction *float64 `json:"val_fraction,omitempty"`
	// ValidationTable, when set, holds raw labelled rows (the validation group): after training, each
	// row's correctness bit is released by randomised response at EpsC and the debiased accuracy is
	// recorded with the model (thesis Sec 4.2.4). On a protected table every bit is charged to its unit.
	ValidationTable string  `json:"validation_table,omitempty"`
	EpsC            float64 `json:"eps_c,omitempty"`
	// TrainingStats describes the run (training/classifier.TrainStats: epochs run, the best epoch, the
	// resolved epochs, patience and restarts), recorded in ldp_models.params; mlp models only.
	TrainingStats *classifier.TrainStats `json:"training_stats,omitempty"`
	// PrivateAccuracy is the result, recorded in ldp_models.params.
	PrivateAccuracy *float64 `json:"private_accuracy,omitempty"`
	Seed            uint64   `json:"seed"`
	Replace         bool     `json:"replace,omitempty"`
	// Training is what the chosen trainer parses (hidden, epochs, lr, ... for mlp; samples, iterations,
	// ... for em).
	Training json.RawMessage `json:"training,omitempty"`
}

// classifiers carries TRAIN_NOISY_CLASSIFIER's and PREDICT's state.
type classifiers struct {
	p *procedures

	mu         sync.Mutex
	loaded     map[string]*loadedClassifier // by model name
	candidates map[string]*loadedClassifier // models in training, by temporary name, for private validation
}

type loadedClassifier struct {
	checksum string
	art      classifierArtifact
	mlp      *classifier.Model
	spread   *spread.Model
}

func newClassifiers(p *procedures) *classifiers {
	return &classifiers{p: p, loaded: map[string]*loadedClassifier{}, candidates: map[string]*loadedClassifier{}}
}

// TrainNoisyClassifier is TRAIN_NOISY_CLASSIFIER('table', '{params}'): it checks the request, starts the
// training job and returns its id. TRAIN_NOISY_CLASSIFIER('table') chooses the params from the table's
// ldp_privatize metadata (shortTrainParams).
type TrainNoisyClassifier struct {
	scalar
	c *classifiers
}

var _ sql.FunctionExpression = (*TrainNoisyClassifier)(nil)

func (c *classifiers) newTrain(_ *sql.Context, args ...sql.Expression) (sql.Expression, error) {
	if len(args) != 1 && len(args) != 2 {
		return nil, arityError("train_noisy_classifier", "1 or 2", len(args))
	}
	return &TrainNoisyClassifier{scalar: scalar{name: "train_noisy_classifier", args: args}, c: c}, nil
}

// Description implements sql.FunctionExpression.
func (f *TrainNoisyClassifier) Description() string {
	return "starts a job training a classifier on a privatised table with a likelihood that models its noise; returns the job id"
}

// Type implements sql.Expression.
func (f *TrainNoisyClassifier) Type(*sql.Context) sql.Type { return types.Int64 }

// WithChildren implements sql.Expression.
func (f *TrainNoisyClassifier) WithChildren(ctx *sql.Context, children ...sql.Expression) (sql.Expression, error) {
	return f.c.newTrain(ctx, children...)
}

// Eval implements sql.Expression.
func (f *TrainNoisyClassifier) Eval(ctx *sql.Context, row sql.Row) (any, error) {
	const fn = "TRAIN_NOISY_CLASSIFIER"
	vals, err := evalArgs(ctx, row, f.args)
	if err != nil {
		return nil, err
	}
	if hasNull(vals) {
		return nil, fmt.Errorf("%s: the table and the params must not be NULL", fn)
	}
	if len(vals) == 1 { // the short form: params from the table's metadata (short_forms.go)
		table := fmt.Sprint(vals[0])
		params, err := f.c.shortTrainParams(ctx, table)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fn, err)
		}
		return f.c.start(ctx, table, params)
	}
	table, params := fmt.Sprint(vals[0]), fmt.Sprint(vals[1])
	if js, ok := vals[1].(sql.JSONWrapper); ok {
		if params, err = types.JsonToMySqlString(ctx, js); err != nil {
			return nil, err
		}
	}
	return f.c.start(ctx, table, params)
}

// start validates the request as the caller, then runs the training as a job.
func (c *classifiers) start(ctx *sql.Context, table, rawParams string) (int64, error) {
	const fn = "TRAIN_NOISY_CLASSIFIER"
	tp, err := c.resolveParams(ctx, table, rawParams)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", fn, err)
	}
	// Everything that can be checked before the job starts is: the trainer's own params too.
	if _, err := c.trainerConfig(tp); err != nil {
		return 0, fmt.Errorf("%s: params: %w", fn, err)
	}
	resolved, _ := json.Marshal(tp)
	caller := ctx.Session.Client()
	db := ctx.GetCurrentDatabase()
	createdBy := user(ctx)
	id, err := c.p.e.Jobs.Start("train classifier", tp.Model, resolved, createdBy, func(jctx context.Context, report func(engine.JobProgress)) error {
		session := sql.NewBaseSessionWithClientServer("job", caller, 0)
		session.SetCurrentDatabase(db)
		sctx := sql.NewContext(jctx, sql.WithSession(session))
		return c.train(sctx, table, tp, createdBy, report)
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", fn, err)
	}
	return id, nil
}

// knownTrainKeys are TRAIN_NOISY_CLASSIFIER's own params; every other key goes to the trainer.
var knownTrainKeys = map[string]bool{"model": true, "objective": true, "mechanism": true, "randomiser": true,
	"features_col": true, "label_col": true, "aux_table": true, "aux_features_col": true, "eps_x": true,
	"eps_y": true, "K": true, "val_fraction": true, "replace": true, "validation_table": true, "eps_c": true}

// resolveParams parses params, merges them with the table's ldp_privatize metadata and checks them.
func (c *classifiers) resolveParams(ctx *sql.Context, table, rawParams string) (trainParams, error) {
	var tp trainParams
	if err := decodeTrainParams(&tp, rawParams); err != nil {
		return tp, err
	}
	dbName, name := splitTable(ctx, table)
	t, err := c.p.table(ctx, dbName, name)
	if err != nil {
		return tp, err
	}
	if err := resolveObjective(&tp, table, privatizeMetadataOf(t)); err != nil {
		return tp, err
	}
	if err := checkTrainPrivacy(&tp); err != nil {
		return tp, err
	}
	if err := c.checkModelName(ctx, &tp, name); err != nil {
		return tp, err
	}
	return tp, c.checkObjectiveInputs(ctx, &tp, table)
}

// decodeTrainParams parses TRAIN_NOISY_CLASSIFIER's own params into tp (strictly: JSON objects), and
// keeps every other key, with the seed, for the trainer.
func decodeTrainParams(tp *trainParams, rawParams string) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(rawParams), &raw); err != nil {
		return fmt.Errorf("params must be a JSON object: %v", err)
	}
	own, rest := map[string]json.RawMessage{}, map[string]json.RawMessage{}
	for k, v := range raw {
		if knownTrainKeys[k] {
			own[k] = v
		} else {
			rest[k] = v
		}
	}
	ownJSON, _ := json.Marshal(own)
	dec := json.NewDecoder(strings.NewReader(string(ownJSON)))
	if err := dec.Decode(tp); err != nil {
		return fmt.Errorf("params: %v", err)
	}
	if s, ok := rest["seed"]; ok {
		if err := json.Unmarshal(s, &tp.Seed); err != nil {
			return fmt.Errorf("params: seed must be a non-negative integer, got %s", s)
		}
	}
	if len(rest) > 0 {
		tp.Training, _ = json.Marshal(rest)
	}
	return nil
}

// resolveObjective chooses the objective (marginal with an aux_table, else forward) and completes tp from
// the table's ldp_privatize metadata meta (nil: none), refusing contradictions; without metadata params
// must say how the table was noised.
func resolveObjective(tp *trainParams, table string, meta *PrivatizeMetadata) error {
	if tp.Objective == "" {
		tp.Objective = "marginal"
		if tp.AuxTable == "" {
			tp.Objective = "forward"
		}
	}
	switch tp.Objective {
	case "marginal", "forward", "em", "clean":
	default:
		return fmt.Errorf("objective %q is not one of marginal, forward, em, clean", tp.Objective)
	}
	if meta != nil {
		if tp.Objective == "clean" {
			return fmt.Errorf("table %s was privatised by ldp_privatize; objective 'clean' is for raw tables", table)
		}
		if err := mergeMeta(tp, meta); err != nil {
			return fmt.Errorf("%w (table %s was privatised by ldp_privatize with %s)", err, table, describeMeta(meta))
		}
	} else if tp.Objective != "clean" {
		if tp.Mechanism == "" || tp.EpsX == nil || tp.EpsY == nil || tp.K == 0 || tp.FeaturesCol == "" || tp.LabelCol == "" {
			return fmt.Errorf("table %s has no ldp_privatize metadata, so params must give mechanism, randomiser, eps_x, eps_y, K, features_col and label_col", table)
		}
	}
	if tp.Objective == "clean" {
		if tp.Mechanism == "" || tp.FeaturesCol == "" || tp.LabelCol == "" || tp.K == 0 {
			return errors.New("objective 'clean' needs mechanism, features_col, label_col and K")
		}
		if tp.EpsX != nil || tp.EpsY != nil {
			return errors.New("objective 'clean' trains on raw data: eps_x and eps_y do not apply")
		}
	}
	return nil
}

// checkTrainPrivacy checks the privacy parameters (K, eps_x, eps_y, eps_c) and fills in the defaults of
// randomiser and val_fraction.
func checkTrainPrivacy(tp *trainParams) error {
	if tp.Randomiser == "" {
		tp.Randomiser = mechanisms.RandomiserLaplace
	}
	if tp.K < 2 {
		return fmt.Errorf("K = %d must be at least 2", tp.K)
	}
	for _, e := range []*float64{tp.EpsX, tp.EpsY} {
		if e != nil && (math.IsNaN(*e) || *e <= 0) {
			return fmt.Errorf("eps_x and eps_y must be > 0, got %v", *e)
		}
	}
	if tp.ValFraction == nil {
		def := 0.1
		if tp.Objective == "em" {
			def = 0 // it does not validate: train on every row
		}
		tp.ValFraction = &def
	}
	if f := *tp.ValFraction; !(f >= 0 && f < 0.5) {
		return fmt.Errorf("val_fraction = %v must be in [0, 0.5) (0: no validation split, the whole epoch budget and the last model)", f)
	}
	if tp.ValidationTable != "" {
		if tp.EpsC == 0 {
			tp.EpsC = 1
		}
		if math.IsNaN(tp.EpsC) || tp.EpsC <= 0 || tp.EpsC > mechanisms.MaxEpsilon {
			return fmt.Errorf("eps_c = %v must be in (0, %v]", tp.EpsC, mechanisms.MaxEpsilon)
		}
	} else if tp.EpsC != 0 {
		return errors.New("eps_c is the privacy of the validation bits: it needs validation_table")
	}
	return nil
}

// checkModelName names the model (by default after the table) and refuses a name taken by a mechanism
// model, or by a classifier unless params say replace.
func (c *classifiers) checkModelName(ctx *sql.Context, tp *trainParams, name string) error {
	if tp.Model == "" {
		tp.Model = name + "_classifier"
	}
	if err := checkName("model", tp.Model); err != nil {
		return err
	}
	if existing, err := c.p.e.Catalog.Model(ctx, tp.Model); err == nil {
		if existing.Plugin != ClassifierPlugin {
			return fmt.Errorf("model name %q is taken by a %s mechanism model", tp.Model, existing.Plugin)
		}
		if !tp.Replace {
			return fmt.Errorf("a classifier called %q exists; choose another \"model\" or set \"replace\": true", tp.Model)
		}
	}
	return nil
}

// checkObjectiveInputs checks that the objective fits the mechanism and randomiser, and that its tables
// and columns can be read.
func (c *classifiers) checkObjectiveInputs(ctx *sql.Context, tp *trainParams, table string) error {
	mech, err := c.p.mechs.resolve(ctx, tp.Mechanism)
	if err != nil {
		return err
	}
	set, err := outputSet(mech.desc)
	if err != nil {
		return err
	}
	switch tp.Objective {
	case "marginal":
		if _, ok := set.(mechanisms.L1Ball); !ok || tp.Randomiser != mechanisms.RandomiserLaplace {
			return fmt.Errorf("objective 'marginal' models Laplace noise on an l1-ball mechanism; %q with randomiser %q is not one (use 'forward')", tp.Mechanism, tp.Randomiser)
		}
		if tp.AuxTable == "" {
			return errors.New("objective 'marginal' needs aux_table: the clean auxiliary rows whose latents form the prior")
		}
		if tp.AuxFeaturesCol == "" {
			tp.AuxFeaturesCol = tp.FeaturesCol
		}
		if err := c.p.exec(ctx, fmt.Sprintf("SELECT %s FROM %s LIMIT 1", quoteCol(tp.AuxFeaturesCol), quoteTable(tp.AuxTable))); err != nil {
			return fmt.Errorf("reading aux_table %s.%s: %w", tp.AuxTable, tp.AuxFeaturesCol, err)
		}
	case "em":
		if _, err := emChannels(set, tp.Randomiser, 1); err != nil {
			return err
		}
		if tp.AuxTable != "" {
			return errors.New("aux_table is only used by objective 'marginal'")
		}
	default:
		if tp.AuxTable != "" {
			return errors.New("aux_table is only used by objective 'marginal'")
		}
	}
	if err := c.p.exec(ctx, fmt.Sprintf("SELECT %s, %s FROM %s LIMIT 1", quoteCol(tp.FeaturesCol), quoteCol(tp.LabelCol), quoteTable(table))); err != nil {
		return fmt.Errorf("reading %s: %w", table, err)
	}
	return nil
}

// mergeMeta fills tp from the table's metadata, refusing contradictions.
func mergeMeta(tp *trainParams, m *PrivatizeMetadata) error {
	if m.LabelCol == "" {
		return errors.New("the table has no privatised label to learn from")
	}
	str := func(name string, have *string, want string) error {
		if *have == "" {
			*have = want
		} else if *have != want {
			return fmt.Errorf("params say %s = %q but the table's is %q", name, *have, want)
		}
		return nil
	}
	num := func(name string, have **float64, want float64) error {
		if *have == nil {
			*have = &want
		} else if math.Abs(**have-want) > 1e-9*math.Max(1, want) {
			return fmt.Errorf("params say %s = %v but the table's is %v", name, **have, want)
		}
		return nil
	}
	for _, err := range []error{
		str("mechanism", &tp.Mechanism, m.Mechanism),
		str("randomiser", &tp.Randomiser, m.Randomiser),
		str("features_col", &tp.FeaturesCol, m.FeaturesCol),
		str("label_col", &tp.LabelCol, m.LabelCol),
		num("eps_x", &tp.EpsX, m.EpsX),
		num("eps_y", &tp.EpsY, m.EpsY),
	} {
		if err != nil {
			return err
		}
	}
	if tp.K == 0 {
		tp.K = m.K
	} else if tp.K != m.K {
		return fmt.Errorf("params say K = %d but the table's is %d", tp.K, m.K)
	}
	return nil
}

func describeMeta(m *PrivatizeMetadata) string {
	return fmt.Sprintf("mechanism %q, randomiser %q, eps_x = %g, eps_y = %g, K = %d", m.Mechanism, m.Randomiser, m.EpsX, m.EpsY, m.K)
}

// trainerConfig parses the trainer's own params.
func (c *classifiers) trainerConfig(tp trainParams) (any, error) {
	raw := tp.Training
	if len(raw) == 0 {
		raw = json.RawMessage(`{}`)
	}
	if tp.Objective == "em" {
		return spread.ParseConfig(raw)
	}
	return classifier.ParseConfig(raw)
}

// train is the job: read, split, train, store.
func (c *classifiers) train(ctx *sql.Context, table string, tp trainParams, createdBy string, report func(engine.JobProgress)) error {
	const fn = "TRAIN_NOISY_CLASSIFIER"
	mech, err := c.p.mechs.resolve(ctx, tp.Mechanism)
	if err != nil {
		return err
	}
	set, err := outputSet(mech.desc)
	if err != nil {
		return err
	}
	feats, labels, err := c.readTrainingRows(ctx, fn, table, tp, mech, set)
	if err != nil {
		return err
	}
	trainIdx, valIdx := splitRows(len(feats), *tp.ValFraction, tp.Seed)
	pick := func(idx []int) ([][]float32, []int) {
		x, y := make([][]float32, len(idx)), make([]int, len(idx))
		for k, i := range idx {
			x[k], y[k] = feats[i], labels[i]
		}
		return x, y
	}
	var d trainingSplit
	d.xTrain, d.yTrain = pick(trainIdx)
	d.xVal, d.yVal = pick(valIdx)
	art := classifierArtifact{Format: classifierFormat, Objective: tp.Objective, Mechanism: tp.Mechanism,
		InputDim: mech.desc.InputDim, OutputDim: mech.desc.OutputDim, K: tp.K}
	if err := c.fit(ctx, fn, table, &tp, mech, set, d, &art, report); err != nil {
		return err
	}
	return c.store(ctx, fn, table, tp, art, len(d.xTrain), createdBy)
}

// trainingSplit is the labelled rows of a training table, split into training and validation rows.
type trainingSplit struct {
	xTrain, xVal [][]float32
	yTrain, yVal []int
}

// readTrainingRows reads the training table's features (encoded and clipped where objective 'clean'
// trains on raw data) and labels, and checks their width and number.
func (c *classifiers) readTrainingRows(ctx *sql.Context, fn, table string, tp trainParams, mech *resolvedMechanism, set mechanisms.OutputSet) ([][]float32, []int, error) {
	feats, labels, err := c.readLabelled(ctx, fn, table, tp.FeaturesCol, tp.LabelCol, tp.K)
	if err != nil {
		return nil, nil, err
	}
	if tp.Objective == "clean" {
		if feats, err = encodeClipped(ctx, mech, set, feats); err != nil {
			return nil, nil, err
		}
	}
	for i, v := range feats {
		if len(v) != mech.desc.OutputDim {
			return nil, nil, fmt.Errorf("%s: row %d of %s has %d values; mechanism %q releases %d", fn, i+1, table, len(v), tp.Mechanism, mech.desc.OutputDim)
		}
	}
	if len(feats) < 10 {
		return nil, nil, fmt.Errorf("%s: %s has %d rows; at least 10 are needed to train and validate", fn, table, len(feats))
	}
	return feats, labels, nil
}

// fit trains the model of tp's objective on d and puts it into art (and the training statistics into
// tp).
func (c *classifiers) fit(ctx *sql.Context, fn, table string, tp *trainParams, mech *resolvedMechanism, set mechanisms.OutputSet, d trainingSplit,
	art *classifierArtifact, report func(engine.JobProgress)) error {
	cfgAny, err := c.trainerConfig(*tp)
	if err != nil {
		return err
	}
	progress := func(p nn.Progress) { report(jobProgress(p)) }
	var r [][]float64
	if tp.Objective == "clean" {
		r = classifier.KRRMatrix(math.Inf(1), tp.K)
	} else {
		r = classifier.KRRMatrix(*tp.EpsY, tp.K)
	}
	xTrain, yTrain, xVal, yVal := d.xTrain, d.yTrain, d.xVal, d.yVal
	c.p.log("%s: training %s (%s) on %d rows of %s, validating on %d", fn, tp.Model, tp.Objective, len(xTrain), table, len(xVal))
	switch tp.Objective {
	case "marginal":
		ball := set.(mechanisms.L1Ball)
		auxRaw, err := c.p.readVectors(ctx, fn, tp.AuxTable, tp.AuxFeaturesCol)
		if err != nil {
			return err
		}
		aux, err := encodeClipped(ctx, mech, set, auxRaw)
		if err != nil {
			return err
		}
		scale := 2 * ball.Radius / *tp.EpsX
		m, err := classifier.TrainMarginal(ctx, cfgAny.(classifier.Config),
			classifier.MarginalData{Aux: aux, Noisy: xTrain, Labels: yTrain, Scale: scale, R: r},
			classifier.MarginalData{Aux: aux, Noisy: xVal, Labels: yVal, Scale: scale, R: r}, progress)
		if err != nil {
			return err
		}
		art.Kind = "mlp"
		st := m.Stats()
		tp.TrainingStats = &st
		warnUninformative(report, st)
		if art.Model, err = m.MarshalBinary(); err != nil {
			return err
		}
	case "forward", "clean":
		m, err := classifier.TrainForward(ctx, cfgAny.(classifier.Config),
			classifier.ForwardData{X: xTrain, Labels: yTrain, R: r},
			classifier.ForwardData{X: xVal, Labels: yVal, R: r}, progress)
		if err != nil {
			return err
		}
		art.Kind = "mlp"
		st := m.Stats()
		tp.TrainingStats = &st
		warnUninformative(report, st)
		if art.Model, err = m.MarshalBinary(); err != nil {
			return err
		}
	case "em":
		channels, err := emChannels(set, tp.Randomiser, *tp.EpsX)
		if err != nil {
			return err
		}
		cfg := cfgAny.(spread.Config)
		m, err := spread.Train(ctx, cfg, spread.Data{X: toFloat64Rows(xTrain), Labels: yTrain, Channels: channels, R: r},
			progress)
		if err != nil {
			return err
		}
		art.Kind = "spread"
		if art.Model, err = m.MarshalBinary(); err != nil {
			return err
		}
	}
	return nil
}

// store validates the model privately (with a validation_table) and stores it in the catalog.
func (c *classifiers) store(ctx *sql.Context, fn, table string, tp trainParams, art classifierArtifact, trainingRows int, createdBy string) error {
	blob, err := json.Marshal(art)
	if err != nil {
		return err
	}
	if tp.ValidationTable != "" {
		acc, err := c.privateValidation(ctx, tp, art, blob)
		if err != nil {
			return fmt.Errorf("%s: private validation on %s: %w", fn, tp.ValidationTable, err)
		}
		tp.PrivateAccuracy = &acc
		c.p.log("%s: %s: private validation accuracy %.3f (eps_c = %g) on %s", fn, tp.Model, acc, tp.EpsC, tp.ValidationTable)
	}
	params, _ := json.Marshal(tp)
	sum := sha256.Sum256(blob)
	if err := c.p.e.Catalog.PutModel(ctx, engine.Model{Name: tp.Model, Plugin: ClassifierPlugin, Params: params, TrainingTable: table,
		TrainingRows: int64(trainingRows), Checksum: hex.EncodeToString(sum[:]), Artifact: blob, CreatedBy: createdBy, CreatedAt: time.Now()}); err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.loaded, tp.Model)
	c.mu.Unlock()
	return nil
}

// emChannels describes, as spread's per-feature channels, the noise the randomiser adds on set at
// epsX: per-coordinate Laplace noise (laplace), or randomised response on B bins of each coordinate
// of a box at epsX/D (rrB), with the sampler's realised flip probability.
func emChannels(set mechanisms.OutputSet, randomiser string, epsX float64) ([]spread.Channel, error) {
	if randomiser == mechanisms.RandomiserLaplace {
		return laplaceChannels(set, epsX)
	}
	bins, ok := mechanisms.ParseRRName(randomiser)
	box, isBox := set.(mechanisms.Box)
	if !ok || !isBox {
		return nil, fmt.Errorf("objective 'em' models per-coordinate noise: Laplace, or randomised response (rrB) on a box mechanism; "+
			"randomiser %q on a %T output set is not one (use 'forward')", randomiser, set)
	}
	rr, err := mechanisms.NewCoordinateRR(box, epsX, bins)
	if err != nil {
		return nil, err
	}
	ch := make([]spread.Channel, len(box.Lo))
	for i := range ch {
		ch[i] = spread.Channel{Kind: spread.KindRR, Lo: box.Lo[i], Hi: box.Hi[i], Bins: bins, FlipProb: rr.FlipProbability()}
	}
	return ch, nil
}

// laplaceChannels describes the per-coordinate Laplace noise the laplace randomiser adds on set.
func laplaceChannels(set mechanisms.OutputSet, epsX float64) ([]spread.Channel, error) {
	switch s := set.(type) {
	case mechanisms.L1Ball:
		ch := make([]spread.Channel, s.D)
		for i := range ch {
			ch[i] = spread.Channel{Kind: "laplace", Lo: -s.Radius, Hi: s.Radius, Scale: 2 * s.Radius / epsX}
		}
		return ch, nil
	case mechanisms.Box:
		d := float64(len(s.Lo))
		ch := make([]spread.Channel, len(s.Lo))
		for i := range ch {
			w := s.Hi[i] - s.Lo[i]
			if w == 0 {
				ch[i] = spread.Channel{Kind: "clean", Lo: s.Lo[i], Hi: s.Hi[i]}
				continue
			}
			ch[i] = spread.Channel{Kind: "laplace", Lo: s.Lo[i], Hi: s.Hi[i], Scale: w * d / epsX}
		}
		return ch, nil
	}
	return nil, fmt.Errorf("output set %T has no per-coordinate Laplace channel", set)
}

// splitRows shuffles 0..n-1 with seed and cuts off the validation fraction (none for 0).
func splitRows(n int, valFraction float64, seed uint64) (train, val []int) {
	perm := rand.New(rand.NewPCG(seed, 0x5eed)).Perm(n)
	nVal := 0
	if valFraction > 0 {
		nVal = max(1, int(math.Round(valFraction*float64(n))))
	}
	val, train = perm[:nVal], perm[nVal:]
	sort.Ints(val)
	sort.Ints(train)
	return train, val
}

// readLabelled reads (features, label) pairs; a NULL, a non-finite value or a label outside 0..K-1 is an
// error naming the row.
func (c *classifiers) readLabelled(ctx *sql.Context, fn, table, featuresCol, labelCol string, k int) ([][]float32, []int, error) {
	iter, err := c.p.query(ctx, fmt.Sprintf("SELECT %s, %s FROM %s", quoteCol(featuresCol), quoteCol(labelCol), quoteTable(table)))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: reading %s: %w", fn, table, err)
	}
	defer iter.Close(ctx)
	var feats [][]float32
	var labels []int
	for n := 1; ; n++ {
		row, err := iter.Next(ctx)
		if err == io.EOF {
			return feats, labels, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: reading %s: %w", fn, table, err)
		}
		if row[0] == nil || row[1] == nil {
			return nil, nil, fmt.Errorf("%s: row %d of %s has a NULL %s or %s", fn, n, table, featuresCol, labelCol)
		}
		v, err := toVector(ctx, fn, featuresCol, row[0])
		if err != nil {
			return nil, nil, err
		}
		if err := checkFinite(fn, featuresCol, v); err != nil {
			return nil, nil, fmt.Errorf("%w (row %d of %s)", err, n, table)
		}
		y, err := toInt(ctx, fn, labelCol, row[1])
		if err != nil {
			return nil, nil, err
		}
		if y < 0 || y >= int64(k) {
			return nil, nil, fmt.Errorf("%s: row %d of %s has label %d, outside 0..%d (K = %d)", fn, n, table, y, k-1, k)
		}
		feats = append(feats, v)
		labels = append(labels, int(y))
	}
}

// encodeClipped runs the mechanism's encoder on raw rows without noise and clips each encoding into the
// recorded output set, as the host does before randomising: the clean latent the classifiers see.
func encodeClipped(ctx context.Context, mech *resolvedMechanism, set mechanisms.OutputSet, rows [][]float32) ([][]float32, error) {
	out := make([][]float32, 0, len(rows))
	for start := 0; start < len(rows); start += BatchSize {
		batch := rows[start:min(start+BatchSize, len(rows))]
		for i, v := range batch {
			if len(v) != mech.desc.InputDim {
				return nil, fmt.Errorf("row %d has %d features, mechanism %q expects %d", start+i+1, len(v), mech.record.Name, mech.desc.InputDim)
			}
		}
		enc, err := mech.encode(ctx, batch)
		if err != nil {
			return nil, err
		}
		x := make([]float64, mech.desc.OutputDim)
		for _, z := range enc {
			if len(z) != len(x) {
				return nil, fmt.Errorf("mechanism %q returned an encoding of %d values, registered output dimension %d", mech.record.Name, len(z), len(x))
			}
			for j, v := range z {
				x[j] = float64(v)
			}
			clipped, err := set.Clip(x)
			if err != nil {
				return nil, fmt.Errorf("mechanism %q: %w", mech.record.Name, err)
			}
			out = append(out, toFloat32(clipped))
		}
	}
	return out, nil
}

func toFloat64Rows(rows [][]float32) [][]float64 {
	out := make([][]float64, len(rows))
	for i, r := range rows {
		out[i] = make([]float64, len(r))
		for j, v := range r {
			out[i][j] = float64(v)
		}
	}
	return out
}

// load returns the classifier called name, reloading it when ldp_models changed.
func (c *classifiers) load(ctx context.Context, name string) (*loadedClassifier, error) {
	c.mu.Lock()
	cand, ok := c.candidates[name]
	c.mu.Unlock()
	if ok {
		return cand, nil
	}
	m, err := c.p.e.Catalog.Model(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("no classifier called %q (SELECT name FROM ldpsql_catalog.ldp_models WHERE plugin = 'classifier' lists them)", name)
	}
	if m.Plugin != ClassifierPlugin {
		return nil, fmt.Errorf("model %q is a %s mechanism model, not a classifier", name, m.Plugin)
	}
	c.mu.Lock()
	l, ok := c.loaded[name]
	c.mu.Unlock()
	if ok && l.checksum == m.Checksum {
		return l, nil
	}
	l = &loadedClassifier{checksum: m.Checksum}
	if err := json.Unmarshal(m.Artifact, &l.art); err != nil || l.art.Format != classifierFormat {
		return nil, fmt.Errorf("classifier %q: unreadable artifact (format %d)", name, l.art.Format)
	}
	switch l.art.Kind {
	case "mlp":
		l.mlp, err = classifier.UnmarshalModel(l.art.Model)
	case "spread":
		l.spread, err = spread.UnmarshalModel(l.art.Model)
	default:
		err = fmt.Errorf("unknown kind %q", l.art.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("classifier %q: %w", name, err)
	}
	c.mu.Lock()
	c.loaded[name] = l
	c.mu.Unlock()
	return l, nil
}

// Predict is PREDICT('model', features [, 'clean'|'release']): the class the classifier gives a row.
// Features of the mechanism's input dimension are raw and are encoded (without noise) and clipped
// first; features of its output dimension are a release (or a clipped encoding) and are classified as
// they are. When the two dimensions are equal (the identity mechanism), features count as raw unless the
// third argument says 'release'. NULL gives NULL. Batched like LDP_ENCODE.
type Predict struct {
	scalar
	c *classifiers
}

var _ BatchExpression = (*Predict)(nil)

func (c *classifiers) newPredict(_ *sql.Context, args ...sql.Expression) (sql.Expression, error) {
	f := &Predict{scalar: scalar{name: "predict", args: args}, c: c}
	if len(args) != 2 && len(args) != 3 {
		return nil, arityError("predict", "2 or 3", len(args))
	}
	return f, nil
}

// Description implements sql.FunctionExpression.
func (f *Predict) Description() string {
	return "the class a TRAIN_NOISY_CLASSIFIER model gives raw features or a release"
}

// Type implements sql.Expression.
func (f *Predict) Type(*sql.Context) sql.Type { return types.Int32 }

// WithChildren implements sql.Expression.
func (f *Predict) WithChildren(ctx *sql.Context, children ...sql.Expression) (sql.Expression, error) {
	return f.c.newPredict(ctx, children...)
}

// BatchArgs implements BatchExpression.
func (f *Predict) BatchArgs() []sql.Expression { return f.args }

// Eval implements sql.Expression.
func (f *Predict) Eval(ctx *sql.Context, row sql.Row) (any, error) { return evalOne(ctx, f, row) }

// EvalBatch implements BatchExpression.
func (f *Predict) EvalBatch(ctx *sql.Context, args [][]any) ([]any, error) {
	const fn = "PREDICT"
	out := make([]any, len(args))
	type group struct{ model, mode string }
	groups := map[group][]int{}
	var order []group
	for i, a := range args {
		if a[0] == nil || a[1] == nil {
			continue
		}
		g := group{model: fmt.Sprint(a[0])}
		if len(a) == 3 && a[2] != nil {
			g.mode = strings.ToLower(fmt.Sprint(a[2]))
			if g.mode != "clean" && g.mode != "release" {
				return nil, argError(fn, "mode", a[2], "'clean' (raw features) or 'release' (a privatised vector)")
			}
		}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], i)
	}
	for _, g := range order {
		l, err := f.c.load(ctx, g.model)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fn, err)
		}
		var raw, direct []int
		var rawRows, directRows [][]float32
		for _, i := range groups[g] {
			v, err := toVector(ctx, fn, "features", args[i][1])
			if err != nil {
				return nil, err
			}
			if err := checkFinite(fn, "features", v); err != nil {
				return nil, err
			}
			switch {
			case g.mode != "release" && len(v) == l.art.InputDim:
				raw, rawRows = append(raw, i), append(rawRows, v)
			case g.mode != "clean" && len(v) == l.art.OutputDim:
				direct, directRows = append(direct, i), append(directRows, v)
			default:
				return nil, fmt.Errorf("%s: features have %d values; model %q takes raw features of %d values or releases of %d (mechanism %q)",
					fn, len(v), g.model, l.art.InputDim, l.art.OutputDim, l.art.Mechanism)
			}
		}
		if len(rawRows) > 0 {
			mech, err := f.c.p.mechs.resolve(ctx, l.art.Mechanism)
			if err != nil {
				return nil, fmt.Errorf("%s: model %q: %w", fn, g.model, err)
			}
			set, err := outputSet(mech.desc)
			if err != nil {
				return nil, err
			}
			enc, err := encodeClipped(ctx, mech, set, rawRows)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", fn, err)
			}
			direct = append(direct, raw...)
			directRows = append(directRows, enc...)
		}
		for k, class := range l.predict(directRows) {
			out[direct[k]] = int32(class)
		}
	}
	return out, nil
}

func (l *loadedClassifier) predict(rows [][]float32) []int {
	if l.mlp != nil {
		return l.mlp.PredictBatch(rows)
	}
	out := make([]int, len(rows))
	for i, r := range toFloat64Rows(rows) {
		out[i] = l.spread.Predict(r)
	}
	return out
}

// privateValidation releases every validation row's correctness bit by randomised response at eps_c and
// returns the Warner-debiased accuracy (thesis Sec 4.2.4), through the same SQL a user would run:
//
//	SELECT PRIVATE_ACCURACY(PREDICT(model, features) = label, eps_c) FROM validation_table
//
// as the caller, so the ledger and the roles apply to it as to the user's own queries: on a protected
// validation table every bit is charged eps_c to its row's unit before the accuracy is returned, and a
// validation that would over-spend a unit fails (with the ledger's error) and the job stores no model.
// The candidate model is loaded under a temporary name for the query and removed after; it carries the
// checksum it will be stored with, so in memoise mode validating the same model again — here or later
// with PRIVATE_ACCURACY(PREDICT('model', …) = …) — returns the recorded bits without a new charge.
func (c *classifiers) privateValidation(ctx *sql.Context, tp trainParams, art classifierArtifact, blob []byte) (float64, error) {
	tmp := "_ldp_val_" + tp.Model
	sum := sha256.Sum256(blob)
	l := &loadedClassifier{checksum: hex.EncodeToString(sum[:]), art: art}
	var err error
	switch art.Kind {
	case "mlp":
		l.mlp, err = classifier.UnmarshalModel(art.Model)
	case "spread":
		l.spread, err = spread.UnmarshalModel(art.Model)
	}
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.candidates[tmp] = l
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.candidates, tmp)
		c.mu.Unlock()
	}()
	q := fmt.Sprintf("SELECT PRIVATE_ACCURACY(PREDICT(%s, %s) = %s, %v) FROM %s", sqlString(tmp),
		quoteCol(tp.FeaturesCol), quoteCol(tp.LabelCol), tp.EpsC, quoteTable(tp.ValidationTable))
	iter, err := c.p.query(ctx, q)
	if err != nil {
		return 0, err
	}
	rows, err := sql.RowIterToRows(ctx, iter)
	if err != nil {
		return 0, err
	}
	if len(rows) != 1 || rows[0][0] == nil {
		return 0, errors.New("the validation table has no rows")
	}
	return toFloat64Value(rows[0][0])
}

func toFloat64Value(v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case float32:
		return float64(x), nil
	}
	return 0, fmt.Errorf("unexpected PRIVATE_ACCURACY value %v (%T)", v, v)
}

// warnUninformative records in the job (ldp_jobs.warning) that a classifier learnt nothing its
// validation split shows; the model is still stored, and its training_stats say so too.
func warnUninformative(report func(engine.JobProgress), st classifier.TrainStats) {
	if st.Warning != "" {
		report(engine.JobProgress{Warning: st.Warning})
	}
}
