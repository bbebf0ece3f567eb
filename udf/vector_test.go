package udf

import (
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

// naiveFinite is the definition allFinite must agree with.
func naiveFinite(v []float32) bool {
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return false
		}
	}
	return true
}

func TestAllFiniteEdgeValues(t *testing.T) {
	bad := []uint32{0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xffffffff, 0x7fffffff}
	good := []uint32{0, 0x80000000, 0x00000001, 0x807fffff, 0x7f7fffff, 0xff7fffff, 0x3f800000, 0x00800000, 0x7f000000}
	backing := make([]float32, 12)
	// Every length up to 11, both 8-byte-aligned and misaligned starts (the word path and the tail
	// path), every position for every bad value, on a background of every good value.
	for _, start := range []int{0, 1} {
		for n := 0; n+start <= len(backing); n++ {
			v := backing[start : start+n]
			for _, g := range good {
				for i := range v {
					v[i] = math.Float32frombits(g)
				}
				if !allFinite(v) {
					t.Fatalf("start %d len %d: all %#x reported non-finite", start, n, g)
				}
				for pos := range v {
					for _, b := range bad {
						v[pos] = math.Float32frombits(b)
						if allFinite(v) {
							t.Fatalf("start %d len %d: %#x at %d on %#x reported finite", start, n, b, pos, g)
						}
						v[pos] = math.Float32frombits(g)
					}
				}
			}
		}
	}
}

func TestAllFiniteRandomBits(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	v := make([]float32, 3)
	for trial := 0; trial < 1_000_000; trial++ {
		for i := range v {
			// Bias towards the exponent extremes, where mistakes would be.
			bits := rng.Uint32()
			switch rng.Intn(4) {
			case 0:
				bits |= 0x7f800000
			case 1:
				bits = bits&^0x7f800000 | 0x7f000000 | uint32(rng.Intn(2))<<23
			}
			v[i] = math.Float32frombits(bits)
		}
		for _, s := range [][]float32{v, v[1:], v[:2]} {
			if allFinite(s) != naiveFinite(s) {
				t.Fatalf("allFinite(%#x) = %v", s, allFinite(s))
			}
		}
	}
}

func TestViewVector(t *testing.T) {
	want := []float32{1.5, -2, float32(math.Inf(1)), 3e-40}
	b := PackVector(want)
	v, err := viewVector(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if math.Float32bits(v[i]) != math.Float32bits(want[i]) {
			t.Fatalf("value %d: %v, want %v", i, v[i], want[i])
		}
	}
	if littleEndianHost && unsafe.Pointer(unsafe.SliceData(v)) != unsafe.Pointer(unsafe.SliceData(b)) {
		t.Error("an aligned BLOB was copied on a little-endian host")
	}
	// A misaligned BLOB is copied, with the same values.
	shifted := append([]byte{0}, b...)[1:]
	v, err = viewVector(shifted)
	if err != nil {
		t.Fatal(err)
	}
	if unsafe.Pointer(unsafe.SliceData(v)) == unsafe.Pointer(unsafe.SliceData(shifted)) {
		t.Error("a misaligned BLOB was viewed in place")
	}
	for i := range want {
		if math.Float32bits(v[i]) != math.Float32bits(want[i]) {
			t.Fatalf("misaligned value %d: %v, want %v", i, v[i], want[i])
		}
	}
	if _, err := viewVector(b[:7]); err == nil {
		t.Error("a 7-byte BLOB was accepted")
	}
	if v, err := viewVector(nil); err != nil || len(v) != 0 {
		t.Errorf("empty BLOB: %v, %v", v, err)
	}
}

// BenchmarkUnpackAndCheck4096 is the host's per-batch work on LDP_ENCODE's input: 4,096 rows of 784
// features read from their BLOBs and checked finite.
//
//	go test -run '^$' -bench UnpackAndCheck4096 ./udf/
func BenchmarkUnpackAndCheck4096(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	blobs := make([][]byte, 4096)
	for i := range blobs {
		v := make([]float32, 784)
		for j := range v {
			v[j] = rng.Float32()
		}
		blobs[i] = PackVector(v)
	}
	for i := 0; i < b.N; i++ {
		for _, bl := range blobs {
			v, err := viewVector(bl)
			if err != nil {
				b.Fatal(err)
			}
			if err := checkFinite("f", "features", v); err != nil {
				b.Fatal(err)
			}
		}
	}
}
