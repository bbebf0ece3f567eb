package udf

import (
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

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
