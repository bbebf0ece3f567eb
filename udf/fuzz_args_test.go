package udf

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/expression"
	"github.com/dolthub/go-mysql-server/sql/types"
	"github.com/shopspring/decimal"

	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/plugins/sdk"
)

// Fuzz targets for the SQL functions' argument parsing. They call the functions' own expressions
// with literal arguments (what the planner hands them), not a whole engine per input, so that a fuzz
// run tries many thousands of inputs a second; FuzzSQLFunctions (fuzz_sql_test.go) covers the engine.
//
// A fuzzed argument is three values, (kind, text, num), that sqlArg turns into one of the Go types
// GMS passes to a function: float64, int64, string, decimal, uint64, bool, []byte or NULL.

const argKinds = 8

// sqlArg builds a SQL argument value of the Go type kind selects from text and num.
func sqlArg(kind uint8, text string, num float64) any {
	switch kind % argKinds {
	case 0:
		return num
	case 1:
		if num >= math.MinInt64 && num < math.MaxInt64 {
			return int64(num)
		}
		return int64(math.Float64bits(num))
	case 2:
		return text
	case 3:
		if d, err := decimal.NewFromString(text); err == nil {
			return d
		}
		if math.IsNaN(num) || math.IsInf(num, 0) {
			return decimal.Zero
		}
		return decimal.NewFromFloat(num)
	case 4:
		return math.Float64bits(num)
	case 5:
		return num != 0
	case 6:
		return []byte(text)
	}
	return nil
}

// literal wraps v as the planner would: a Literal of v's SQL type.
func literal(v any) sql.Expression {
	var t sql.Type
	switch v.(type) {
	case float64:
		t = types.Float64
	case int64:
		t = types.Int64
	case string:
		t = types.LongText
	case decimal.Decimal:
		t = types.MustCreateDecimalType(65, 30)
	case uint64:
		t = types.Uint64
	case bool:
		t = types.Boolean
	case []byte:
		t = types.LongBlob
	default:
		t = types.Null
	}
	return expression.NewLiteral(v, t)
}

func literals(vals ...any) []sql.Expression {
	out := make([]sql.Expression, len(vals))
	for i, v := range vals {
		out[i] = literal(v)
	}
	return out
}

// checkArgError asserts that err is what a user should see for a bad argument: it names the function
// and carries no trace of a Go runtime failure.
func checkArgError(t *testing.T, fn string, err error) {
	t.Helper()
	msg := err.Error()
	if !strings.HasPrefix(msg, fn+":") {
		t.Fatalf("error does not name %s: %q", fn, msg)
	}
	for _, bad := range []string{"panic", "runtime error", "goroutine ", "nil pointer"} {
		if strings.Contains(msg, bad) {
			t.Fatalf("error reads like a Go failure (%q): %q", bad, msg)
		}
	}
}

func checkEpsilonInRange(t *testing.T, fn string, eps float64) {
	t.Helper()
	if math.IsNaN(eps) || math.IsInf(eps, 0) || eps < mechanisms.MinEpsilon || eps > mechanisms.MaxEpsilon {
		t.Fatalf("%s accepted eps = %v outside [MinEpsilon, MaxEpsilon]", fn, eps)
	}
}

// addArgSeeds adds, to a target taking n fuzzed arguments, one seed per row of vals (each value a
// (kind, text, num) triple); a row's missing arguments are NULL.
func addArgSeeds(f *testing.F, n int, rows ...[]argSeed) {
	for _, row := range rows {
		var seed []any
		for i := range n {
			a := argSeed{kind: 7} // NULL
			if i < len(row) {
				a = row[i]
			}
			seed = append(seed, a.kind, a.text, a.num)
		}
		f.Add(seed...)
	}
}

type argSeed struct {
	kind uint8
	text string
	num  float64
}

func fl(x float64) argSeed  { return argSeed{kind: 0, num: x} }
func in(x float64) argSeed  { return argSeed{kind: 1, num: x} }
func st(s string) argSeed   { return argSeed{kind: 2, text: s} }
func de(s string) argSeed   { return argSeed{kind: 3, text: s} }
func bl(s string) argSeed   { return argSeed{kind: 6, text: s} }
func bo(b bool) argSeed     { return argSeed{kind: 5, num: map[bool]float64{false: 0, true: 1}[b]} }
func nul() argSeed          { return argSeed{kind: 7} }
func u64(x float64) argSeed { return argSeed{kind: 4, num: x} }

