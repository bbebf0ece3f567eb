package udf

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/plugins/host"
	"github.com/ldpsql/ldpsql/plugins/sdk"
	"github.com/ldpsql/ldpsql/training/vlm"

	"github.com/ldpsql/ldpsql/training/dp"
	"github.com/ldpsql/ldpsql/training/nn"
)

// Training procedures: CALL ldp_train_mechanism starts a background job (engine.Jobs) that reads the
// auxiliary table, trains the encoder in the server process, stores the model in ldp_models and
// registers the mechanism with the built-in plugin that runs it. CALL ldp_cancel_job stops a job.

func (p *procedures) trainingDetails() []sql.ExternalStoredProcedureDetails {
	return []sql.ExternalStoredProcedureDetails{
		{Name: "ldp_train_mechanism", Schema: sql.Schema{{Name: "job_id", Type: types.Int64}}, AdminOnly: true, Function: p.train},
		{Name: "ldp_cancel_job", Schema: sql.Schema{{Name: "cancelled", Type: types.Int64}}, Function: p.cancelJob},
	}
}

// train is CALL ldp_train_mechanism('name', 'vlm', 'aux_table', 'features_col', '{params}'). It checks
// everything it can at once (name, kind, params, table, privileges) and returns the job id; the job
// does the rest.
func (p *procedures) train(ctx *sql.Context, name, kind, auxTable, featuresCol, params string) (sql.RowIter, error) {
	const fn = "ldp_train_mechanism"
	if err := checkName(fn+": mechanism", name); err != nil {
		return nil, err
	}
	switch kind {
	case "task_aware":
		return p.trainTaskAware(ctx, name, auxTable, featuresCol, params)
	case "clm":
		return p.trainCLM(ctx, name, auxTable, featuresCol, params)
	case "vlm":
	default:
		return nil, fmt.Errorf("%s: kind %q cannot be trained (trainable: vlm, clm, task_aware); fit 'pca', 'identity' or 'task_aware_linear' with ldp_fit_mechanism", fn, kind)
	}
	trainParams, diag, err := splitDiagnosticParams(fn, params)
	if err != nil {
		return nil, err
	}
	cfg, err := vlm.ParseConfig(trainParams)
	if err != nil {
		return nil, fmt.Errorf("%s: params: %w", fn, err)
	}
	recorded, err := pretrainFromTarget(fn, params, diag, &cfg.EpsPretrain, vlm.EpsPretrainFor, func() error { return cfg.Validate() })
	if err != nil {
		return nil, err
	}
	return p.trainUnlabelled(ctx, unlabelledJob{fn: fn, name: name, kind: kind, auxTable: auxTable, featuresCol: featuresCol,
		recorded: recorded, cdp: cfg.CDP, diag: diag,
		train: func(jctx context.Context, rows [][]float32, progress func(nn.Progress)) ([]byte, *dp.Target, error) {
			model, err := vlm.Train(jctx, cfg, rows, progress)
			if err != nil {
				return nil, nil, err
			}
			artifact, err := model.MarshalBinary()
			return artifact, model.Config().CDP, err
		}})
}

// pretrainFromTarget applies a trainer's rule for its training noise when the params give "eps_target"
// (the ε_x the DBA will release at) and no "eps_pretrain": rule(ε_x) is set in *epsPretrain and added to
// the params recorded with the model, so ldp_models says what it was trained with. A rule may answer 0
// (no training noise): nothing is then added. validate checks the config once the value is set (a
// closure, so that it sees it).
func pretrainFromTarget(fn, params string, diag diagOptions, epsPretrain *float64, rule func(float64) float64, validate func() error) (json.RawMessage, error) {
	if !diag.epsGiven || *epsPretrain != 0 {
		return json.RawMessage(params), nil
	}
	if *epsPretrain = rule(diag.eps); *epsPretrain == 0 {
		return json.RawMessage(params), nil
	}
	if err := validate(); err != nil {
		return nil, fmt.Errorf("%s: params: eps_pretrain %g from eps_target %g: %w", fn, *epsPretrain, diag.eps, err)
	}
	return withParam(params, "eps_pretrain", *epsPretrain)
}

// unlabelledJob is a training job on an auxiliary table's features alone (vlm, clm): train returns the
// artifact and the CDP record (nil without CDP).
type unlabelledJob struct {
	fn, name, kind, auxTable, featuresCol string
	recorded                              json.RawMessage
	cdp                                   *dp.Target // the CDP target asked for, nil without
	diag                                  diagOptions
	train                                 func(ctx context.Context, rows [][]float32, progress func(nn.Progress)) ([]byte, *dp.Target, error)
}

