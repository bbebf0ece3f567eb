package udf

import (
	"sync/atomic"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"

	"github.com/ldpsql/ldpsql/mechanisms"
)

// FlipLabel is FLIP_LABEL(y, eps, K [, unit_key]): k-ary randomised response on a label y in 0..K−1. It keeps y with
// probability e^ε/(e^ε+K−1) and otherwise returns one of the other K−1 labels uniformly, which is
// eps-LDP for the label. NULL in gives NULL out.
type FlipLabel struct {
	scalar
	constant *mechanisms.KRR                // set when eps and K are valid literals: no per-row conversion
	last     atomic.Pointer[mechanisms.KRR] // otherwise, the randomiser for the last (eps, K) seen
}

var _ sql.FunctionExpression = (*FlipLabel)(nil)
var _ sql.NonDeterministicExpression = (*FlipLabel)(nil)

// NewFlipLabel builds FLIP_LABEL(y, eps, K).
func NewFlipLabel(_ *sql.Context, args ...sql.Expression) (sql.Expression, error) {
	f := &FlipLabel{scalar: scalar{name: "flip_label", args: args}}
	if len(args) != 4 { // FLIP_LABEL(y, eps, K, unit_key): the unit key is for the ledger (package boundary)
		if err := f.checkArity(3); err != nil {
			return nil, err
		}
	}
	if lits, ok := literalArgs(args[1], args[2]); ok {
		if krr, err := f.randomiser(sql.NewEmptyContext(), lits[0], lits[1]); err == nil {
			f.constant = krr
		}
	}
	return f, nil
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
	const fn = "FLIP_LABEL"
	yv, err := f.args[0].Eval(ctx, row)
	if err != nil {
		return nil, err
	}
	krr := f.constant
	if krr == nil {
		epsv, err := f.args[1].Eval(ctx, row)
		if err != nil {
			return nil, err
		}
		kv, err := f.args[2].Eval(ctx, row)
		if err != nil || epsv == nil || kv == nil {
			return nil, err
		}
		if krr, err = f.randomiser(ctx, epsv, kv); err != nil {
			return nil, err
		}
	}
	if yv == nil {
		return nil, nil
	}
	y, err := toInt(ctx, fn, "y", yv)
	if err != nil {
		return nil, err
	}
	if y < 0 || y >= int64(krr.K()) {
		return nil, argError(fn, "y", yv, "the label must be an integer in 0..K-1 (K = "+itoa(krr.K())+")")
	}
	out, err := krr.Randomise(int(y), mechanisms.CryptoSource())
	if err != nil {
		return nil, err
	}
	return int64(out), nil
}

// randomiser validates eps and K and returns the k-RR randomiser for them, reusing the last one.
func (f *FlipLabel) randomiser(ctx *sql.Context, epsv, kv any) (*mechanisms.KRR, error) {
	const fn = "FLIP_LABEL"
	eps, err := toEpsilon(ctx, fn, epsv)
	if err != nil {
		return nil, err
	}
	k, err := toK(ctx, fn, kv)
	if err != nil {
		return nil, err
	}
	if krr := f.last.Load(); krr != nil && krr.Epsilon() == eps && krr.K() == k {
		return krr, nil
	}
	krr, err := mechanisms.NewKRR(eps, k)
	if err != nil {
		return nil, argError(fn, "eps", epsv, err.Error())
	}
	f.last.Store(krr)
	return krr, nil
}
