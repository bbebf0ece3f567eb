package udf

import (
	"math"
	"sync/atomic"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"

	"github.com/ldpsql/ldpsql/mechanisms"
)

// LDPLaplace is LDP_LAPLACE(x, eps, lo, hi): x is clipped to [lo, hi] and secure Laplace noise of scale
// (hi−lo)/eps is added, on a grid so that floating-point artefacts reveal nothing (the Mironov attack).
// The release is eps-LDP for x whatever x is. NULL in gives NULL out.
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

// NewLDPLaplace builds LDP_LAPLACE(x, eps, lo, hi).
func NewLDPLaplace(_ *sql.Context, args ...sql.Expression) (sql.Expression, error) {
	f := &LDPLaplace{scalar: scalar{name: "ldp_laplace", args: args}}
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
	vals, err := evalArgs(ctx, row, f.args)
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
	eps, err := toEpsilon(ctx, fn, vals[1])
	if err != nil {
		return nil, err
	}
	lo, err := toFloat(ctx, fn, "lo", vals[2])
	if err != nil {
		return nil, err
	}
	hi, err := toFloat(ctx, fn, "hi", vals[3])
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
			return nil, argError(fn, "eps", vals[1], err.Error())
		}
		key = &laplaceKey{eps: eps, lo: lo, hi: hi, mech: mech}
		f.last.Store(key)
	}
	clipped, err := mechanisms.ClipScalar(x, lo, hi)
	if err != nil {
		return nil, err
	}
	return key.mech.AddNoiseScalar(clipped, mechanisms.CryptoSource())
}
