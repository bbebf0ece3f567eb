package mechanisms

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

func mustKRR(t testing.TB, eps float64, k int) *KRR {
	t.Helper()
	r, err := NewKRR(eps, k)
	if err != nil {
		t.Fatalf("NewKRR(%v, %d): %v", eps, k, err)
	}
	return r
}

// krrCounts randomises label y n times and returns the output counts.
func krrCounts(t *testing.T, r *KRR, y, n int, src Source) []int64 {
	t.Helper()
	counts := make([]int64, r.K())
	for range n {
		o, err := r.Randomise(y, src)
		if err != nil {
			t.Fatal(err)
		}
		if o < 0 || o >= r.K() {
			t.Fatalf("Randomise(%d) = %d outside 0..%d", y, o, r.K()-1)
		}
		counts[o]++
	}
	return counts
}

// TestKRRDistribution: χ² of the output frequencies of each tested input
// against column y of TransitionMatrix (cells with expected count < 5 are
// pooled). Seeded; p < 10⁻⁶ fails. ε = 7.7385 with K = 256 is Barber's
// per-pixel setting (flip probability 0.1).
func TestKRRDistribution(t *testing.T) {
	for i, c := range []struct {
		eps float64
		k   int
		n   int
	}{
		{1, 2, 100000}, {0.5, 10, 100000}, {2, 10, 100000}, {4, 3, 100000}, {7.7385, 256, 200000}, {1e-6, 5, 100000},
	} {
		r := mustKRR(t, c.eps, c.k)
		R := r.TransitionMatrix()
		src := NewSeededSource(2000 + uint64(i))
		for _, y := range []int{0, c.k / 2, c.k - 1} {
			counts := krrCounts(t, r, y, c.n, src)
			probs := make([]float64, c.k)
			for o := range probs {
				probs[o] = R[o][y]
			}
			cc, pp := poolSmallCells(counts, probs, int64(c.n))
			if stat, p := chiSquarePValue(t, cc, pp); p < 1e-6 {
				t.Errorf("ε=%v K=%d y=%d: χ² = %v, p = %v; counts %v", c.eps, c.k, y, stat, p, counts[:min(c.k, 10)])
			}
		}
	}
}

// TestKRRLargeEpsilon: at ε = 20 the total flip probability is
// 9/(e²⁰+9) ≈ 1.9·10⁻⁸, so 10⁵ draws should show no flip; P(≥ 3 flips)
// ≈ 10⁻¹¹. Also the stable formulas stay finite and exact at ε = 64.
func TestKRRLargeEpsilon(t *testing.T) {
	r := mustKRR(t, 20, 10)
	counts := krrCounts(t, r, 4, 100000, NewSeededSource(3))
	if flips := 100000 - counts[4]; flips > 2 {
		t.Errorf("ε = 20: %d flips in 1e5 draws, expected ≈ 0.002", flips)
	}
	for _, k := range []int{2, 10, 1000000} {
		r := mustKRR(t, 64, k)
		p, q := r.KeepProbability(), r.FlipProbability()
		if !(p > 0 && p <= 1 && q > 0) || math.Abs(q/(math.Exp(-64)/(1+float64(k-1)*math.Exp(-64)))-1) > 1e-15 {
			t.Errorf("ε = 64, K = %d: p = %v, q = %v", k, p, q)
		}
	}
}

// TestKRREmpiricalPrivacy estimates p(o|y) from 2·10⁵ seeded draws per input
// and checks, for every pair y ≠ y' and output o, that the estimated log
// ratio ln(p̂(o|y)/p̂(o|y')) is at most ε + 5σ̂, where σ̂² =
// (1−p̂₁)/(n p̂₁) + (1−p̂₂)/(n p̂₂) is the delta-method variance of the log
// ratio of two independent binomial proportions. For a correct mechanism
// each check fails with probability ≈ 3·10⁻⁷ (one-sided 5σ); there are at
// most 100 per case. It also checks the bound is attained: the largest
// ratio is ≥ ε − 5σ̂, so the mechanism is not over-noised either.
func TestKRREmpiricalPrivacy(t *testing.T) {
	const n = 200000
	for i, c := range []struct {
		eps float64
		k   int
	}{{0.5, 2}, {1, 4}, {2, 3}, {1.5, 5}} {
		r := mustKRR(t, c.eps, c.k)
		src := NewSeededSource(4000 + uint64(i))
		freq := make([][]float64, c.k)
		for y := range freq {
			counts := krrCounts(t, r, y, n, src)
			freq[y] = make([]float64, c.k)
			for o, cnt := range counts {
				freq[y][o] = float64(cnt) / n
			}
		}
		attained := false
		for y := range c.k {
			for y2 := range c.k {
				if y == y2 {
					continue
				}
				for o := range c.k {
					p1, p2 := freq[y][o], freq[y2][o]
					if p1 == 0 || p2 == 0 {
						t.Fatalf("ε=%v K=%d: empty cell", c.eps, c.k)
					}
					lr := math.Log(p1 / p2)
					se := math.Sqrt((1-p1)/(n*p1) + (1-p2)/(n*p2))
					if lr > c.eps+5*se {
						t.Errorf("ε=%v K=%d: ln p(%d|%d)/p(%d|%d) = %v > ε + 5σ = %v", c.eps, c.k, o, y, o, y2, lr, c.eps+5*se)
					}
					if lr >= c.eps-5*se {
						attained = true
					}
				}
			}
		}
		if !attained {
			t.Errorf("ε=%v K=%d: no likelihood ratio came within 5σ of e^ε", c.eps, c.k)
		}
	}
}

