package udf

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/expression"
	"github.com/shopspring/decimal"
)

// argError is the error for an invalid argument: it names the function, the argument and the value.
func argError(fn, arg string, v any, want string) error {
	return fmt.Errorf("%s: argument %s = %v is invalid: %s", fn, arg, describe(v), want)
}

func describe(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case []byte:
		return fmt.Sprintf("x'%x'", x)
	}
	return fmt.Sprint(v)
}

// toFloat converts a SQL numeric (or numeric string) argument to float64.
func toFloat(ctx *sql.Context, fn, arg string, v any) (float64, error) {
	v, err := sql.UnwrapAny(ctx, v)
	if err != nil {
		return 0, err
	}
	switch x := v.(type) {
	case float64:
		return x, nil
	case float32:
		return float64(x), nil
	case int:
		return float64(x), nil
	case int8:
		return float64(x), nil
	case int16:
		return float64(x), nil
	case int32:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case uint8:
		return float64(x), nil
	case uint16:
		return float64(x), nil
	case uint32:
		return float64(x), nil
	case uint64:
		return float64(x), nil
	case decimal.Decimal:
		f, _ := x.Float64()
		return f, nil
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return 0, argError(fn, arg, v, "not a number")
		}
		return f, nil
	}
	return 0, argError(fn, arg, v, fmt.Sprintf("expected a number, got %T", v))
}

// toInt converts a SQL integer argument to int64. Non-integral numbers are rejected, never rounded.
func toInt(ctx *sql.Context, fn, arg string, v any) (int64, error) {
	v, err := sql.UnwrapAny(ctx, v)
	if err != nil {
		return 0, err
	}
	switch x := v.(type) {
	case int:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case int64:
		return x, nil
	case uint8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint64:
		if x > math.MaxInt64 {
			return 0, argError(fn, arg, v, "out of range")
		}
		return int64(x), nil
	case bool:
		if x {
			return 1, nil
		}
		return 0, nil
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		if err != nil {
			return 0, argError(fn, arg, v, "not an integer")
		}
		return n, nil
	}
	f, err := toFloat(ctx, fn, arg, v)
	if err != nil {
		return 0, err
	}
	if f != math.Trunc(f) || math.IsInf(f, 0) || math.Abs(f) > 1<<53 {
		return 0, argError(fn, arg, v, "not an integer")
	}
	return int64(f), nil
}

// toEpsilon converts and checks a privacy parameter: finite and > 0.
func toEpsilon(ctx *sql.Context, fn string, v any) (float64, error) {
	eps, err := toFloat(ctx, fn, "eps", v)
	if err != nil {
		return 0, err
	}
	if math.IsNaN(eps) || math.IsInf(eps, 0) || eps <= 0 {
		return 0, argError(fn, "eps", v, "the privacy parameter must be a finite number > 0")
	}
	return eps, nil
}

// toK converts and checks a number of classes.
func toK(ctx *sql.Context, fn string, v any) (int, error) {
	k, err := toInt(ctx, fn, "K", v)
	if err != nil {
		return 0, err
	}
	if k < 2 || k > math.MaxInt32 {
		return 0, argError(fn, "K", v, "the number of classes must be an integer ≥ 2")
	}
	return int(k), nil
}

// literalArgs returns the values of expressions that are non-NULL literals (constants, including bind
// parameters after binding), so a function can validate them once instead of on every row.
func literalArgs(exprs ...sql.Expression) (vals []any, ok bool) {
	for _, e := range exprs {
		lit, isLit := e.(*expression.Literal)
		if !isLit || lit.Value() == nil {
			return nil, false
		}
		vals = append(vals, lit.Value())
	}
	return vals, true
}

// evalArgs evaluates every argument expression against the row.
func evalArgs(ctx *sql.Context, row sql.Row, args []sql.Expression) ([]any, error) {
	vals := make([]any, len(args))
	for i, a := range args {
		v, err := a.Eval(ctx, row)
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	return vals, nil
}

func hasNull(vals []any) bool {
	for _, v := range vals {
		if v == nil {
			return true
		}
	}
	return false
}