func FuzzFlipLabel(f *testing.F) {
	addArgSeeds(f, 3,
		[]argSeed{in(1), fl(1), in(4)},
		[]argSeed{in(0), de("0.5"), st("2")},
		[]argSeed{in(3), fl(64), in(10)},
		[]argSeed{in(3), fl(64.0000001), in(10)},
		[]argSeed{in(1), fl(0x1p-51), in(2)},
		[]argSeed{in(9), fl(1), in(4)},
		[]argSeed{st(" 2 "), st("1e-3"), fl(3)},
		[]argSeed{in(-1), fl(math.Inf(1)), in(4)},
		[]argSeed{in(1), fl(math.NaN()), in(1)},
		[]argSeed{bo(true), fl(1), in(2147483648)},
		[]argSeed{in(1), fl(1), u64(-1)},
		[]argSeed{bl("\x01"), fl(1), in(4)},
		[]argSeed{nul(), fl(1), in(4)},
	)
	ctx := sql.NewEmptyContext()
	f.Fuzz(func(t *testing.T, yk uint8, ys string, yn float64, ek uint8, es string, en float64, kk uint8, ks string, kn float64) {
		y, eps, k := sqlArg(yk, ys, yn), sqlArg(ek, es, en), sqlArg(kk, ks, kn)
		expr, err := NewFlipLabel(ctx, literals(y, eps, k)...)
		if err != nil {
			t.Fatal(err)
		}
		flip := expr.(*FlipLabel)
		out, err := flip.Eval(ctx, nil)
		if err != nil {
			checkArgError(t, "FLIP_LABEL", err)
			return
		}
		if y == nil || eps == nil || k == nil {
			if out != nil {
				t.Fatalf("NULL in, %v out", out)
			}
			return
		}
		krr, err := flip.randomiser(ctx, eps, k)
		if err != nil {
			t.Fatalf("Eval accepted eps = %v, K = %v, randomiser refuses them: %v", eps, k, err)
		}
		checkEpsilonInRange(t, "FLIP_LABEL", krr.Epsilon())
		label, ok := out.(int64)
		if !ok || label < 0 || label >= int64(krr.K()) {
			t.Fatalf("FLIP_LABEL returned %v (%T), want a label in 0..%d", out, out, krr.K()-1)
		}
	})
}

func FuzzLDPLaplace(f *testing.F) {
	addArgSeeds(f, 4,
		[]argSeed{fl(30), fl(0.5), in(18), in(90)},
		[]argSeed{de("1.5"), st("2"), de("-1"), de("1")},
		[]argSeed{fl(1), fl(1), fl(-math.MaxFloat64), fl(math.MaxFloat64)},
		[]argSeed{fl(1), fl(0x1p-50), fl(-1e300), fl(1e300)},
		[]argSeed{fl(1), fl(64), fl(0), fl(5e-324)},
		[]argSeed{fl(1), fl(65), fl(0), fl(1)},
		[]argSeed{fl(1), fl(1), fl(1), fl(1)},
		[]argSeed{fl(math.Inf(-1)), fl(1), fl(0), fl(1)},
		[]argSeed{st("x"), fl(1), fl(0), fl(1)},
		[]argSeed{fl(1), u64(1), bo(false), bo(true)},
		[]argSeed{fl(1), fl(1), fl(0), nul()},
	)
	ctx := sql.NewEmptyContext()
	f.Fuzz(func(t *testing.T, xk uint8, xs string, xn float64, ek uint8, es string, en float64,
		lk uint8, ls string, ln float64, hk uint8, hs string, hn float64) {
		x, eps, lo, hi := sqlArg(xk, xs, xn), sqlArg(ek, es, en), sqlArg(lk, ls, ln), sqlArg(hk, hs, hn)
		expr, err := NewLDPLaplace(ctx, literals(x, eps, lo, hi)...)
		if err != nil {
			t.Fatal(err)
		}
		lap := expr.(*LDPLaplace)
		out, err := lap.Eval(ctx, nil)
		if err != nil {
			checkArgError(t, "LDP_LAPLACE", err)
			return
		}
		if x == nil || eps == nil || lo == nil || hi == nil {
			if out != nil {
				t.Fatalf("NULL in, %v out", out)
			}
			return
		}
		key, err := lap.params(ctx, eps, lo, hi)
		if err != nil {
			t.Fatalf("Eval accepted eps = %v, lo = %v, hi = %v, params refuses them: %v", eps, lo, hi, err)
		}
		checkEpsilonInRange(t, "LDP_LAPLACE", key.eps)
		if !(key.lo < key.hi) || math.IsInf(key.hi-key.lo, 0) {
			t.Fatalf("accepted the range [%v, %v]", key.lo, key.hi)
		}
		if v, ok := out.(float64); !ok || math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("LDP_LAPLACE returned %v (%T), want a finite number", out, out)
		}
	})
}