// trainUnlabelled checks what it can as the caller (name free, plugin built, table readable, ledger),
// then starts the job that reads the rows, trains and registers the mechanism, and returns its id.
func (p *procedures) trainUnlabelled(ctx *sql.Context, j unlabelledJob) (sql.RowIter, error) {
	fn, name, kind, auxTable, featuresCol := j.fn, j.name, j.kind, j.auxTable, j.featuresCol
	if _, err := p.mechs.catalog.Mechanism(ctx, name); err == nil {
		return nil, fmt.Errorf("%s: a mechanism called %q is already registered (CALL ldp_drop_mechanism('%s') first)", fn, name, name)
	}
	plugin, err := p.mechs.catalog.Mechanism(ctx, kind)
	if err != nil {
		return nil, fmt.Errorf("%s: the built-in %s plugin is not registered (build it with scripts/build.sh): %w", fn, kind, err)
	}
	// Read access (and the table's existence) is checked now, as the caller.
	if err := p.exec(ctx, fmt.Sprintf("SELECT %s FROM %s LIMIT 1", quoteCol(featuresCol), quoteTable(auxTable))); err != nil {
		return nil, fmt.Errorf("%s: reading %s.%s: %w", fn, auxTable, featuresCol, err)
	}
	caller := ctx.Session.Client()
	db := ctx.GetCurrentDatabase()
	createdBy := user(ctx)
	led, err := p.ledgerForTraining(ctx, fn, auxTable, j.cdp != nil)
	if err != nil {
		return nil, err
	}
	id, err := p.e.Jobs.Start("train "+kind, name, j.recorded, createdBy, func(jctx context.Context, report func(engine.JobProgress)) error {
		// The job outlives the CALL's session: it reads as the same user through a session of its own.
		session := sql.NewBaseSessionWithClientServer("job", caller, 0)
		session.SetCurrentDatabase(db)
		sctx := sql.NewContext(jctx, sql.WithSession(session))
		rows, err := p.readVectors(sctx, fn, auxTable, featuresCol)
		if err != nil {
			return err
		}
		warnings, err := p.beforeTraining(sctx, fn, name, led, j.cdp, createdBy)
		if err != nil {
			return err
		}
		p.log("%s: training %s on %d rows of %s", fn, name, len(rows), auxTable)
		artifact, cdp, err := j.train(jctx, rows, func(pr nn.Progress) { report(jobProgress(pr)) })
		if err != nil {
			return err
		}
		return p.finishTraining(jctx, trained{fn: fn, name: name, kind: kind, plugin: plugin, auxTable: auxTable, featuresCol: featuresCol,
			trainingTable: led.table, rows: rows, recorded: j.recorded, cdp: cdp, artifact: artifact, createdBy: createdBy,
			diag: j.diag, warnings: warnings}, report)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	return sql.RowsToRowIter(sql.Row{id}), nil
}

// readVectors reads a features column into memory.
func (p *procedures) readVectors(ctx *sql.Context, fn, table, col string) ([][]float32, error) {
	r, err := p.newVectorReader(ctx, fn, table, col)
	if err != nil {
		return nil, err
	}
	defer r.close()
	var rows [][]float32
	for {
		batch, err := r.next()
		if err == io.EOF {
			return rows, nil
		}
		if err != nil {
			return nil, err
		}
		rows = append(rows, batch...)
	}
}

// registerModel stores a fitted or trained model and registers mechanism name with the plugin that runs
// it. The output set recorded (and enforced by the host from then on) is the one the plugin declares
// with the model loaded. table (db.table) and column are the training rows, which
// TRAIN_NOISY_CLASSIFIER('table') uses as the marginal objective's prior.
func (p *procedures) registerModel(ctx context.Context, name, kind string, plugin engine.Mechanism, table, column string, rows int64,
	params json.RawMessage, artifact []byte, createdBy string) (sdk.Description, error) {
	var desc sdk.Description
	loaded, err := p.mechs.host.Get(ctx, host.Spec{Name: "model:" + name, Path: plugin.Path, SHA256: plugin.SHA256, Artifact: artifact})
	if err != nil {
		return desc, fmt.Errorf("loading the model into the %s plugin: %w", kind, err)
	}
	if desc, err = loaded.Describe(ctx); err != nil {
		return desc, err
	}
	if !desc.Ready() || desc.Validate() != nil {
		return desc, fmt.Errorf("the %s model declares no valid output set", kind)
	}
	raw, err := json.Marshal(desc)
	if err != nil {
		return desc, err
	}
	sum := sha256.Sum256(artifact)
	if err := p.mechs.catalog.PutModel(ctx, engine.Model{Name: name, Plugin: kind, Params: params, TrainingTable: table, TrainingColumn: column,
		TrainingRows: rows, Checksum: hex.EncodeToString(sum[:]), Artifact: artifact, CreatedBy: createdBy, CreatedAt: time.Now()}); err != nil {
		return desc, err
	}
	if err := p.mechs.catalog.RegisterMechanism(ctx, engine.Mechanism{Name: name, Plugin: kind, Path: plugin.Path, SHA256: plugin.SHA256,
		Description: raw, Model: name, RegisteredBy: createdBy, RegisteredAt: time.Now()}); err != nil {
		return desc, err
	}
	p.mechs.forget(name)
	return desc, nil
}

// cancelJob is CALL ldp_cancel_job(id): a job's owner or a DBA stops it. Another user's job is
// refused as if it did not exist, so the call tells nobody about other users' jobs.
func (p *procedures) cancelJob(ctx *sql.Context, id int64) (sql.RowIter, error) {
	job, err := p.e.Jobs.Get(ctx, id)
	if err != nil || (!p.e.IsDBA(ctx) && job.CreatedBy != user(ctx)) {
		return nil, fmt.Errorf("ldp_cancel_job: you have no job %d (SELECT id, state FROM ldpsql_catalog.ldp_jobs lists yours)", id)
	}
	if err := p.e.Jobs.Cancel(id); err != nil {
		return nil, fmt.Errorf("ldp_cancel_job: %w", err)
	}
	return sql.RowsToRowIter(sql.Row{id}), nil
}

// jobProgress is a training run's progress as its job shows it: restarts run one after another, so the
// job's epochs count across them.
func jobProgress(p nn.Progress) engine.JobProgress {
	return engine.JobProgress{Epoch: p.OverallEpoch(), Epochs: p.OverallEpochs(), Loss: p.Loss, RowsPerS: p.RowsPerSec, ETA: p.ETA}
}

// withParam returns the JSON object params with key set to v.
func withParam(params, key string, v any) (json.RawMessage, error) {
	var obj map[string]any
	if err := json.Unmarshal([]byte(params), &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("params %q are not a JSON object", params)
	}
	obj[key] = v
	return json.Marshal(obj)
}
