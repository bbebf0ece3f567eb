package mechanisms

import (
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"
)

func mustLaplace(t testing.TB, sens, eps float64, dim int) *Laplace {
	t.Helper()
	l, err := NewLaplace(sens, eps, dim)
	if err != nil {
		t.Fatalf("NewLaplace(%v, %v, %d): %v", sens, eps, dim, err)
	}
	return l
}

// TestLaplaceDistribution compares AddNoise outputs with the continuous
// Laplace(x, Δ/ε) by a Kolmogorov–Smirnov test, and checks the mean and
// variance. The discretisation is negligible at these sample sizes: the
// grid is ≤ 2⁻³⁹ of the scale and the noise scale exceeds Δ/ε by d·g/Δ <
// 2⁻³⁰, both far below the KS resolution ~1/√n ≈ 2·10⁻³. Thresholds
// (seeded data): KS p < 10⁻⁶ fails; the mean must be within 5 standard
// errors √(2b²/n), the variance within 5 standard errors √(20/n)·b² (the
// variance of a sample variance of Laplace data is (μ₄ − σ⁴)/n =
// (24 − 4)b⁴/n). Google's test input 45941223.02107 checks that large
// inputs, whose outputs are rounded to a coarser float spacing (2⁻²⁷), are
// still noised correctly.
func TestLaplaceDistribution(t *testing.T) {
	for i, c := range []struct {
		sens, eps float64
		x         []float64
	}{
		{2, 1, []float64{0.3}},
		{1, math.Ln2 + math.Log(1.5), []float64{45941223.02107}}, // ε = ln 3
		{3, 4, []float64{-0.5, 0.25, 0, 1, -1, 0.125, 0.5, -0.25}},
		{0.02, 0.1, []float64{0.01, -0.01}},
	} {
		const total = 200000
		l := mustLaplace(t, c.sens, c.eps, len(c.x))
		src := NewSeededSource(1000 + uint64(i))
		b := c.sens / c.eps
		var noise []float64
		for len(noise) < total {
			y, err := l.AddNoise(c.x, src)
			if err != nil {
				t.Fatal(err)
			}
			for j := range y {
				noise = append(noise, y[j]-c.x[j])
			}
		}
		n := float64(len(noise))
		var sum, sum2 float64
		for _, z := range noise {
			sum += z
			sum2 += z * z
		}
		mean := sum / n
		variance := sum2/n - mean*mean
		if se := math.Sqrt(2 * b * b / n); math.Abs(mean) > 5*se {
			t.Errorf("case %d: mean noise %v, want 0 ± %v", i, mean, 5*se)
		}
		if se := math.Sqrt(20/n) * b * b; math.Abs(variance-2*b*b) > 5*se {
			t.Errorf("case %d: noise variance %v, want %v ± %v", i, variance, 2*b*b, 5*se)
		}
		if d, p := ksPValue(noise, laplaceCDF(0, b)); p < 1e-6 {
			t.Errorf("case %d: KS D = %v, p = %v against Laplace(0, %v)", i, d, p, b)
		}
	}
}

// TestLaplaceGrid checks that outputs are exact multiples of the
// granularity, that the output does not depend on input bits below the
// grid (same seed ⇒ identical outputs for inputs that round to the same
// grid point), and that moving the input by one grid step moves every
// output by exactly one grid step.
func TestLaplaceGrid(t *testing.T) {
	l := mustLaplace(t, 2, 1, 1)
	g := l.Granularity()
	if g != 0x1p-39 { // smallest power of two ≥ 2/2⁴⁰
		t.Fatalf("granularity %v, want 2^-39", g)
	}
	x := 0.3 // 0.3/g has fractional part ≈ 0.4, far from a rounding tie
	near := []float64{x, math.Nextafter(x, 1), x + 7*(math.Nextafter(x, 1)-x), math.Nextafter(x, 0), x + g/20}
	for seed := uint64(0); seed < 200; seed++ {
		var first float64
		for j, xi := range near {
			y, err := l.AddNoiseScalar(xi, NewSeededSource(seed))
			if err != nil {
				t.Fatal(err)
			}
			if k := y / g; k != math.Trunc(k) {
				t.Fatalf("output %v is not a multiple of g = %v", y, g)
			}
			if j == 0 {
				first = y
			} else if y != first {
				t.Fatalf("seed %d: input %v gave %v, input %v gave %v: output depends on bits below the grid", seed, x, first, xi, y)
			}
		}
		shifted, _ := l.AddNoiseScalar(x+g, NewSeededSource(seed))
		if shifted-first != g {
			t.Fatalf("seed %d: shifting the input by g moved the output by %v", seed, shifted-first)
		}
	}
	// Large inputs: outputs are multiples of g too (|y| ≥ 2⁵³g makes every
	// float64 a multiple of g), including the huge-input branch.
	big := mustLaplace(t, 1, 1, 3)
	gb := big.Granularity()
	for seed := range uint64(50) {
		y, err := big.AddNoise([]float64{1e6 + 0.123, -3e15, 1e300}, NewSeededSource(seed))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range y {
			if k := v / gb; k != math.Trunc(k) || math.IsInf(v, 0) {
				t.Fatalf("output %v is not a finite multiple of g = %v", v, gb)
			}
		}
	}
}

