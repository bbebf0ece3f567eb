package host

import (
	"context"
	"errors"
	"math"
	"math/rand"
	randv2 "math/rand/v2"
	"testing"

	"github.com/ldpsql/ldpsql/plugins/builtin/pca/pcaenc"
)

// naiveFirstNonFinite is the definition FirstNonFinite must agree with.
func naiveFirstNonFinite(v []float32) int {
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return i
		}
	}
	return -1
}

func TestFirstNonFiniteEdgeValues(t *testing.T) {
	bad := []uint32{0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xffffffff, 0x7fffffff}
	good := []uint32{0, 0x80000000, 0x00000001, 0x807fffff, 0x7f7fffff, 0xff7fffff, 0x3f800000, 0x00800000, 0x7f000000}
	backing := make([]float32, 21)
	// Every length up to 20, both 8-byte-aligned and misaligned starts (the word path and the tail
	// path), every position for every bad value, on a background of every good value; a second bad
	// value later in the vector does not move the answer.
	for _, start := range []int{0, 1} {
		for n := 0; n+start <= len(backing); n++ {
			v := backing[start : start+n]
			for _, g := range good {
				for i := range v {
					v[i] = math.Float32frombits(g)
				}
				if got := FirstNonFinite(v); got != -1 {
					t.Fatalf("start %d len %d: all %#x: index %d reported non-finite", start, n, g, got)
				}
				for pos := range v {
					for _, b := range bad {
						v[pos] = math.Float32frombits(b)
						if n-1 > pos {
							v[n-1] = math.Float32frombits(0x7fc00000)
						}
						if got := FirstNonFinite(v); got != pos {
							t.Fatalf("start %d len %d: %#x at %d on %#x: FirstNonFinite = %d", start, n, b, pos, g, got)
						}
						v[pos], v[n-1] = math.Float32frombits(g), math.Float32frombits(g)
					}
				}
			}
		}
	}
}

func TestFirstNonFiniteRandomBits(t *testing.T) {
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
			if got, want := FirstNonFinite(s), naiveFirstNonFinite(s); got != want {
				t.Fatalf("FirstNonFinite(%#x) = %d, want %d", s, got, want)
			}
		}
	}
}

// Encode and Decode refuse a NaN or an infinity in their input, through shared memory and over gRPC,
// naming the row (counted over the whole call, several chunks) and the index; the plugin process is not
// restarted and serves the next call.
func TestNonFiniteInputRefused(t *testing.T) {
	ctx := context.Background()
	const dim = 784
	_, art := fitPCA(t, pcaenc.Params{D: 8, L: 10}, lowRank(randv2.New(randv2.NewPCG(3, 4)), 500, dim, []float64{4, 3, 2, 1}))
	rows := lowRank(randv2.New(randv2.NewPCG(5, 6)), 3000, dim, []float64{4, 3, 2, 1}) // 3 chunks
	for _, noShm := range []bool{false, true} {
		h := New(nil)
		h.noSharedMemory = noShm
		p := get(t, h, specFor(t, "pca", "pca", art))
		if _, err := p.Encode(ctx, rows[:10]); err != nil {
			t.Fatal(err)
		}
		pid := p.pid()
		for _, tc := range []struct {
			row, index int
			value      float32
		}{{2500, 17, float32(math.NaN())}, {0, 0, float32(math.Inf(1))}, {1999, 783, float32(math.Inf(-1))}} {
			old := rows[tc.row][tc.index]
			rows[tc.row][tc.index] = tc.value
			_, err := p.Encode(ctx, rows)
			rows[tc.row][tc.index] = old
			var nf *NonFiniteInputError
			if !errors.Is(err, ErrNonFiniteInput) || !errors.As(err, &nf) || nf.Row != tc.row || nf.Index != tc.index {
				t.Fatalf("noSharedMemory=%v: %v at row %d index %d: %v", noShm, tc.value, tc.row, tc.index, err)
			}
		}
		z, err := p.Encode(ctx, rows)
		if err != nil {
			t.Fatalf("noSharedMemory=%v: Encode after refusals: %v", noShm, err)
		}
		if p.pid() != pid {
			t.Errorf("noSharedMemory=%v: the plugin was restarted (pid %d, was %d)", noShm, p.pid(), pid)
		}
		z[7][3] = float32(math.NaN())
		if _, err := p.Decode(ctx, z); !errors.Is(err, ErrNonFiniteInput) {
			t.Fatalf("noSharedMemory=%v: Decode of a NaN latent: %v", noShm, err)
		}
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkFirstNonFinite784 checks one finite row of 784 features (in cache).
//
//	go test -run '^$' -bench FirstNonFinite784 ./plugins/host/
func BenchmarkFirstNonFinite784(b *testing.B) {
	v := make([]float32, 784)
	for i := range v {
		v[i] = float32(i) / 784
	}
	for b.Loop() {
		if FirstNonFinite(v) >= 0 {
			b.Fatal("finite row refused")
		}
	}
}
