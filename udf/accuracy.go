package udf

import (
	"fmt"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"

	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/training/accuracy"
)

// LDPAccuracyBound is LDP_ACCURACY_BOUND(eps, K): the upper bound on the accuracy any K-class
// classifier can reach on latents released at eps by the Laplace mechanism (accuracy.Bound).
type LDPAccuracyBound struct{ scalar }

// NewLDPAccuracyBound builds LDP_ACCURACY_BOUND(eps, K).
func NewLDPAccuracyBound(_ *sql.Context, args ...sql.Expression) (sql.Expression, error) {
	f := &LDPAccuracyBound{scalar{name: "ldp_accuracy_bound", args: args}}
	return f, f.checkArity(2)
}

func (f *LDPAccuracyBound) Description() string {
	return "upper bound on private-classification accuracy for K classes at eps (Mansbridge et al.)"
}
func (f *LDPAccuracyBound) Type(*sql.Context) sql.Type { return types.Float64 }
func (f *LDPAccuracyBound) IsNonDeterministic() bool   { return false }
func (f *LDPAccuracyBound) WithChildren(ctx *sql.Context, c ...sql.Expression) (sql.Expression, error) {
	return NewLDPAccuracyBound(ctx, c...)
}

// Eval implements sql.Expression.
func (f *LDPAccuracyBound) Eval(ctx *sql.Context, row sql.Row) (any, error) {
	vals, err := evalArgs(ctx, row, f.args)
	if err != nil || hasNull(vals) {
		return nil, err
	}
	const fn = "LDP_ACCURACY_BOUND"
	eps, err := toEpsilon(ctx, fn, vals[0])
	if err != nil {
		return nil, err
	}
	k, err := toK(ctx, fn, vals[1])
	if err != nil {
		return nil, err
	}
	a, err := accuracy.Bound(eps, k)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	return a, nil
}

// PrivateAccuracy is the aggregate PRIVATE_ACCURACY(correct, eps [, unit_key]): private validation
// (thesis §5.4). Each row's correctness bit is released by randomised response (flipped with
// probability 1/(e^eps + 1), so the bit is eps-LDP for its row), and the aggregate returns the
// Warner-debiased share of correct rows, clipped to [0, 1]. NULL rows are skipped; eps must be the same
// on every row.
//
// On a protected table every bit is a release charged to its row's unit through the ledger
// (package boundary): correct may be any expression of the row (typically PREDICT('model', f) = y), even
// for an analyst, because only its released bit leaves the row; a NULL or invalid bit is released as a
// uniformly drawn one rather than skipped; a DBA may name the unit with unit_key (ignored elsewhere).
type PrivateAccuracy struct {
	RRFrequency // same plumbing: ids, windows, arity checks
}

// NewPrivateAccuracy builds PRIVATE_ACCURACY(correct, eps [, unit_key]).
func NewPrivateAccuracy(_ *sql.Context, args ...sql.Expression) (sql.Expression, error) {
	f := &PrivateAccuracy{RRFrequency{scalar: scalar{name: "private_accuracy", args: args}}}
	if len(args) == 3 { // the unit key is for the ledger (package boundary)
		return f, nil
	}
	return f, f.checkArity(2)
}

func (f *PrivateAccuracy) Description() string {
	return "Warner-debiased accuracy from correctness bits released by randomised response at eps"
}
func (f *PrivateAccuracy) IsNonDeterministic() bool { return true }
func (f *PrivateAccuracy) WithChildren(ctx *sql.Context, c ...sql.Expression) (sql.Expression, error) {
	nf, err := NewPrivateAccuracy(ctx, c...)
	if err != nil {
		return nil, err
	}
	nf.(*PrivateAccuracy).id, nf.(*PrivateAccuracy).window = f.id, f.window
	return nf, nil
}
func (f *PrivateAccuracy) WithId(id sql.ColumnId) sql.IdExpression {
	nf := *f
	nf.id = id
	return &nf
}
func (f *PrivateAccuracy) WithWindow(_ *sql.Context, w *sql.WindowDefinition) sql.WindowAdaptableExpression {
	nf := *f
	nf.window = w
	return &nf
}
func (f *PrivateAccuracy) NewWindowFunction(*sql.Context) (sql.WindowFunction, error) {
	return nil, fmt.Errorf("PRIVATE_ACCURACY cannot be used as a window function (OVER ...)")
}

// NewBuffer implements sql.Aggregation.
func (f *PrivateAccuracy) NewBuffer(*sql.Context) (sql.AggregationBuffer, error) {
	return &privateAccuracyBuffer{args: f.args}, nil
}

type privateAccuracyBuffer struct {
	args        []sql.Expression
	krr         *mechanisms.KRR
	n, released int64 // rows, and rows whose released bit says "correct"
}

// Update implements sql.AggregationBuffer: it releases this row's bit.
func (b *privateAccuracyBuffer) Update(ctx *sql.Context, row sql.Row) error {
	const fn = "PRIVATE_ACCURACY"
	vals, err := evalArgs(ctx, row, b.args)
	if err != nil {
		return err
	}
	if vals[1] == nil {
		return fmt.Errorf("%s: eps must not be NULL", fn)
	}
	eps, err := toEpsilon(ctx, fn, vals[1])
	if err != nil {
		return err
	}
	if b.krr == nil {
		if b.krr, err = mechanisms.NewKRR(eps, 2); err != nil {
			return argError(fn, "eps", vals[1], err.Error())
		}
	} else if eps != b.krr.Epsilon() {
		return argError(fn, "eps", vals[1], fmt.Sprintf("must be the same on every row (first row had %v)", b.krr.Epsilon()))
	}
	if vals[0] == nil {
		return nil
	}
	c, err := toInt(ctx, fn, "correct", vals[0])
	if err != nil {
		return err
	}
	if c != 0 && c != 1 {
		return argError(fn, "correct", vals[0], "a correctness bit is 0 or 1")
	}
	out, err := b.krr.Randomise(int(c), mechanisms.CryptoSource())
	if err != nil {
		return err
	}
	b.n++
	b.released += int64(out)
	return nil
}

// Eval implements sql.AggregationBuffer. An empty group gives NULL.
func (b *privateAccuracyBuffer) Eval(*sql.Context) (any, error) {
	if b.n == 0 {
		return nil, nil
	}
	return mechanisms.WarnerEstimate(b.released, b.n, b.krr.Epsilon(), 2)
}

// Dispose implements sql.Disposable.
func (b *privateAccuracyBuffer) Dispose(*sql.Context) {}
