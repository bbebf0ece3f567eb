package udf

import (
	"fmt"

	"github.com/dolthub/go-mysql-server/sql"

	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/udf/boundary"
)

// The parameters of RR_FREQUENCY and PRIVATE_ACCURACY on a protected table, which package boundary
// releases by k-RR (boundary.Aggregate).

// KRRParams implements boundary.Aggregate: RR_FREQUENCY(y, eps, K, class).
func (f *RRFrequency) KRRParams(ctx *sql.Context, params []any, first *boundary.KRRParams) (*boundary.KRRParams, error) {
	return krrParams(ctx, "RR_FREQUENCY", params, first)
}

// KRRInput implements boundary.Aggregate: y is a label in 0..K-1.
func (f *RRFrequency) KRRInput(ctx *sql.Context, v any, k int) (int, error) {
	return krrInput(ctx, "RR_FREQUENCY", v, k)
}

// KRRParams implements boundary.Aggregate: PRIVATE_ACCURACY(correct, eps), K = 2 and class 1.
func (f *PrivateAccuracy) KRRParams(ctx *sql.Context, params []any, first *boundary.KRRParams) (*boundary.KRRParams, error) {
	return krrParams(ctx, "PRIVATE_ACCURACY", params, first)
}

// KRRInput implements boundary.Aggregate: correct is a bit.
func (f *PrivateAccuracy) KRRInput(ctx *sql.Context, v any, k int) (int, error) {
	return krrInput(ctx, "PRIVATE_ACCURACY", v, k)
}

// krrParams checks one row's eps (and, for RR_FREQUENCY, K and class): on the first row (first nil) it
// builds the k-RR; every later row must repeat the first row's values.
func krrParams(ctx *sql.Context, fn string, params []any, first *boundary.KRRParams) (*boundary.KRRParams, error) {
	if first != nil {
		return first, sameKRRParams(ctx, fn, params, first)
	}
	accuracy := fn == "PRIVATE_ACCURACY"
	for _, v := range params {
		if v == nil {
			if accuracy {
				return nil, fmt.Errorf("%s: eps must not be NULL", fn)
			}
			return nil, fmt.Errorf("%s: eps, K and class must not be NULL", fn)
		}
	}
	eps, err := toEpsilon(ctx, fn, params[0])
	if err != nil {
		return nil, err
	}
	k, class := 2, int64(1)
	if !accuracy {
		if k, err = toK(ctx, fn, params[1]); err != nil {
			return nil, err
		}
		if class, err = toInt(ctx, fn, "class", params[2]); err != nil {
			return nil, err
		}
		if class < 0 || class >= int64(k) {
			return nil, argError(fn, "class", params[2], fmt.Sprintf("the class must be in 0..K-1 (K = %d)", k))
		}
	}
	krr, err := mechanisms.NewKRR(eps, k)
	if err != nil {
		return nil, argError(fn, "eps", params[0], err.Error())
	}
	return &boundary.KRRParams{KRR: krr, Class: class, First: params}, nil
}

// sameKRRParams fails unless a later row's parameters repeat the first row's.
func sameKRRParams(ctx *sql.Context, fn string, params []any, first *boundary.KRRParams) error {
	names := []string{"eps", "K", "class"}
	for i, v := range params {
		var same bool
		if i == 0 {
			e, err := toFloat(ctx, fn, names[i], v)
			same = err == nil && e == first.KRR.Epsilon()
		} else {
			x, err := toInt(ctx, fn, names[i], v)
			want := int64(first.KRR.K())
			if i == 2 {
				want = first.Class
			}
			same = err == nil && x == want
		}
		if !same {
			return argError(fn, names[i], v, fmt.Sprintf("must be the same on every row (first row had %v)", first.First[i]))
		}
	}
	return nil
}

// krrInput is the k-RR input for the released argument's value v (neither NULL nor invalid): the bit
// or label, or an error saying why v is not one.
func krrInput(ctx *sql.Context, fn string, v any, k int) (int, error) {
	arg, want := "y", fmt.Sprintf("a label is an integer in 0..K-1 (K = %d)", k)
	if fn == "PRIVATE_ACCURACY" {
		arg, want = "correct", "a correctness bit is 0 or 1"
	}
	x, err := toInt(ctx, fn, arg, v)
	if err == nil && (x < 0 || x >= int64(k)) {
		err = argError(fn, arg, v, want)
	}
	return int(x), err
}
