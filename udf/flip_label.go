package udf

import (
	"sync/atomic"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"

	"github.com/ldpsql/ldpsql/mechanisms"
)

// FlipLabel is FLIP_LABEL(y, eps, K): k-ary randomised response on a label y in 0..K−1. It keeps y with
// probability e^ε/(e^ε+K−1) and otherwise returns one of the other K−1 labels uniformly, which is
// eps-LDP for the label. NULL in gives NULL out.
type FlipLabel struct {
	scalar
	last atomic.Pointer[mechanisms.KRR] // the randomiser for the last (eps, K) seen; usually constant
}

var _ sql.FunctionExpression = (*FlipLabel)(nil)
var _ sql.NonDeterministicExpression = (*FlipLabel)(nil)

// NewFlipLabel builds FLIP_LABEL(y, eps, K).
func NewFlipLabel(_ *sql.Context, args ...sql.Expression) (sql.Expression, error) {
	f := &FlipLabel{scalar: scalar{name: "flip_label", args: args}}
	return f, f.checkArity(3)
}

// Description implements sql.FunctionExpression.
func (f *FlipLabel) Description() string {
	return "k-ary randomised response: returns y with probability e^eps/(e^eps+K-1), else another label in 0..K-1 uniformly"
}

// Type implements sql.Expression.
func (f *FlipLabel) Type(*sql.Context) sql.Type { return types.Int64 }

// WithChildren implements sql.Expression.
func (f *FlipLabel) WithChildren(ctx *sql.Context, children ...sql.Expression) (sql.Expression, error) {
	return NewFlipLabel(ctx, children...)
}

// Eval implements sql.Expression.
func (f *FlipLabel) Eval(ctx *sql.Context, row sql.Row) (any, error) {
	vals, err := evalArgs(ctx, row, f.args)
	if err != nil || hasNull(vals) {
		return nil, err
	}
	const fn = "FLIP_LABEL"
	eps, err := toEpsilon(ctx, fn, vals[1])
	if err != nil {
		return nil, err
	}
	k, err := toK(ctx, fn, vals[2])
	if err != nil {
		return nil, err
	}
	y, err := toInt(ctx, fn, "y", vals[0])
	if err != nil {
		return nil, err
	}
	if y < 0 || y >= int64(k) {
		return nil, argError(fn, "y", vals[0], "the label must be an integer in 0..K-1 (K = "+itoa(k)+")")
	}
	krr := f.last.Load()
	if krr == nil || krr.Epsilon() != eps || krr.K() != k {
		if krr, err = mechanisms.NewKRR(eps, k); err != nil {
			return nil, argError(fn, "eps", vals[1], err.Error())
		}
		f.last.Store(krr)
	}
	out, err := krr.Randomise(int(y), mechanisms.CryptoSource())
	if err != nil {
		return nil, err
	}
	return int64(out), nil
}