func FuzzLDPVector(f *testing.F) {
	f.Add(uint8(3), uint8(0), "", 0.1, uint8(1), "", 7.0, uint8(3), "0.3", 0.0)
	f.Add(uint8(1), uint8(2), " 1e38 ", 0.0, uint8(7), "", 0.0, uint8(7), "", 0.0)
	f.Add(uint8(2), uint8(0), "", 3.5e38, uint8(0), "", -3.4e38, uint8(0), "", 0.0)
	f.Add(uint8(2), uint8(0), "", math.NaN(), uint8(2), "abc", 0.0, uint8(6), "\x00\x01", 0.0)
	f.Add(uint8(3), uint8(5), "", 1.0, uint8(4), "", 1.0, uint8(3), "1e-50", 1e-50)
	ctx := sql.NewEmptyContext()
	f.Fuzz(func(t *testing.T, n uint8, ak uint8, as string, an float64, bk uint8, bs string, bn float64, ck uint8, cs string, cn float64) {
		vals := []any{sqlArg(ak, as, an), sqlArg(bk, bs, bn), sqlArg(ck, cs, cn)}[:1+int(n%3)]
		expr, err := NewLDPVector(ctx, literals(vals...)...)
		if err != nil {
			t.Fatal(err)
		}
		out, err := expr.Eval(ctx, nil)
		if err != nil {
			checkArgError(t, "LDP_VECTOR", err)
			return
		}
		blob, ok := out.([]byte)
		if !ok || len(blob) != 4*len(vals) {
			t.Fatalf("LDP_VECTOR of %d values returned %v (%T)", len(vals), out, out)
		}
		vec, err := UnpackVector(blob)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			want, err := toFloat(ctx, "LDP_VECTOR", "", v)
			if err != nil {
				t.Fatalf("value %d = %v was packed but is not a number: %v", i+1, v, err)
			}
			if got := vec[i]; float32(want) != got || math.IsInf(float64(got), 0) || got != got {
				t.Fatalf("value %d = %v packed as %v", i+1, v, got)
			}
		}
	})
}

// FuzzVectorArgument decodes a features argument given as a BLOB and as text (JSON).
func FuzzVectorArgument(f *testing.F) {
	f.Add(PackVector([]float32{0.1, 0.7, 0.3}))
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3})
	f.Add(PackVector([]float32{float32(math.NaN()), float32(math.Inf(-1))}))
	f.Add([]byte("[0.1, 0.7, 0.3]"))
	f.Add([]byte("[1e39, -1e-50]"))
	f.Add([]byte(`{"a": 1}`))
	f.Add([]byte("null"))
	ctx := sql.NewEmptyContext()
	f.Fuzz(func(t *testing.T, b []byte) {
		const fn, arg = "LDP_ENCODE", "features"
		vec, err := UnpackVector(b)
		if (err != nil) != (len(b)%4 != 0) {
			t.Fatalf("UnpackVector of %d bytes: err = %v", len(b), err)
		}
		if err == nil && !bytes.Equal(PackVector(vec), b) {
			t.Fatalf("UnpackVector then PackVector changed %x into %x", b, PackVector(vec))
		}
		view, err := toVector(ctx, fn, arg, b)
		if err != nil {
			checkArgError(t, fn, err)
			if len(b)%4 == 0 {
				t.Fatalf("a BLOB of %d bytes refused: %v", len(b), err)
			}
		} else if !bytes.Equal(PackVector(view), b) {
			t.Fatalf("toVector read %x as %v", b, view)
		}
		fromJSON, err := toVector(ctx, fn, arg, string(b))
		if err != nil {
			checkArgError(t, fn, err)
			return
		}
		var want []float64
		if err := json.Unmarshal(b, &want); err != nil || len(want) != len(fromJSON) {
			t.Fatalf("toVector accepted %q, which is not a JSON array of %d numbers (%v)", b, len(fromJSON), err)
		}
		for i := range want {
			if float32(want[i]) != fromJSON[i] {
				t.Fatalf("JSON value %d = %v read as %v", i, want[i], fromJSON[i])
			}
		}
	})
}

