package mechanisms

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestWarnerUnbiased simulates KRR reports from a known label distribution
// and checks that every label's estimate is within 4 standard errors
// (WarnerStdErr) of the truth. Seeded; for a correct estimator each check
// fails with probability 6·10⁻⁵ (two-sided 4σ), and there are 14 checks.
// The unclipped estimates must also sum to 1 (an algebraic identity:
// Σ_c (f̃_c − q)/(p − q) = (1 − Kq)/(p − q) = 1 since p + (K−1)q = 1).
func TestWarnerUnbiased(t *testing.T) {
	for i, c := range []struct {
		eps  float64
		f    []float64
		n    int
		seed uint64
	}{
		{1, []float64{0.5, 0.2, 0.15, 0.1, 0.05}, 200000, 1},
		{3, []float64{0.3, 0.7}, 100000, 2},
		{0.5, []float64{0.05, 0.25, 0.25, 0.25, 0.2, 0, 0}, 200000, 3},
	} {
		k := len(c.f)
		r := mustKRR(t, c.eps, k)
		src := NewSeededSource(5000 + c.seed)
		counts := make([]int64, k)
		y, next := 0, c.f[0]*float64(c.n)
		for j := range c.n {
			for float64(j) >= next && y < k-1 { // labels in proportion f
				y++
				next += c.f[y] * float64(c.n)
			}
			o, err := r.Randomise(y, src)
			if err != nil {
				t.Fatal(err)
			}
			counts[o]++
		}
		var total float64
		for label := range k {
			est, err := WarnerEstimateUnclipped(counts[label], int64(c.n), c.eps, k)
			if err != nil {
				t.Fatal(err)
			}
			total += est
			se, err := WarnerStdErr(counts[label], int64(c.n), c.eps, k)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(est-c.f[label]) > 4*se {
				t.Errorf("case %d label %d: estimate %v ± %v, true %v", i, label, est, se, c.f[label])
			}
			clipped, _ := WarnerEstimate(counts[label], int64(c.n), c.eps, k)
			if clipped != math.Min(math.Max(est, 0), 1) {
				t.Errorf("case %d label %d: clipped %v vs unclipped %v", i, label, clipped, est)
			}
		}
		if math.Abs(total-1) > 1e-12 {
			t.Errorf("case %d: unclipped estimates sum to %v", i, total)
		}
	}
}

// TestWarnerFormulas checks the closed forms: the expected count maps back
// to the true frequency exactly (up to rounding), K = 2 reduces to Warner's
// (f̃ − p_f)/(1 − 2p_f) with the sign corrected, and the standard error is
// √(f̃(1−f̃)/n)/(p − q).
func TestWarnerFormulas(t *testing.T) {
	const n = 1000000
	for _, eps := range []float64{0.1, 1, 5} {
		for _, k := range []int{2, 3, 10} {
			r := mustKRR(t, eps, k)
			p, q := r.KeepProbability(), r.FlipProbability()
			for _, f := range []float64{0, 0.1, 0.5, 0.9, 1} {
				// A count whose f̃ is exactly q + (p−q)f up to 1/n rounding.
				cnt := int64(math.Round((q + (p-q)*f) * n))
				est, err := WarnerEstimateUnclipped(cnt, n, eps, k)
				if err != nil {
					t.Fatal(err)
				}
				if tol := 1 / (n * (p - q)); math.Abs(est-f) > tol {
					t.Errorf("ε=%v K=%d f=%v: estimate %v (tolerance %v)", eps, k, f, est, tol)
				}
				ft := float64(cnt) / n
				se, _ := WarnerStdErr(cnt, n, eps, k)
				if want := math.Sqrt(ft*(1-ft)/n) / (p - q); math.Abs(se-want) > 1e-12*want {
					t.Errorf("ε=%v K=%d: stderr %v, want %v", eps, k, se, want)
				}
			}
			if k == 2 {
				pf := 1 / (1 + math.Exp(eps))
				ft := 0.37
				est, _ := WarnerEstimateUnclipped(int64(ft*n), n, eps, k)
				if want := (ft - pf) / (1 - 2*pf); math.Abs(est-want) > 1e-12 {
					t.Errorf("ε=%v: K=2 estimate %v, Warner's formula %v", eps, est, want)
				}
			}
		}
	}
	// The standard error vanishes at f̃ ∈ {0, 1}.
	for _, cnt := range []int64{0, 100} {
		if se, _ := WarnerStdErr(cnt, 100, 1, 3); se != 0 {
			t.Errorf("stderr at count %d of 100 = %v, want 0", cnt, se)
		}
	}
}

// TestWarnerClipping: observed frequencies below q or above p give raw
// estimates outside [0, 1], which WarnerEstimate clips.
func TestWarnerClipping(t *testing.T) {
	raw0, _ := WarnerEstimateUnclipped(0, 1000, 1, 4)
	raw1, _ := WarnerEstimateUnclipped(1000, 1000, 1, 4)
	if !(raw0 < 0 && raw1 > 1) {
		t.Fatalf("raw estimates %v, %v should leave [0, 1]", raw0, raw1)
	}
	if e, _ := WarnerEstimate(0, 1000, 1, 4); e != 0 {
		t.Errorf("WarnerEstimate(0/1000) = %v, want 0", e)
	}
	if e, _ := WarnerEstimate(1000, 1000, 1, 4); e != 1 {
		t.Errorf("WarnerEstimate(1000/1000) = %v, want 1", e)
	}
}

func TestWarnerErrors(t *testing.T) {
	for _, c := range []struct {
		cnt, n int64
		eps    float64
		k      int
		want   string
	}{
		{0, 0, 1, 2, "n = 0"}, {0, -5, 1, 2, "n = -5"}, {-1, 10, 1, 2, "noisyCount = -1"}, {11, 10, 1, 2, "noisyCount = 11"},
		{1, 10, 0, 2, "epsilon"}, {1, 10, math.NaN(), 2, "NaN"}, {1, 10, math.Inf(1), 2, "+Inf"}, {1, 10, 1, 1, "K = 1"},
	} {
		for name, f := range map[string]func(int64, int64, float64, int) (float64, error){
			"WarnerEstimate": WarnerEstimate, "WarnerEstimateUnclipped": WarnerEstimateUnclipped, "WarnerStdErr": WarnerStdErr,
		} {
			if _, err := f(c.cnt, c.n, c.eps, c.k); err == nil || !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s(%d, %d, %v, %d) error = %v, want one mentioning %q", name, c.cnt, c.n, c.eps, c.k, err, c.want)
			}
		}
	}
}
