package udf

import (
	"fmt"
	"io"
	"strings"

	"github.com/dolthub/go-mysql-server/sql"

	"github.com/ldpsql/ldpsql/engine"
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
	iter, err := p.query(withInternalRead(ctx), fmt.Sprintf("SELECT DISTINCT %s FROM %s.%s", strings.Join(cols, ", "),
		quoteCol(b.TableRef.Database), quoteCol(b.TableRef.Table)))
	if err != nil {
		return 0, fmt.Errorf("%s: reading the units of %s: %w", fn, b.TableRef, err)
	}
	defer iter.Close(ctx)
	var charges []engine.Charge
	for {
		row, err := iter.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
		unit, err := engine.UnitKey(row...)
		if err != nil {
			return 0, fmt.Errorf("%s: a unit of %s: %w", fn, b.TableRef, err)
		}
		charges = append(charges, engine.Charge{Table: b.TableRef, Unit: unit, Eps: eps, Function: fn, Mechanism: name, Randomiser: "dp-sgd",
			Digest: engine.ReleaseDigest("train:"+name, unit, name, "dp-sgd", eps, 0)})
	}
	if err := p.e.Ledger.Charge(ctx, by, charges); err != nil {
		return 0, fmt.Errorf("%s: charging ε_CDP = %g to the %d units of %s: %w", fn, eps, len(charges), b.TableRef, err)
	}
	return len(charges), nil
}
