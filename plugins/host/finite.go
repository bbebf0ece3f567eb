package host

import (
	"errors"
	"fmt"
	"math"
	"unsafe"
)

// ErrNonFiniteInput: a row passed to Encode or Decode holds NaN or ±Inf. Nothing was sent to the
// plugin. The error is a *NonFiniteInputError.
var ErrNonFiniteInput = errors.New("input holds a non-finite value")

// NonFiniteInputError names the first non-finite input value of an Encode or Decode call.
type NonFiniteInputError struct {
	Row, Index int // of the rows passed to the call
	Value      float32
}

func (e *NonFiniteInputError) Error() string {
	return fmt.Sprintf("row %d has a non-finite value %v at index %d (plugins get finite values only)", e.Row, e.Value, e.Index)
}

// Is makes errors.Is(err, ErrNonFiniteInput) true.
func (e *NonFiniteInputError) Is(target error) bool { return target == ErrNonFiniteInput }

// FirstNonFinite returns the index of the first NaN or ±Inf in v, or -1 when every value is finite.
//
// A float32 is non-finite when its 8 exponent bits are all set; adding 1 to the exponent field then
// carries into the sign bit. Done on two values per 64-bit word (the low field cannot carry into the
// high one: it stops at bit 31), OR-ed over the vector and the sign bits tested once at the end, the
// test costs three instructions per pair; only a vector that fails it is searched value by value.
func FirstNonFinite(v []float32) int {
	const (
		exponents = 0x7f800000_7f800000
		ones      = 0x00800000_00800000
		signs     = 0x80000000_80000000
	)
	n := len(v) &^ 7
	var acc uint64
	if n > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(v)))%8 == 0 {
		// Four words per step into four sums, so that the steps do not wait on each other.
		words := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(v))), n/2)
		var a0, a1, a2, a3 uint64
		for i := 0; i+4 <= len(words); i += 4 {
			w := words[i : i+4 : i+4]
			a0 |= w[0]&exponents + ones
			a1 |= w[1]&exponents + ones
			a2 |= w[2]&exponents + ones
			a3 |= w[3]&exponents + ones
		}
		acc = (a0 | a1 | a2 | a3) & signs
	} else {
		n = 0
	}
	for _, x := range v[n:] {
		acc |= uint64((math.Float32bits(x)&0x7f800000 + 0x00800000) & 0x80000000)
	}
	if acc == 0 {
		return -1
	}
	for i, x := range v {
		if math.Float32bits(x)&0x7f800000 == 0x7f800000 {
			return i
		}
	}
	return -1 // not reached
}

// checkRowsFinite is the input check of a gRPC call, which has no copy to fuse it with: the first
// non-finite value of rows, numbered from first.
func checkRowsFinite(rows [][]float32, first int) error {
	for i, r := range rows {
		if j := FirstNonFinite(r); j >= 0 {
			return &NonFiniteInputError{Row: first + i, Index: j, Value: r[j]}
		}
	}
	return nil
}
