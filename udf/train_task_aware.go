package udf

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/dolthub/go-mysql-server/sql"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/training/nn"
	"github.com/ldpsql/ldpsql/training/taskaware"
)

// trainTaskAware is CALL ldp_train_mechanism('name', 'task_aware', 'aux', 'features', '{"label": "y",
// "eps": 20, …}') (taskaware.TrainConfig): a job trains the task model on the aux table's labelled
// rows, then the encoder and decoder through it (Algorithm 1), and registers the mechanism with the
// task_aware plugin.
func (p *procedures) trainTaskAware(ctx *sql.Context, name, auxTable, featuresCol, params string) (sql.RowIter, error) {
	const fn, kind = "ldp_train_mechanism", "task_aware"
	trainParams, diag, err := splitDiagnosticParams(fn, params)
	if err != nil {
		return nil, err
	}
	cfg, err := taskaware.ParseTrainConfig(trainParams)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	if _, err := p.mechs.catalog.Mechanism(ctx, name); err == nil {
		return nil, fmt.Errorf("%s: a mechanism called %q is already registered (CALL ldp_drop_mechanism('%s') first)", fn, name, name)
	}
	plugin, err := p.mechs.catalog.Mechanism(ctx, kind)
	if err != nil {
		return nil, fmt.Errorf("%s: the built-in %s plugin is not registered (build it with scripts/build.sh): %w", fn, kind, err)
	}
	if err := p.exec(ctx, fmt.Sprintf("SELECT %s, %s FROM %s LIMIT 1", quoteCol(featuresCol), quoteCol(cfg.Label), quoteTable(auxTable))); err != nil {
		return nil, fmt.Errorf("%s: reading %s.%s and its label column %s: %w", fn, auxTable, featuresCol, cfg.Label, err)
	}
	caller := ctx.Session.Client()
	db := ctx.GetCurrentDatabase()
	createdBy := user(ctx)
	recorded := json.RawMessage(params)
	led, err := p.ledgerForTraining(ctx, fn, auxTable, cfg.CDP != nil)
	if err != nil {
		return nil, err
	}
	id, err := p.e.Jobs.Start("train "+kind, name, recorded, createdBy, func(jctx context.Context, report func(engine.JobProgress)) error {
		session := sql.NewBaseSessionWithClientServer("job", caller, 0)
		session.SetCurrentDatabase(db)
		sctx := sql.NewContext(jctx, sql.WithSession(session))
		rows, labels, err := p.readLabelled(sctx, fn, auxTable, featuresCol, cfg.Label)
		if err != nil {
			return err
		}
		warnings, err := p.beforeTraining(sctx, fn, name, led, cfg.CDP, createdBy)
		if err != nil {
			return err
		}
		p.log("%s: training %s (%s) on %d rows of %s", fn, name, kind, len(rows), auxTable)
		model, err := taskaware.Train(jctx, cfg, rows, labels, func(pr nn.Progress) { report(jobProgress(pr)) })
		if err != nil {
			return err
		}
		artifact, err := model.Artifact()
		if err != nil {
			return err
		}
		return p.finishTraining(jctx, trained{fn: fn, name: name, kind: kind, plugin: plugin, auxTable: auxTable, featuresCol: featuresCol,
			trainingTable: led.table, rows: rows, recorded: recorded, cdp: model.CDP, artifact: artifact, createdBy: createdBy,
			diag: diag, warnings: warnings}, report)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	return sql.RowsToRowIter(sql.Row{id}), nil
}

// readLabelled reads a features column and a numeric label column, row by row. Rows without features
// are skipped, as everywhere; a row with features but no label is an error naming it.
func (p *procedures) readLabelled(ctx *sql.Context, fn, table, featuresCol, labelCol string) ([][]float32, []float64, error) {
	iter, err := p.query(ctx, fmt.Sprintf("SELECT %s, %s FROM %s", quoteCol(featuresCol), quoteCol(labelCol), quoteTable(table)))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: reading %s: %w", fn, table, err)
	}
	defer iter.Close(ctx)
	var rows [][]float32
	var labels []float64
	for i := 1; ; i++ {
		row, err := iter.Next(ctx)
		if err == io.EOF {
			return rows, labels, nil
		}
		if err != nil {
			return nil, nil, err
		}
		if row[0] == nil {
			continue
		}
		if row[1] == nil {
			return nil, nil, fmt.Errorf("%s: row %d of %s has no %s (NULL): the task model needs every row's label", fn, i, table, labelCol)
		}
		v, err := toVector(ctx, fn, featuresCol, row[0])
		if err != nil {
			return nil, nil, err
		}
		y, err := toFloat(ctx, fn, labelCol, row[1])
		if err != nil {
			return nil, nil, fmt.Errorf("%s: row %d of %s: %w", fn, i, table, err)
		}
		rows, labels = append(rows, v), append(labels, y)
	}
}
