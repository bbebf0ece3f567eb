package ldpv1

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// odd are float32s whose bits must survive the trip: NaNs with payloads
// and both signs, infinities, -0, subnormals.
var odd = []float32{
	math.Float32frombits(0x7fc00001), math.Float32frombits(0xffa00000), math.Float32frombits(0x7f800001),
	float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1)),
	math.Float32frombits(1), -math.MaxFloat32, 1.5, -2.25,
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func TestMatrixRoundTripKeepsBits(t *testing.T) {
	rows := [][]float32{odd[:5], odd[5:]}
	m, err := NewMatrix(rows, 5)
	if err != nil {
		t.Fatal(err)
	}
	if m.Rows != 2 || m.Cols != 5 || len(m.Values) != 40 {
		t.Fatalf("matrix %d×%d, %d bytes", m.Rows, m.Cols, len(m.Values))
	}
	// The encoding is little-endian IEEE 754, whatever the machine.
	for k, v := range odd {
		if got := uint32(m.Values[4*k]) | uint32(m.Values[4*k+1])<<8 | uint32(m.Values[4*k+2])<<16 | uint32(m.Values[4*k+3])<<24; got != math.Float32bits(v) {
			t.Fatalf("value %d: bytes %x, want %08x", k, m.Values[4*k:4*k+4], math.Float32bits(v))
		}
	}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var back Matrix
	if err := proto.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	got, err := back.RowViews()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !sameBits(got[0], rows[0]) || !sameBits(got[1], rows[1]) {
		t.Fatalf("round trip: %v, want %v", got, rows)
	}
	if cap(got[0]) != 5 {
		t.Errorf("row view capacity %d, want 5 (appending must not overwrite the next row)", cap(got[0]))
	}
}

// A Matrix from before values became bytes (repeated float, packed) has the
// same bytes on the wire.
func TestMatrixWireCompatibleWithPackedFloats(t *testing.T) {
	var packed []byte
	for _, v := range odd {
		packed = protowire.AppendFixed32(packed, math.Float32bits(v))
	}
	var old []byte
	old = protowire.AppendTag(old, 1, protowire.VarintType)
	old = protowire.AppendVarint(old, 2)
	old = protowire.AppendTag(old, 2, protowire.VarintType)
	old = protowire.AppendVarint(old, 5)
	old = protowire.AppendTag(old, 3, protowire.BytesType)
	old = protowire.AppendBytes(old, packed)

	m, err := NewMatrix([][]float32{odd[:5], odd[5:]}, 5)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, old) {
		t.Fatalf("wire bytes\n%x\nwant (packed repeated float)\n%x", b, old)
	}
}

func TestMatrixErrors(t *testing.T) {
	if _, err := NewMatrix([][]float32{{1, 2}, {3}}, 2); err == nil || !strings.Contains(err.Error(), "row 1 has 1 columns, want 2") {
		t.Errorf("ragged rows: %v", err)
	}
	if _, err := NewMatrix(nil, -1); err == nil {
		t.Error("negative column count accepted")
	}
	m, err := NewMatrix(nil, 7)
	if err != nil || m.Rows != 0 || m.Cols != 7 || len(m.Values) != 0 {
		t.Errorf("empty: %v %v", m, err)
	}
	if rows, err := m.RowViews(); err != nil || len(rows) != 0 {
		t.Errorf("empty RowViews: %v %v", rows, err)
	}
	var nilm *Matrix
	if _, err := nilm.RowViews(); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("nil matrix: %v", err)
	}
	for _, n := range []int{7, 5, 0} { // short, not whole float32s, empty
		m := &Matrix{Rows: 1, Cols: 2, Values: make([]byte, n)}
		if _, err := m.RowViews(); err == nil || !strings.Contains(err.Error(), "needs 2 values (8 bytes)") {
			t.Errorf("%d bytes for 1×2: %v", n, err)
		}
	}
	for _, m := range []*Matrix{{Rows: 1 << 31, Cols: 1 << 31}, {Rows: math.MaxUint32, Cols: 0}} {
		if _, err := m.RowViews(); err == nil {
			t.Errorf("%d×%d with no values accepted", m.Rows, m.Cols)
		}
	}
}

func TestAppendRowsReusesBuffer(t *testing.T) {
	buf := make([]byte, 3, 64)
	out, err := AppendRows(buf, [][]float32{{1, 2}, {3, 4}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 3+16 || &out[0] != &buf[0] {
		t.Fatalf("len %d, same buffer %v", len(out), &out[0] == &buf[0])
	}
	if out2, err := AppendRows(out, [][]float32{{1}}, 2); err == nil || len(out2) != len(out) {
		t.Errorf("bad row: %v, len %d → %d", err, len(out), len(out2))
	}
}

// The portable (big-endian) paths agree with the little-endian fast paths,
// and a misaligned Values is decoded rather than viewed.
func TestPortablePathsAndAlignment(t *testing.T) {
	fast := make([]byte, 4*len(odd))
	putFloats(fast, odd)
	slow := make([]byte, 4*len(odd))
	putFloatsPortable(slow, odd)
	if !bytes.Equal(fast, slow) {
		t.Fatalf("putFloats %x, portable %x", fast, slow)
	}
	if !sameBits(decodeFloats(fast), odd) {
		t.Fatal("decodeFloats")
	}
	raw := make([]byte, 1+len(fast))
	copy(raw[1:], fast)
	mis := raw[1:]
	m := &Matrix{Rows: 2, Cols: 5, Values: mis}
	rows, err := m.RowViews()
	if err != nil {
		t.Fatal(err)
	}
	if !sameBits(append(rows[0], rows[1]...), odd) {
		t.Fatalf("misaligned: %v", rows)
	}
	if uintptr(unsafe.Pointer(&rows[0][0]))%4 != 0 {
		t.Error("misaligned float32 view")
	}
	if nativeLE {
		al := &Matrix{Rows: 2, Cols: 5, Values: fast}
		rows, _ := al.RowViews()
		if unsafe.Pointer(&rows[0][0]) != unsafe.Pointer(&fast[0]) {
			t.Error("aligned Values on a little-endian machine was copied, not viewed")
		}
	}
}
