package mechanisms

import (
	"math"
	"testing"
)

// geometricEdges returns bin edges at the j/bins quantiles of the
// geometric law Pr[X > k] = e^{−λk}, k ≥ 1.
func geometricEdges(lambda float64, bins int) []int64 {
	var e []int64
	for j := 1; j < bins; j++ {
		k := math.Ceil(-math.Log1p(-float64(j)/float64(bins)) / lambda)
		e = append(e, int64(math.Max(k, 1)))
	}
	return e
}

// TestGeometricChiSquare compares geometric samples with the exact law
// Pr[X ≤ k] = 1 − e^{−λk} by a χ² test on 40 (or fewer, for large λ)
// equiprobable bins, for λ from the Laplace mechanism's ≈ 2⁻⁴⁰ up to 3,
// where the search ends after one step. Seeded; p < 10⁻⁶ fails.
func TestGeometricChiSquare(t *testing.T) {
	for i, lambda := range []float64{1.3 * 0x1p-40, 1e-3, 0.1, 0.7, 3} {
		const n = 40000
		src := NewSeededSource(100 + uint64(i))
		samples := make([]int64, n)
		for j := range samples {
			samples[j] = geometric(src, lambda)
			if samples[j] < 1 {
				t.Fatalf("geometric(%v) = %d < 1", lambda, samples[j])
			}
		}
		cdf := func(k int64) float64 { return -math.Expm1(-lambda * float64(k)) }
		if p := binnedIntegerChiSquare(t, samples, geometricEdges(lambda, 40), cdf); p < 1e-6 {
			t.Errorf("geometric(λ = %v): χ² p-value %v", lambda, p)
		}
	}
}

// TestGeometricExactCells tests the pmf cell by cell (no binning) where it
// is concentrated on a few integers: Pr[X = k] = (1−e^{−λ})e^{−λ(k−1)}.
// Seeded; p < 10⁻⁶ fails.
func TestGeometricExactCells(t *testing.T) {
	const n, lambda, cells = 100000, 0.5, 30
	src := NewSeededSource(9)
	counts := make([]int64, cells+1)
	probs := make([]float64, cells+1)
	for range n {
		counts[min(geometric(src, lambda), cells+1)-1]++
	}
	for k := 1; k <= cells; k++ {
		probs[k-1] = -math.Expm1(-lambda) * math.Exp(-lambda*float64(k-1))
	}
	probs[cells] = math.Exp(-lambda * cells)
	c, p := poolSmallCells(counts, probs, n)
	if stat, pv := chiSquarePValue(t, c, p); pv < 1e-6 {
		t.Errorf("geometric(0.5) cells: χ² = %v, p = %v", stat, pv)
	}
}

// twoSidedCDF is Pr[Z ≤ z] for Pr[Z = z] = tanh(λ/2)e^{−λ|z|}:
// e^{λz}/(1+e^{−λ}) for z < 0 and 1 − e^{−λ(z+1)}/(1+e^{−λ}) for z ≥ 0.
func twoSidedCDF(lambda float64) func(int64) float64 {
	return func(z int64) float64 {
		if z < 0 {
			return math.Exp(lambda*float64(z)) / (1 + math.Exp(-lambda))
		}
		return 1 - math.Exp(-lambda*float64(z+1))/(1+math.Exp(-lambda))
	}
}

// TestTwoSidedGeometricChiSquare: as TestGeometricChiSquare, for the
// discrete Laplace on 60 bins at the quantiles of the continuous Laplace
// with scale 1/λ. Also checks the zero cell, which the (0, −) redraw must
// not double. Seeded; p < 10⁻⁶ fails.
func TestTwoSidedGeometricChiSquare(t *testing.T) {
	for i, lambda := range []float64{1.7 * 0x1p-40, 0.01, 0.3, 1, 4} {
		const n = 40000
		src := NewSeededSource(200 + uint64(i))
		samples := make([]int64, n)
		for j := range samples {
			samples[j] = twoSidedGeometric(src, lambda)
		}
		var edges []int64
		for j := 1; j < 60; j++ {
			u := float64(j) / 60
			var x float64
			if u < 0.5 {
				x = math.Log(2*u) / lambda
			} else {
				x = -math.Log(2*(1-u)) / lambda
			}
			edges = append(edges, int64(math.Floor(x)))
		}
		edges = append(edges, -1, 0) // isolate the zero cell
		if p := binnedIntegerChiSquare(t, samples, edges, twoSidedCDF(lambda)); p < 1e-6 {
			t.Errorf("twoSidedGeometric(λ = %v): χ² p-value %v", lambda, p)
		}
	}
}

// TestTwoSidedGeometricSymmetry checks the empirical mean (0) and variance
// 2e^{−λ}/(1−e^{−λ})² at λ = 0.2 within 5 standard errors (seeded).
func TestTwoSidedGeometricSymmetry(t *testing.T) {
	const n, lambda = 100000, 0.2
	src := NewSeededSource(11)
	var sum, sum2 float64
	for range n {
		z := float64(twoSidedGeometric(src, lambda))
		sum += z
		sum2 += z * z
	}
	v := 2 * math.Exp(-lambda) / math.Pow(-math.Expm1(-lambda), 2)
	if mean := sum / n; math.Abs(mean) > 5*math.Sqrt(v/n) {
		t.Errorf("mean %v, want 0 ± %v", mean, 5*math.Sqrt(v/n))
	}
	// Var of Z² ≈ E Z⁴ − v²; for the discrete Laplace E Z⁴ ≈ 6v² (as for
	// the continuous one), so the standard error of the mean square is
	// ≈ √(5/n)·v.
	if ms := sum2 / n; math.Abs(ms-v) > 5*math.Sqrt(5.0/n)*v {
		t.Errorf("mean square %v, want %v ± %v", ms, v, 5*math.Sqrt(5.0/n)*v)
	}
}

func TestCeilPowerOfTwo(t *testing.T) {
	for _, c := range []struct{ x, want float64 }{
		{1, 1}, {0.75, 1}, {1.0000001, 2}, {3, 4}, {0x1p-40, 0x1p-40}, {0x1.8p-40, 0x1p-39},
		{math.SmallestNonzeroFloat64, math.SmallestNonzeroFloat64}, {math.MaxFloat64, math.Inf(1)},
	} {
		if got := ceilPowerOfTwo(c.x); got != c.want {
			t.Errorf("ceilPowerOfTwo(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	for _, x := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if got := ceilPowerOfTwo(x); !math.IsNaN(got) {
			t.Errorf("ceilPowerOfTwo(%v) = %v, want NaN", x, got)
		}
	}
}

func BenchmarkTwoSidedGeometricLaplaceLambda(b *testing.B) {
	src := NewSeededSource(1)
	for b.Loop() {
		twoSidedGeometric(src, 0x1p-40)
	}
}