// TestKRRTransitionMatrix: columns sum to 1 and R[j][j]/R[i][j] = e^ε, each
// to within the rounding of the closed forms (a few ulps: tolerance 2⁻⁵⁰
// relative for the ratio, K·2⁻⁵² for the sums).
func TestKRRTransitionMatrix(t *testing.T) {
	for _, eps := range []float64{1e-6, 0.1, 1, math.Log(3), 5, 20, 64} {
		for _, k := range []int{2, 3, 10, 256} {
			r := mustKRR(t, eps, k)
			R := r.TransitionMatrix()
			if len(R) != k {
				t.Fatalf("matrix has %d rows", len(R))
			}
			for j := range k {
				var sum float64
				for i := range k {
					sum += R[i][j]
					if i != j {
						if ratio := R[j][j] / R[i][j]; math.Abs(ratio/math.Exp(eps)-1) > 0x1p-50 {
							t.Errorf("ε=%v K=%d: R[%d][%d]/R[%d][%d] = %v, want e^ε = %v", eps, k, j, j, i, j, ratio, math.Exp(eps))
						}
					}
				}
				if math.Abs(sum-1) > float64(k)*0x1p-52 {
					t.Errorf("ε=%v K=%d: column %d sums to %v", eps, k, j, sum)
				}
			}
			if R[0][0] != r.KeepProbability() || R[1][0] != r.FlipProbability() {
				t.Errorf("matrix disagrees with Keep/FlipProbability")
			}
			// Against the textbook formulas where they do not overflow.
			if eps <= 20 {
				e := math.Exp(eps)
				if p := e / (e + float64(k-1)); math.Abs(r.KeepProbability()/p-1) > 1e-14 {
					t.Errorf("ε=%v K=%d: keep %v, want %v", eps, k, r.KeepProbability(), p)
				}
				if q := 1 / (e + float64(k-1)); math.Abs(r.FlipProbability()/q-1) > 1e-14 {
					t.Errorf("ε=%v K=%d: flip %v, want %v", eps, k, r.FlipProbability(), q)
				}
			}
			// The sampler's realised ε never exceeds the requested one.
			if eff := r.EffectiveEpsilon(); eff > eps || eff < eps-1e-9 {
				t.Errorf("ε=%v K=%d: EffectiveEpsilon = %v", eps, k, eff)
			}
			if r.K() != k || r.Epsilon() != eps {
				t.Errorf("accessors disagree with arguments")
			}
		}
	}
	// The matrix is a fresh copy.
	r := mustKRR(t, 1, 3)
	r.TransitionMatrix()[0][0] = 7
	if r.TransitionMatrix()[0][0] == 7 {
		t.Error("TransitionMatrix returned shared storage")
	}
}

// TestKRRFlipNeverKeeps forces the flip branch with a scripted source and
// checks the replacement is never y; and that the keep branch uses one word.
func TestKRRFlipNeverKeeps(t *testing.T) {
	r := mustKRR(t, 1, 3)
	for y := range 3 {
		for _, w := range []uint64{0, 1 << 63, math.MaxUint64} {
			// Word 0 < F forces the flip; w then selects the replacement.
			o, err := r.Randomise(y, script(t, 0, w))
			if err != nil {
				t.Fatal(err)
			}
			if o == y {
				t.Errorf("forced flip of %d returned %d", y, o)
			}
		}
	}
	s := script(t, math.MaxUint64) // ≥ F: keep
	if o, _ := r.Randomise(2, s); o != 2 || s.used != 1 {
		t.Errorf("keep path returned %d using %d words", o, s.used)
	}
}

func TestKRRErrors(t *testing.T) {
	for _, c := range []struct {
		eps  float64
		k    int
		want string
	}{
		{0, 2, "epsilon"}, {-1, 2, "epsilon"}, {math.NaN(), 2, "NaN"}, {math.Inf(1), 2, "+Inf"},
		{math.Inf(-1), 2, "epsilon"}, {65, 2, "MaxEpsilon"}, {1, 1, "K = 1"}, {1, 0, "K = 0"}, {1, -2, "K = -2"},
	} {
		if _, err := NewKRR(c.eps, c.k); err == nil || !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewKRR(%v, %d) error = %v, want one mentioning %q", c.eps, c.k, err, c.want)
		}
	}
	r := mustKRR(t, 1, 4)
	for _, y := range []int{-1, 4, 100} {
		_, err := r.Randomise(y, NewSeededSource(0))
		want := fmt.Sprintf("y = %d", y)
		if err == nil || !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "K = 4") {
			t.Errorf("Randomise(%d) error = %v", y, err)
		}
	}
}

func BenchmarkKRRRandomise(b *testing.B) {
	r := mustKRR(b, 1, 10)
	src := CryptoSource()
	y := 0
	for b.Loop() {
		o, err := r.Randomise(y, src)
		if err != nil {
			b.Fatal(err)
		}
		y = (o + 1) % 10
	}
}
