package ldpv1

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// NewMatrix packs rows, each of length cols, into a row-major Matrix: one
// copy, straight into Values. An empty rows gives a 0×cols matrix.
func NewMatrix(rows [][]float32, cols int) (*Matrix, error) {
	vals, err := AppendRows(nil, rows, cols)
	if err != nil {
		return nil, err
	}
	return &Matrix{Rows: uint32(len(rows)), Cols: uint32(cols), Values: vals}, nil
}

// AppendRows appends rows, each of length cols, to dst in the encoding of
// Matrix.Values (little-endian float32, row after row) and returns the
// extended slice; with dst = buf[:0] it reuses buf. On error dst is returned
// unchanged.
func AppendRows(dst []byte, rows [][]float32, cols int) ([]byte, error) {
	if cols < 0 || uint64(cols) > 1<<31 {
		return dst, fmt.Errorf("matrix: bad column count %d", cols)
	}
	for i, r := range rows {
		if len(r) != cols {
			return dst, fmt.Errorf("matrix: row %d has %d columns, want %d", i, len(r), cols)
		}
	}
	n := uint64(len(rows)) * uint64(cols) * 4
	if n > math.MaxInt32 {
		return dst, fmt.Errorf("matrix: %d×%d is too large (%d bytes)", len(rows), cols, n)
	}
	off := len(dst)
	dst = grow(dst, int(n))
	rowBytes := 4 * cols
	for _, r := range rows {
		putFloats(dst[off:off+rowBytes], r)
		off += rowBytes
	}
	return dst, nil
}

// grow returns dst extended by n bytes, which the caller overwrites.
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst[:len(dst)+n]
	}
	// No append: it would zero (and maybe copy) more than it must.
	out := make([]byte, len(dst)+n)
	copy(out, dst)
	return out
}

// RowViews checks that len(Values) == 4*Rows*Cols and returns the rows. On a
// little-endian machine they are views of Values (no copy) when Values is
// 4-byte aligned, as buffers from the Go allocator are; otherwise they are
// decoded into one new slice. A nil Matrix is an error.
func (m *Matrix) RowViews() ([][]float32, error) {
	if m == nil {
		return nil, fmt.Errorf("matrix: missing")
	}
	n, c := int(m.Rows), int(m.Cols)
	if want := uint64(m.Rows) * uint64(m.Cols); len(m.Values)%4 != 0 || want != uint64(len(m.Values)/4) {
		return nil, fmt.Errorf("matrix: %d×%d needs %d values (%d bytes), got %d bytes", n, c, want, 4*want, len(m.Values))
	}
	if c == 0 && n > 0 { // nothing bounds n then; no encoder has 0 columns
		return nil, fmt.Errorf("matrix: %d rows of 0 columns", n)
	}
	vals := viewFloats(m.Values)
	out := make([][]float32, n)
	for i := range out {
		out[i] = vals[i*c : (i+1)*c : (i+1)*c]
	}
	return out, nil
}

// nativeLE reports whether float32s are stored little-endian in memory, so
// that Matrix.Values and []float32 share a layout.
var nativeLE = binary.NativeEndian.Uint32([]byte{1, 0, 0, 0}) == 1

// putFloats writes src into dst (4*len(src) bytes) little-endian.
func putFloats(dst []byte, src []float32) {
	if len(src) == 0 {
		return
	}
	if nativeLE {
		copy(dst, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(src))), 4*len(src)))
		return
	}
	putFloatsPortable(dst, src)
}

func putFloatsPortable(dst []byte, src []float32) {
	_ = dst[4*len(src)-1]
	for k, v := range src {
		binary.LittleEndian.PutUint32(dst[4*k:], math.Float32bits(v))
	}
}

// viewFloats returns the float32s that b (a multiple of 4 bytes) encodes: b
// itself where the layout allows, else a decoded copy.
func viewFloats(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if nativeLE && uintptr(p)%unsafe.Alignof(float32(0)) == 0 {
		return unsafe.Slice((*float32)(p), len(b)/4)
	}
	return decodeFloats(b)
}

func decodeFloats(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for k := range out {
		out[k] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*k:]))
	}
	return out
}
