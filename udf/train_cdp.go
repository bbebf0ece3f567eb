package udf

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/dolthub/go-mysql-server/sql"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/training/dp"
	"github.com/ldpsql/ldpsql/udf/boundary"
)

// The ledger and CDP training. A trained encoder's weights are a release of its training rows: on a
// protected table, a training run under CDP at (ε, δ) charges ε to every unit of the table (every unit
// took part: Poisson sampling includes each row in each step with the same probability), before the
// training starts, so a table whose units lack the budget trains nothing. Training without CDP on a
// protected table protects nothing; only a DBA may call ldp_train_mechanism, and the job records a
// warning saying so.

// chargeTraining charges eps to every unit of the protected table b for the training of mechanism name.
func (p *procedures) chargeTraining(ctx *sql.Context, fn string, b engine.Budget, name string, eps float64, by string) (int, error) {
	cols := make([]string, len(b.UnitColumns))
	for i, u := range b.UnitColumns {
		cols[i] = quoteCol(u)
	}
	schema, iter, err := p.querySchema(boundary.WithInternalRead(ctx), fmt.Sprintf("SELECT DISTINCT %s FROM %s.%s", strings.Join(cols, ", "),
		quoteCol(b.TableRef.Database), quoteCol(b.TableRef.Table)))
	if err != nil {
		return 0, fmt.Errorf("%s: reading the units of %s: %w", fn, b.TableRef, err)
	}
	defer iter.Close(ctx)
	keyTypes := columnTypes(schema)
	var charges []engine.Charge
	seen := map[string]bool{} // GMS's DISTINCT folds as the collation does; a unit is never charged twice if not
	for {
		row, err := iter.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
		unit, err := engine.UnitKey(keyTypes, row...)
		if err != nil {
			return 0, fmt.Errorf("%s: a unit of %s: %w", fn, b.TableRef, err)
		}
		if seen[unit] {
			continue
		}
		seen[unit] = true
		charges = append(charges, engine.Charge{Table: b.TableRef, Unit: unit, Eps: eps, Function: fn, Mechanism: name, Randomiser: "dp-sgd",
			Digest: engine.ReleaseDigest("train:"+name, unit, name, "dp-sgd", eps, 0)})
	}
	if err := p.e.Ledger.Charge(ctx, by, charges); err != nil {
		return 0, fmt.Errorf("%s: charging ε_CDP = %g to the %d units of %s: %w", fn, eps, len(charges), b.TableRef, err)
	}
	return len(charges), nil
}

// trainingLedger is the ledger's part in one training job on an auxiliary table.
type trainingLedger struct {
	budget    engine.Budget
	protected bool
	table     string // db.table
}

// ledgerForTraining looks the auxiliary table up in the ledger; training a protected table without CDP
// is refused for non-DBAs at once.
func (p *procedures) ledgerForTraining(ctx *sql.Context, fn, auxTable string, cdp bool) (trainingLedger, error) {
	db, name := splitTable(ctx, auxTable)
	b, protected := p.e.Ledger.Budget(engine.TableRef{Database: db, Table: name})
	l := trainingLedger{budget: b, protected: protected, table: qualifiedTable(ctx, auxTable)}
	if protected && !cdp && !p.e.IsDBA(ctx) {
		return l, fmt.Errorf("%s: %s is protected by the privacy ledger: train under central DP (\"cdp\": {\"epsilon\": …})", fn, l.table)
	}
	return l, nil
}

// beforeTraining charges a CDP run's ε to every unit of a protected table, or returns the warning a run
// without CDP on one records.
func (p *procedures) beforeTraining(ctx *sql.Context, fn, name string, l trainingLedger, cdp *dp.Target, by string) ([]string, error) {
	switch {
	case l.protected && cdp != nil:
		units, err := p.chargeTraining(ctx, fn, l.budget, name, cdp.Epsilon, by)
		if err != nil {
			return nil, err
		}
		p.log("%s: charged ε_CDP = %g to each of the %d units of %s", fn, cdp.Epsilon, units, l.table)
	case l.protected:
		return []string{fmt.Sprintf("trained without CDP on protected table %s: the weights are not protected", l.table)}, nil
	}
	return nil, nil
}

// trained is what a training job hands to finishTraining.
type trained struct {
	fn, name, kind        string
	plugin                engine.Mechanism
	auxTable, featuresCol string
	trainingTable         string // db.table
	rows                  [][]float32
	recorded              json.RawMessage
	cdp                   *dp.Target // what a CDP run met, nil without CDP
	artifact              []byte
	createdBy             string
	diag                  diagOptions
	warnings              []string
}

// finishTraining records a CDP run's record with the params, stores and registers the model, runs the
// diagnostics and reports the job's warnings.
func (p *procedures) finishTraining(ctx context.Context, t trained, report func(engine.JobProgress)) error {
	recorded := t.recorded
	if t.cdp != nil {
		// What the run met (σ, q, steps, spent ε) goes into ldp_models.params beside what was asked.
		var err error
		if recorded, err = withParam(string(recorded), "cdp", t.cdp); err != nil {
			return err
		}
		p.log("%s: %s trained under (ε = %.4g, δ = %.3g)-CDP: noise multiplier %.3f, %d steps at sampling rate %.4g",
			t.fn, t.name, t.cdp.Spent, t.cdp.Delta, t.cdp.NoiseMultiplier, t.cdp.Steps, t.cdp.SamplingRate)
	}
	if _, err := p.registerModel(ctx, t.name, t.kind, t.plugin, t.trainingTable, t.featuresCol, int64(len(t.rows)), recorded, t.artifact, t.createdBy); err != nil {
		return err
	}
	// The mechanism is registered; its diagnostics (at eps_target) may add a warning to the job.
	warnings := t.warnings
	if w := p.diagnoseAfterFit(ctx, t.fn, t.name, sampleRows(t.rows), t.auxTable, t.featuresCol, t.diag); w != "" {
		warnings = append(warnings, w)
	}
	if len(warnings) > 0 {
		report(engine.JobProgress{Warning: strings.Join(warnings, "; ")})
	}
	return nil
}
