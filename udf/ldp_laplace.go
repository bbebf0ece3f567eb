package udf

import (
	"math"
	"sync/atomic"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"

	"github.com/ldpsql/ldpsql/mechanisms"
)

// LDPLaplace is LDP_LAPLACE(x, eps, lo, hi [, unit_key]): x is clipped to [lo, hi] and secure Laplace
// noise of scale (hi−lo)/eps is added, on a grid so that floating-point artefacts reveal nothing (the
// Mironov attack). The release is eps-LDP for x whatever x is. NULL in gives NULL out.
//
// On a protected table the release is charged to the row's unit through the ledger (package boundary); a DBA
// may name the unit with unit_key, which is ignored on an unprotected table. There a NULL or invalid x
// is released as if it were the midpoint of [lo, hi] (never as NULL, which would say that it is NULL).
type LDPLaplace struct {
	scalar
	last atomic.Pointer[laplaceKey]
}

type laplaceKey struct {
	eps, lo, hi float64
	mech        *mechanisms.Laplace
}

var _ sql.FunctionExpression = (*LDPLaplace)(nil)
var _ sql.NonDeterministicExpression = (*LDPLaplace)(nil)

// NewLDPLaplace builds LDP_LAPLACE(x, eps, lo, hi [, unit_key]).
func NewLDPLaplace(_ *sql.Context, args ...sql.Expression) (sql.Expression, error) {
	f := &LDPLaplace{scalar: scalar{name: "ldp_laplace", args: args}}
	if len(args) == 5 { // the unit key is for the ledger (package boundary)
		return f, nil
	}
	return f, f.checkArity(4)
}

// Description implements sql.FunctionExpression.
func (f *LDPLaplace) Description() string {
	return "local Laplace mechanism: clips x to [lo, hi] and adds secure Laplace noise of scale (hi-lo)/eps"
}

// Type implements sql.Expression.
func (f *LDPLaplace) Type(*sql.Context) sql.Type { return types.Float64 }

// WithChildren implements sql.Expression.
func (f *LDPLaplace) WithChildren(ctx *sql.Context, children ...sql.Expression) (sql.Expression, error) {
	return NewLDPLaplace(ctx, children...)
}

// Eval implements sql.Expression.
func (f *LDPLaplace) Eval(ctx *sql.Context, row sql.Row) (any, error) {
	vals, err := evalArgs(ctx, row, f.args[:4]) // a unit key is ignored here: the table is not protected
	if err != nil || hasNull(vals) {
		return nil, err
	}
	const fn = "LDP_LAPLACE"
	x, err := toFloat(ctx, fn, "x", vals[0])
	if err != nil {
		return nil, err
	}
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil, argError(fn, "x", vals[0], "the value must be a finite number")
	}
	key, err := f.params(ctx, vals[1], vals[2], vals[3])
	if err != nil {
		return nil, err
	}
	clipped, err := mechanisms.ClipScalar(x, key.lo, key.hi)
	if err != nil {
		return nil, err
	}
	return key.mech.AddNoiseScalar(clipped, mechanisms.CryptoSource())
}

// params validates eps, lo and hi and returns the mechanism for them, reusing the last one.
func (f *LDPLaplace) params(ctx *sql.Context, epsv, lov, hiv any) (*laplaceKey, error) {
	const fn = "LDP_LAPLACE"
	eps, err := toEpsilon(ctx, fn, epsv)
	if err != nil {
		return nil, err
	}
	lo, err := toFloat(ctx, fn, "lo", lov)
	if err != nil {
		return nil, err
	}
	hi, err := toFloat(ctx, fn, "hi", hiv)
	if err != nil {
		return nil, err
	}
	if math.IsNaN(lo) || math.IsInf(lo, 0) || math.IsNaN(hi) || math.IsInf(hi, 0) || !(lo < hi) || math.IsInf(hi-lo, 0) {
		return nil, argError(fn, "lo, hi", []float64{lo, hi}, "the clipping range must be finite with lo < hi")
	}
	key := f.last.Load()
	if key == nil || key.eps != eps || key.lo != lo || key.hi != hi {
		mech, err := mechanisms.NewLaplace(hi-lo, eps, 1)
		if err != nil {
			return nil, argError(fn, "eps", epsv, err.Error())
		}
		key = &laplaceKey{eps: eps, lo: lo, hi: hi, mech: mech}
		f.last.Store(key)
	}
	return key, nil
}
