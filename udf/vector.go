package udf

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"unsafe"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"

	"github.com/ldpsql/ldpsql/plugins/host"
)

// Vectors travel through SQL as packed little-endian float32 BLOBs (LDP_VECTOR builds them; DuckDB
// stores them compactly) or as JSON arrays of numbers.

// PackVector encodes v as a little-endian float32 BLOB.
func PackVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// UnpackVector decodes a little-endian float32 BLOB.
func UnpackVector(b []byte) ([]float32, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("a packed vector has a multiple of 4 bytes, this one has %d", len(b))
	}
	v := make([]float32, len(b)/4)
	if littleEndianHost {
		// The BLOB's bytes are the float32s' own in memory here: one memmove instead of a decode per
		// value (LDP_ENCODE over a table spends a large part of its host time in this function).
		copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(b)), b)
		return v, nil
	}
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}

// viewVector reads a packed vector without copying where it can: on a little-endian host, with b
// 4-byte aligned (as Go allocates it), the result shares b's memory and must not be modified. LDP_ENCODE
// over a table reads 3 KB per row of 784 features; a copy per row was a tenth of its host time.
func viewVector(b []byte) ([]float32, error) {
	if len(b)%4 != 0 || !littleEndianHost || len(b) == 0 || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%4 != 0 {
		return UnpackVector(b)
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4), nil
}

// littleEndianHost says whether this machine stores numbers little-endian, as packed vectors are.
var littleEndianHost = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// toVector reads a features argument: a packed float32 BLOB or a JSON array of numbers. The result may
// share the BLOB's memory (viewVector): callers read it and never write to it.
func toVector(ctx *sql.Context, fn, arg string, v any) ([]float32, error) {
	v, err := sql.UnwrapAny(ctx, v)
	if err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case []byte:
		vec, err := viewVector(x)
		if err != nil {
			return nil, argError(fn, arg, fmt.Sprintf("BLOB of %d bytes", len(x)), err.Error())
		}
		return vec, nil
	case string:
		return parseJSONVector(fn, arg, x)
	case sql.JSONWrapper:
		s, err := types.JsonToMySqlString(ctx, x)
		if err != nil {
			return nil, err
		}
		return parseJSONVector(fn, arg, s)
	}
	return nil, argError(fn, arg, v, fmt.Sprintf("expected a packed float32 BLOB (LDP_VECTOR(...)) or a JSON array, got %T", v))
}

func parseJSONVector(fn, arg, s string) ([]float32, error) {
	var vals []float64
	if err := json.Unmarshal([]byte(s), &vals); err != nil {
		short := s
		if len(short) > 40 {
			short = short[:40] + "…"
		}
		return nil, argError(fn, arg, short, "not a JSON array of numbers")
	}
	out := make([]float32, len(vals))
	for i, x := range vals {
		out[i] = float32(x)
	}
	return out, nil
}

// checkFinite rejects NaN and ±Inf coordinates, naming the first.
func checkFinite(fn, arg string, v []float32) error {
	if i := host.FirstNonFinite(v); i >= 0 {
		return nonFiniteError(fn, arg, v[i], i)
	}
	return nil
}

func nonFiniteError(fn, arg string, x float32, i int) error {
	return fmt.Errorf("%s: argument %s has a non-finite value %v at index %d", fn, arg, x, i)
}

// formatJSONVector renders a vector as a JSON array.
func formatJSONVector(v []float64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, x := range v {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%g", x)
	}
	b.WriteByte(']')
	return b.String()
}

// LDPVector is LDP_VECTOR(c1, ..., cn): packs numeric values into a little-endian float32 BLOB, the
// compact form LDP_ENCODE takes. A NULL or non-finite value is an error naming its position.
type LDPVector struct{ scalar }

var _ sql.FunctionExpression = (*LDPVector)(nil)

// NewLDPVector builds LDP_VECTOR(c1, ..., cn).
func NewLDPVector(_ *sql.Context, args ...sql.Expression) (sql.Expression, error) {
	if len(args) == 0 {
		return nil, arityError("ldp_vector", "at least 1", 0)
	}
	return &LDPVector{scalar{name: "ldp_vector", args: args}}, nil
}

// Description implements sql.FunctionExpression.
func (f *LDPVector) Description() string {
	return "packs numeric columns into a little-endian float32 BLOB for LDP_ENCODE"
}

// Type implements sql.Expression.
func (f *LDPVector) Type(*sql.Context) sql.Type { return types.LongBlob }

// IsNonDeterministic: packing is deterministic.
func (f *LDPVector) IsNonDeterministic() bool { return false }

// WithChildren implements sql.Expression.
func (f *LDPVector) WithChildren(ctx *sql.Context, children ...sql.Expression) (sql.Expression, error) {
	return NewLDPVector(ctx, children...)
}

// Eval implements sql.Expression.
func (f *LDPVector) Eval(ctx *sql.Context, row sql.Row) (any, error) {
	out := make([]float32, len(f.args))
	for i, a := range f.args {
		v, err := a.Eval(ctx, row)
		if err != nil {
			return nil, err
		}
		if v == nil {
			return nil, fmt.Errorf("LDP_VECTOR: value %d (%s) is NULL", i+1, a)
		}
		x, err := toFloat(ctx, "LDP_VECTOR", fmt.Sprintf("%d", i+1), v)
		if err != nil {
			return nil, err
		}
		if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > math.MaxFloat32 {
			return nil, fmt.Errorf("LDP_VECTOR: value %d (%s) = %v is not a finite float32", i+1, a, x)
		}
		out[i] = float32(x)
	}
	return PackVector(out), nil
}