// FuzzAccuracyFunctions runs LDP_ACCURACY_BOUND(eps, K), PRIVATE_ACCURACY(correct, eps) and
// RR_FREQUENCY(y, eps, K, class) over one row.
func FuzzAccuracyFunctions(f *testing.F) {
	addArgSeeds(f, 4,
		[]argSeed{in(1), fl(7), in(10), in(1)},
		[]argSeed{bo(true), fl(1), in(2), in(0)},
		[]argSeed{in(0), fl(1e300), in(2), in(1)},
		[]argSeed{in(0), fl(700), in(4), in(3)},
		[]argSeed{in(0), fl(0x1p-60), in(2147483647), in(0)},
		[]argSeed{in(3), fl(1), in(3), in(3)},
		[]argSeed{in(2), st("1"), de("4"), st("2")},
		[]argSeed{nul(), fl(1), in(4), in(0)},
		[]argSeed{in(1), fl(0), in(4), in(0)},
	)
	ctx := sql.NewEmptyContext()
	f.Fuzz(func(t *testing.T, yk uint8, ys string, yn float64, ek uint8, es string, en float64,
		kk uint8, ks string, kn float64, ck uint8, cs string, cn float64) {
		y, eps, k, class := sqlArg(yk, ys, yn), sqlArg(ek, es, en), sqlArg(kk, ks, kn), sqlArg(ck, cs, cn)

		bound, _ := NewLDPAccuracyBound(ctx, literals(eps, k)...)
		out, err := bound.Eval(ctx, nil)
		if err != nil {
			checkArgError(t, "LDP_ACCURACY_BOUND", err)
		} else if out != nil {
			kv, _ := toK(ctx, "", k)
			a, ok := out.(float64)
			if !ok || !(a >= 1/float64(kv)-1e-12 && a <= 1) {
				t.Fatalf("LDP_ACCURACY_BOUND(%v, %v) = %v, want an accuracy in [1/K, 1]", eps, k, out)
			}
		}

		checkShare := func(fn string, agg sql.Expression) {
			t.Helper()
			buf, err := agg.(sql.Aggregation).NewBuffer(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := buf.Update(ctx, nil); err != nil {
				checkArgError(t, fn, err)
				return
			}
			out, err := buf.Eval(ctx)
			if err != nil {
				t.Fatalf("%s accepted its row and then failed: %v", fn, err)
			}
			if s, ok := out.(float64); out != nil && (!ok || !(s >= 0 && s <= 1)) {
				t.Fatalf("%s = %v, want a share in [0, 1] or NULL", fn, out)
			}
		}
		acc, err := NewPrivateAccuracy(ctx, literals(y, eps)...)
		if err != nil {
			t.Fatal(err)
		}
		checkShare("PRIVATE_ACCURACY", acc)
		freq, err := NewRRFrequency(ctx, literals(y, eps, k, class)...)
		if err != nil {
			t.Fatal(err)
		}
		checkShare("RR_FREQUENCY", freq)
	})
}

// FuzzLDPUnitKey runs LDP_UNIT_KEY(a) and LDP_UNIT_KEY(a, b): NULL exactly when a value is NULL,
// otherwise a non-empty text, the same on every call, and for two values a JSON array of the two single
// keys.
func FuzzLDPUnitKey(f *testing.F) {
	addArgSeeds(f, 2,
		[]argSeed{in(7), st("alice")},
		[]argSeed{de("12.50"), bl("\x00\xff")},
		[]argSeed{fl(1.0 / 3), u64(math.MaxUint64)},
		[]argSeed{st(""), bo(true)},
		[]argSeed{st("[\"a\",\"b\"]"), fl(math.Inf(-1))},
		[]argSeed{nul(), in(1)},
	)
	ctx := sql.NewEmptyContext()
	key := func(t *testing.T, vals ...any) any {
		t.Helper()
		fn, err := NewLDPUnitKey(ctx, literals(vals...)...)
		if err != nil {
			t.Fatal(err)
		}
		out, err := fn.Eval(ctx, nil)
		if err != nil {
			t.Fatalf("LDP_UNIT_KEY(%v): %v", vals, err)
		}
		if again, _ := fn.Eval(ctx, nil); again != out {
			t.Fatalf("LDP_UNIT_KEY(%v) = %v, then %v", vals, out, again)
		}
		return out
	}
	f.Fuzz(func(t *testing.T, ak uint8, as string, an float64, bk uint8, bs string, bn float64) {
		a, b := sqlArg(ak, as, an), sqlArg(bk, bs, bn)
		ka, kb, kab := key(t, a), key(t, b), key(t, a, b)
		if (ka == nil) != (a == nil) || (kab == nil) != (a == nil || b == nil) {
			t.Fatalf("LDP_UNIT_KEY(%v) = %v, LDP_UNIT_KEY(%v, %v) = %v: NULL exactly when a value is", a, ka, a, b, kab)
		}
		// A string column holds valid UTF-8 only (the server refuses other bytes, 1366); JSON would write
		// invalid bytes as U+FFFD.
		if kab == nil || !utf8.ValidString(ka.(string)) || !utf8.ValidString(kb.(string)) {
			return
		}
		var parts []string
		if err := json.Unmarshal([]byte(kab.(string)), &parts); err != nil || len(parts) != 2 || parts[0] != ka || parts[1] != kb {
			t.Fatalf("LDP_UNIT_KEY(%v, %v) = %v, want the JSON array of %q and %q", a, b, kab, ka, kb)
		}
	})
}

// FuzzRecordedOutputSet reads a mechanism's description as the catalog records it (JSON) and clips a
// vector into its output set, as every LDP_ENCODE does before adding noise.
func FuzzRecordedOutputSet(f *testing.F) {
	seed := func(d sdk.Description, h ...float64) {
		b, err := json.Marshal(d)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, float64Bytes(h))
	}
	seed(sdk.Description{Name: "pca", InputDim: 3, OutputDim: 2, OutputSet: sdk.L1Ball(5)}, 4, -4)
	seed(sdk.Description{Name: "id", InputDim: 2, OutputDim: 2, OutputSet: sdk.Box([]float64{0, -1}, []float64{1, 1})}, 3, 0.5)
	seed(sdk.Description{Name: "flat", InputDim: 2, OutputDim: 2, OutputSet: sdk.Box([]float64{0, 1}, []float64{0, 2})}, 3, 0.5)
	seed(sdk.Description{Name: "tiny", InputDim: 1, OutputDim: 1, OutputSet: sdk.L1Ball(5e-324)}, 1e308)
	seed(sdk.Description{Name: "huge", InputDim: 2, OutputDim: 2, OutputSet: sdk.L1Ball(math.MaxFloat64)}, math.MaxFloat64, math.MaxFloat64)
	seed(sdk.Description{Name: "unfitted", InputDim: 2})
	f.Add([]byte(`{"OutputDim": 2, "OutputSet": {"Kind": 2, "Lo": [0], "Hi": [1, 2]}}`), []byte{})
	f.Add([]byte(`{"OutputDim": 1, "OutputSet": {"Kind": 9}}`), []byte{})
	f.Fuzz(func(t *testing.T, recorded, hBytes []byte) {
		var d sdk.Description
		if json.Unmarshal(recorded, &d) != nil {
			return
		}
		set, err := outputSet(d)
		if err != nil || set.Validate() != nil || set.Dim() > 1<<16 {
			return // refused before any row is released (randomiser and Clip validate the set)
		}
		h := make([]float64, set.Dim())
		src := bytesFloat64s(hBytes)
		for i := range h {
			if len(src) > 0 {
				h[i] = src[i%len(src)]
			}
		}
		clipped, err := set.Clip(h)
		if finite := !slices.ContainsFunc(h, func(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) }); (err == nil) != finite {
			t.Fatalf("Clip(%v) into %+v: %v", h, d.OutputSet, err)
		}
		if err != nil {
			return
		}
		if !set.Contains(clipped) {
			t.Fatalf("Clip(%v) = %v is outside %+v", h, clipped, d.OutputSet)
		}
	})
}

func float64Bytes(v []float64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
	}
	return b
}

func bytesFloat64s(b []byte) []float64 {
	out := make([]float64, len(b)/8)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}
