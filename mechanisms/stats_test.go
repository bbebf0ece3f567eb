package mechanisms

import (
	"math"
	"sort"
	"testing"
)

// Statistical helpers shared by the tests of this package.
//
// Policy. Tests driven by NewSeededSource are deterministic: they either
// always pass or always fail. Their thresholds are still chosen as if the
// seed were random, so that a correct sampler would fail a given check with
// probability about 10⁻⁶ (stated at each use), while the sample sizes make
// any real bias show up as a p-value many orders of magnitude smaller. The
// one test on unseeded data (CryptoSource) uses a threshold with a total
// false-failure probability below 10⁻⁹.

// gammaQ is the regularised upper incomplete gamma function Q(a, x) =
// Γ(a, x)/Γ(a) (series for x < a+1, Lentz's continued fraction otherwise;
// Numerical Recipes §6.2).
func gammaQ(a, x float64) float64 {
	if x <= 0 {
		return 1
	}
	lg, _ := math.Lgamma(a)
	logPrefix := -x + a*math.Log(x) - lg
	if x < a+1 {
		ap, del := a, 1/a
		sum := del
		for i := 0; i < 100000; i++ {
			ap++
			del *= x / ap
			sum += del
			if math.Abs(del) < math.Abs(sum)*1e-16 {
				break
			}
		}
		return 1 - sum*math.Exp(logPrefix)
	}
	const tiny = 1e-300
	b := x + 1 - a
	c := 1 / tiny
	d := 1 / b
	h := d
	for i := 1; i < 100000; i++ {
		an := -float64(i) * (float64(i) - a)
		b += 2
		d = an*d + b
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = b + an/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < 1e-16 {
			break
		}
	}
	return math.Exp(logPrefix) * h
}

// chiSquareSF returns Pr[χ²_df ≥ x].
func chiSquareSF(x float64, df int) float64 { return gammaQ(float64(df)/2, x/2) }

// chiSquarePValue returns Pearson's statistic and its p-value for observed
// counts against cell probabilities (which must sum to 1), with
// len(counts)−1 degrees of freedom. Cells must have expected count ≥ 5.
func chiSquarePValue(t *testing.T, counts []int64, probs []float64) (stat, p float64) {
	t.Helper()
	if len(counts) != len(probs) || len(counts) < 2 {
		t.Fatalf("chiSquarePValue: %d counts, %d probabilities", len(counts), len(probs))
	}
	var n int64
	var ptot float64
	for i := range counts {
		n += counts[i]
		ptot += probs[i]
	}
	if math.Abs(ptot-1) > 1e-9 {
		t.Fatalf("chiSquarePValue: probabilities sum to %v", ptot)
	}
	for i := range counts {
		e := float64(n) * probs[i]
		if e < 5 {
			t.Fatalf("chiSquarePValue: cell %d has expected count %v < 5", i, e)
		}
		d := float64(counts[i]) - e
		stat += d * d / e
	}
	return stat, chiSquareSF(stat, len(counts)-1)
}

// poolSmallCells merges cells with expected count below 5 into a neighbour,
// so that the χ² approximation holds.
func poolSmallCells(counts []int64, probs []float64, n int64) ([]int64, []float64) {
	var c []int64
	var p []float64
	var accC int64
	var accP float64
	for i := range counts {
		accC += counts[i]
		accP += probs[i]
		if accP*float64(n) >= 5 {
			c, p = append(c, accC), append(p, accP)
			accC, accP = 0, 0
		}
	}
	if accP > 0 || accC > 0 {
		if len(c) == 0 {
			return []int64{accC}, []float64{accP}
		}
		c[len(c)-1] += accC
		p[len(p)-1] += accP
	}
	return c, p
}

