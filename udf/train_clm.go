package udf

import (
	"context"
	"fmt"

	"github.com/dolthub/go-mysql-server/sql"

	"github.com/ldpsql/ldpsql/training/clm"
	"github.com/ldpsql/ldpsql/training/dp"
	"github.com/ldpsql/ldpsql/training/nn"
)

// trainCLM is CALL ldp_train_mechanism('name', 'clm', 'aux', 'features', '{"d": 32, "l": 5, …}')
// (clm.Config): a job trains the contrastive Laplace mechanism on the aux table's features and registers
// it with the clm plugin. "eps_target" without "eps_pretrain" sets the training noise from Table B.1
// (clm.EpsPretrainFor), recorded with the params.
func (p *procedures) trainCLM(ctx *sql.Context, name, auxTable, featuresCol, params string) (sql.RowIter, error) {
	const fn, kind = "ldp_train_mechanism", "clm"
	trainParams, diag, err := splitDiagnosticParams(fn, params)
	if err != nil {
		return nil, err
	}
	cfg, err := clm.ParseConfig(trainParams)
	if err != nil {
		return nil, fmt.Errorf("%s: params: %w", fn, err)
	}
	recorded, err := pretrainFromTarget(fn, params, diag, &cfg.EpsPretrain, clm.EpsPretrainFor, func() error { return cfg.Validate() })
	if err != nil {
		return nil, err
	}
	return p.trainUnlabelled(ctx, unlabelledJob{fn: fn, name: name, kind: kind, auxTable: auxTable, featuresCol: featuresCol,
		recorded: recorded, diag: diag,
		train: func(jctx context.Context, rows [][]float32, progress func(nn.Progress)) ([]byte, *dp.Target, error) {
			model, err := clm.Train(jctx, cfg, rows, progress)
			if err != nil {
				return nil, nil, err
			}
			artifact, err := model.MarshalBinary()
			return artifact, nil, err
		}})
}