// TestLaplaceParameters checks the calibration: g, λ·(Δ/g + d) ≤ ε in exact
// arithmetic, EffectiveEpsilon ≤ ε and within a relative 2⁻³⁰ of it, and
// NoiseScale close to Scale, over a grid of parameters.
func TestLaplaceParameters(t *testing.T) {
	for _, sens := range []float64{1e-9, 0.02, 1, 2, 3.7, 1e6} {
		for _, eps := range []float64{1e-3, 0.1, 0.5, 1, math.Ln2 + math.Log(1.5), 2, 8, 10, 64} {
			for _, dim := range []int{1, 2, 8, 32, 784, 100000} {
				l, err := NewLaplace(sens, eps, dim)
				if err != nil {
					if eps < float64(dim)*0x1p-29 {
						continue // rejected by design: the grid would inflate the noise
					}
					t.Fatalf("NewLaplace(%v, %v, %d): %v", sens, eps, dim, err)
				}
				b := sens / eps
				g := l.Granularity()
				if g < b*0x1p-40 || g >= b*0x1p-39 || g != ceilPowerOfTwo(g) {
					t.Errorf("Δ=%v ε=%v: g = %v is not the smallest power of two ≥ b/2^40 (b = %v)", sens, eps, g, b)
				}
				if l.Scale() != b || l.Sensitivity() != sens || l.Epsilon() != eps || l.Dim() != dim {
					t.Errorf("accessors disagree with arguments")
				}
				// λ·(Δ/g + d) ≤ ε, exactly.
				prod := new(big.Float).SetPrec(1000).SetFloat64(sens / g) // exact quotient
				prod.Add(prod, new(big.Float).SetInt64(int64(dim)))
				prod.Mul(prod, new(big.Float).SetPrec(1000).SetFloat64(l.lambda))
				if prod.Cmp(big.NewFloat(eps)) > 0 {
					t.Errorf("Δ=%v ε=%v d=%d: λ(Δ/g + d) = %v > ε", sens, eps, dim, prod)
				}
				eff := l.EffectiveEpsilon()
				if eff > eps || eff < eps*(1-0x1p-30) {
					t.Errorf("Δ=%v ε=%v d=%d: EffectiveEpsilon = %v, want in [ε(1-2^-30), ε]", sens, eps, dim, eff)
				}
				if r := l.NoiseScale()/b - 1; r < 0 || r > 0x1p-10 {
					t.Errorf("Δ=%v ε=%v d=%d: NoiseScale/Scale - 1 = %v", sens, eps, dim, r)
				}
			}
		}
	}
}

func TestLaplaceErrors(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, c := range []struct {
		sens, eps float64
		dim       int
		want      string
	}{
		{0, 1, 1, "sensitivity"},
		{-1, 1, 1, "sensitivity"},
		{nan, 1, 1, "sensitivity"},
		{inf, 1, 1, "sensitivity"},
		{1, 0, 1, "epsilon"},
		{1, -1, 1, "epsilon"},
		{1, nan, 1, "NaN"},
		{1, inf, 1, "+Inf"},
		{1, math.Inf(-1), 1, "epsilon"},
		{1, 0x1p-51, 1, "MinEpsilon"},
		{1, 64.5, 1, "MaxEpsilon"},
		{1, 1, 0, "dimension"},
		{1, 1, -3, "dimension"},
		{1, 1e-9, 1000, "too small for dimension"}, // d·g ≫ 2⁻¹⁰Δ
		{1e-300, 60, 1, "representable range"},     // g would be subnormal
		{1e308, 1e-10, 1, "representable range"},   // Δ/ε overflows
		{1e300, 0x1p-20, 1, "representable range"}, // 2⁵³g overflows
	} {
		_, err := NewLaplace(c.sens, c.eps, c.dim)
		if err == nil || !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewLaplace(%v, %v, %d) error = %v, want one mentioning %q", c.sens, c.eps, c.dim, err, c.want)
		}
	}
	l := mustLaplace(t, 2, 1, 3)
	src := NewSeededSource(0)
	for _, c := range []struct {
		x    []float64
		want string
	}{
		{[]float64{1, 2}, "len(x) = 2"},
		{nil, "len(x) = 0"},
		{[]float64{0, nan, 0}, "x[1] = NaN"},
		{[]float64{0, 0, math.Inf(-1)}, "x[2] = -Inf"},
	} {
		if _, err := l.AddNoise(c.x, src); err == nil || !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("AddNoise(%v) error = %v, want one mentioning %q", c.x, err, c.want)
		}
	}
	if _, err := l.AddNoiseScalar(1, src); err == nil || !strings.Contains(err.Error(), "dimension is 3") {
		t.Errorf("AddNoiseScalar on dim 3: error = %v", err)
	}
	l1 := mustLaplace(t, 2, 1, 1)
	for _, x := range []float64{nan, inf, -inf} {
		if _, err := l1.AddNoiseScalar(x, src); err == nil || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("AddNoiseScalar(%v): error = %v", x, err)
		}
	}
}

func TestLaplaceDoesNotModifyInput(t *testing.T) {
	l := mustLaplace(t, 2, 1, 4)
	x := []float64{0.1, -0.2, 0.3, 0}
	orig := append([]float64(nil), x...)
	y, err := l.AddNoise(x, NewSeededSource(1))
	if err != nil {
		t.Fatal(err)
	}
	for i := range x {
		if x[i] != orig[i] {
			t.Fatalf("AddNoise modified its input: %v -> %v", orig, x)
		}
	}
	if &y[0] == &x[0] {
		t.Fatal("AddNoise returned its input slice")
	}
}

func BenchmarkLaplaceScalar(b *testing.B) {
	l := mustLaplace(b, 2, 1, 1)
	src := CryptoSource()
	for b.Loop() {
		if _, err := l.AddNoiseScalar(0.3, src); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLaplaceVector32(b *testing.B) {
	l := mustLaplace(b, 2, 1, 32)
	x := make([]float64, 32)
	src := CryptoSource()
	for b.Loop() {
		if _, err := l.AddNoise(x, src); err != nil {
			b.Fatal(err)
		}
	}
}
