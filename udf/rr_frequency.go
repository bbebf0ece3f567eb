package udf

import (
	"fmt"
	"sync"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/planbuilder"
	"github.com/dolthub/go-mysql-server/sql/types"

	"github.com/ldpsql/ldpsql/mechanisms"
)

// RRFrequency is the aggregate RR_FREQUENCY(y_noisy, eps, K, class): the Warner-debiased share of rows
// whose true label is class, estimated from labels released by FLIP_LABEL(y, eps, K). With p the keep and
// q the per-label flip probability, E[share of class among y_noisy] = q + (p − q)·f, so
// f̂ = (share − q)/(p − q), clipped to [0, 1]. Rows with a NULL y_noisy are skipped; eps, K and class
// must be the same on every row of a group.
//
// On a protected table a column of it is not a release yet: there RR_FREQUENCY(y, eps, K, class
// [, unit_key]) releases each row's y by k-RR at (eps, K) — the release FLIP_LABEL(y, eps, K) makes,
// charged to the row's unit through the ledger and memoised with it — and returns the debiased share of
// class among those releases (ledger_agg.go). A NULL or invalid y is released as a uniform label.
type RRFrequency struct {
	scalar
	id     sql.ColumnId
	window *sql.WindowDefinition
}

var _ sql.Aggregation = (*RRFrequency)(nil)
var _ sql.FunctionExpression = (*RRFrequency)(nil)

// NewRRFrequency builds RR_FREQUENCY(y_noisy, eps, K, class [, unit_key]).
func NewRRFrequency(_ *sql.Context, args ...sql.Expression) (sql.Expression, error) {
	f := &RRFrequency{scalar: scalar{name: "rr_frequency", args: args}}
	if len(args) == 5 { // the unit key is for the ledger (ledger_agg.go)
		return f, nil
	}
	return f, f.checkArity(4)
}

// registerAggregates tells GMS's planner which of our functions are aggregates (its list is otherwise
// hard-coded). It wraps the previous predicate, once.
var registerAggregates = sync.OnceFunc(func() {
	prev := planbuilder.IsAggregateFunc
	planbuilder.IsAggregateFunc = func(name string) bool {
		return name == "rr_frequency" || name == "private_accuracy" || prev(name)
	}
})

// Description implements sql.FunctionExpression.
func (f *RRFrequency) Description() string {
	return "Warner-debiased frequency of class among labels privatised by FLIP_LABEL(y, eps, K)"
}

// Type implements sql.Expression.
func (f *RRFrequency) Type(*sql.Context) sql.Type { return types.Float64 }

// IsNonDeterministic: the aggregate itself is deterministic given its input.
func (f *RRFrequency) IsNonDeterministic() bool { return false }

// Eval implements sql.Expression; an aggregate is evaluated through its buffer.
func (f *RRFrequency) Eval(*sql.Context, sql.Row) (any, error) {
	return nil, sql.ErrAggregationUnsupported.New(f.String())
}

// WithChildren implements sql.Expression.
func (f *RRFrequency) WithChildren(ctx *sql.Context, children ...sql.Expression) (sql.Expression, error) {
	nf, err := NewRRFrequency(ctx, children...)
	if err != nil {
		return nil, err
	}
	nf.(*RRFrequency).id, nf.(*RRFrequency).window = f.id, f.window
	return nf, nil
}

// Id implements sql.IdExpression.
func (f *RRFrequency) Id() sql.ColumnId { return f.id }

// WithId implements sql.IdExpression.
func (f *RRFrequency) WithId(id sql.ColumnId) sql.IdExpression {
	nf := *f
	nf.id = id
	return &nf
}

// Window implements sql.WindowAdaptableExpression.
func (f *RRFrequency) Window() *sql.WindowDefinition { return f.window }

// WithWindow implements sql.WindowAdaptableExpression.
func (f *RRFrequency) WithWindow(_ *sql.Context, w *sql.WindowDefinition) sql.WindowAdaptableExpression {
	nf := *f
	nf.window = w
	return &nf
}

// NewWindowFunction implements sql.WindowAdaptableExpression: RR_FREQUENCY is not a window function.
func (f *RRFrequency) NewWindowFunction(*sql.Context) (sql.WindowFunction, error) {
	return nil, fmt.Errorf("RR_FREQUENCY cannot be used as a window function (OVER ...)")
}

// NewBuffer implements sql.Aggregation.
func (f *RRFrequency) NewBuffer(*sql.Context) (sql.AggregationBuffer, error) {
	return &rrFrequencyBuffer{args: f.args}, nil
}

type rrFrequencyBuffer struct {
	args       []sql.Expression
	n, matches int64
	params     []any // eps, K, class of the first row, to check the rest against
	eps        float64
	k          int
}

// Update implements sql.AggregationBuffer.
func (b *rrFrequencyBuffer) Update(ctx *sql.Context, row sql.Row) error {
	vals, err := evalArgs(ctx, row, b.args)
	if err != nil {
		return err
	}
	const fn = "RR_FREQUENCY"
	if b.params == nil {
		if vals[1] == nil || vals[2] == nil || vals[3] == nil {
			return fmt.Errorf("%s: eps, K and class must not be NULL", fn)
		}
		if b.eps, err = toEpsilon(ctx, fn, vals[1]); err != nil {
			return err
		}
		if b.k, err = toK(ctx, fn, vals[2]); err != nil {
			return err
		}
		class, err := toInt(ctx, fn, "class", vals[3])
		if err != nil {
			return err
		}
		if class < 0 || class >= int64(b.k) {
			return argError(fn, "class", vals[3], fmt.Sprintf("the class must be in 0..K-1 (K = %d)", b.k))
		}
		b.params = []any{b.eps, int64(b.k), class}
	} else {
		for i, name := range []string{"eps", "K", "class"} {
			var same bool
			switch i {
			case 0:
				e, err := toFloat(ctx, fn, name, vals[1])
				same = err == nil && e == b.eps
			default:
				v, err := toInt(ctx, fn, name, vals[i+1])
				same = err == nil && v == b.params[i].(int64)
			}
			if !same {
				return argError(fn, name, vals[i+1], fmt.Sprintf("must be the same on every row (first row had %v)", b.params[i]))
			}
		}
	}
	if vals[0] == nil {
		return nil
	}
	y, err := toInt(ctx, fn, "y_noisy", vals[0])
	if err != nil {
		return err
	}
	if y < 0 || y >= int64(b.k) {
		return argError(fn, "y_noisy", vals[0], fmt.Sprintf("a released label must be in 0..K-1 (K = %d)", b.k))
	}
	b.n++
	if y == b.params[2].(int64) {
		b.matches++
	}
	return nil
}

// Eval implements sql.AggregationBuffer. An empty group gives NULL.
func (b *rrFrequencyBuffer) Eval(*sql.Context) (any, error) {
	if b.n == 0 {
		return nil, nil
	}
	return mechanisms.WarnerEstimate(b.matches, b.n, b.eps, b.k)
}

// Dispose implements sql.Disposable.
func (b *rrFrequencyBuffer) Dispose(*sql.Context) {}