// binnedIntegerChiSquare bins integer samples by the upper edges (a sample v
// falls in the first bin with v ≤ edge; the last bin is open), computes each
// bin's probability from the exact CDF, pools small bins and returns the χ²
// p-value.
func binnedIntegerChiSquare(t *testing.T, samples []int64, edges []int64, cdf func(int64) float64) float64 {
	t.Helper()
	sort.Slice(edges, func(i, j int) bool { return edges[i] < edges[j] })
	edges = dedupe(edges)
	counts := make([]int64, len(edges)+1)
	for _, v := range samples {
		counts[sort.Search(len(edges), func(i int) bool { return v <= edges[i] })]++
	}
	probs := make([]float64, len(edges)+1)
	prev := 0.0
	for i, e := range edges {
		c := cdf(e)
		probs[i] = c - prev
		prev = c
	}
	probs[len(edges)] = 1 - prev
	counts, probs = poolSmallCells(counts, probs, int64(len(samples)))
	if len(counts) < 2 {
		t.Fatalf("binnedIntegerChiSquare: fewer than two usable bins")
	}
	_, p := chiSquarePValue(t, counts, probs)
	return p
}

func dedupe(s []int64) []int64 {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// kolmogorovSF returns the asymptotic Kolmogorov survival function
// Pr[K > t] = 2 Σ_{j≥1} (−1)^{j−1} e^{−2j²t²}.
func kolmogorovSF(t float64) float64 {
	if t < 0.2 {
		return 1
	}
	var s float64
	for j := 1; j <= 100; j++ {
		term := math.Exp(-2 * float64(j*j) * t * t)
		if j%2 == 1 {
			s += term
		} else {
			s -= term
		}
		if term < 1e-18 {
			break
		}
	}
	return math.Min(1, math.Max(0, 2*s))
}

// ksPValue returns the Kolmogorov–Smirnov statistic D of the samples
// against a continuous CDF and its p-value (with the Stephens correction
// √n + 0.12 + 0.11/√n, Numerical Recipes §14.3). samples is sorted in place.
func ksPValue(samples []float64, cdf func(float64) float64) (d, p float64) {
	sort.Float64s(samples)
	n := float64(len(samples))
	for i, x := range samples {
		f := cdf(x)
		d = math.Max(d, math.Max(f-float64(i)/n, float64(i+1)/n-f))
	}
	sn := math.Sqrt(n)
	return d, kolmogorovSF((sn + 0.12 + 0.11/sn) * d)
}

// laplaceCDF is the CDF of Laplace(mu, b).
func laplaceCDF(mu, b float64) func(float64) float64 {
	return func(x float64) float64 {
		if x < mu {
			return 0.5 * math.Exp((x-mu)/b)
		}
		return 1 - 0.5*math.Exp(-(x-mu)/b)
	}
}

// scriptedSource returns the given words in order and fails the test if
// more are drawn.
type scriptedSource struct {
	t     *testing.T
	words []uint64
	used  int
}

func (s *scriptedSource) Uint64() uint64 {
	if s.used >= len(s.words) {
		s.t.Fatalf("scriptedSource: drew word %d of %d", s.used+1, len(s.words))
	}
	s.used++
	return s.words[s.used-1]
}

func script(t *testing.T, words ...uint64) *scriptedSource {
	return &scriptedSource{t: t, words: words}
}

// Sanity checks of the helpers against closed forms.
func TestStatHelpers(t *testing.T) {
	for _, x := range []float64{0.1, 1, 5, 30, 60} {
		// χ²₂ is exponential with mean 2.
		if got, want := chiSquareSF(x, 2), math.Exp(-x/2); math.Abs(got-want) > 1e-12*want+1e-300 {
			t.Errorf("chiSquareSF(%v, 2) = %v, want %v", x, got, want)
		}
	}
	// χ²₁: Pr[χ² ≥ x] = erfc(√(x/2)).
	for _, x := range []float64{0.5, 3.84, 10.83, 40} {
		if got, want := chiSquareSF(x, 1), math.Erfc(math.Sqrt(x/2)); math.Abs(got-want) > 1e-10*want {
			t.Errorf("chiSquareSF(%v, 1) = %v, want %v", x, got, want)
		}
	}
	// Known quantile: Pr[χ²₂₅₅ ≥ 293.25] ≈ 0.05.
	if got := chiSquareSF(293.25, 255); math.Abs(got-0.05) > 0.002 {
		t.Errorf("chiSquareSF(293.25, 255) = %v, want ≈ 0.05", got)
	}
	// Kolmogorov: Pr[K > 1.36] ≈ 0.049.
	if got := kolmogorovSF(1.358); math.Abs(got-0.05) > 0.001 {
		t.Errorf("kolmogorovSF(1.358) = %v, want ≈ 0.05", got)
	}
}
