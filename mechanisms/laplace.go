package mechanisms

import "math"

// granularityParam sets the grid relative to the noise: the grid step is
// the smallest power of two ≥ (Δ/ε)/granularityParam. 2⁴⁰ is the value of
// Google's library (noise/laplace_noise.go), whose analysis bounds the
// sampler's overflow probability by 2⁻¹⁰⁰⁰ for it.
const granularityParam = 0x1p40

// maxGridInflation bounds how much the rounding correction may enlarge the
// noise: d·g ≤ maxGridInflation·Δ, see NewLaplace.
const maxGridInflation = 0x1p-10

// Laplace is the local Laplace mechanism (thesis Def 2.3.7) for vectors of
// dimension d whose ℓ1 sensitivity is Δ, made safe against floating-point
// attacks (Mironov 2012) by sampling on a grid, following
// addLaplaceFloat64 in Google's differential-privacy library
// (github.com/google/differential-privacy/go/v3/noise/laplace_noise.go).
//
// The ideal mechanism adds i.i.d. Laplace(0, b) noise, b = Δ/ε, to every
// coordinate. Laplace computes instead, for each coordinate xᵢ,
//
//	yᵢ = g·round(xᵢ/g) + g·Zᵢ,   Zᵢ i.i.d. with Pr[Zᵢ = z] ∝ e^{−λ|z|},
//
// where
//
//	g = the smallest power of two ≥ b/2⁴⁰   (the granularity), and
//	λ = g·ε / (Δ + d·g)                     (the geometric parameter).
//
// Why this λ: rounding moves each coordinate by at most g/2, so two inputs
// at ℓ1 distance ≤ Δ round to grid points at most Δ/g + d grid steps apart
// (and, the step count being an integer, at most ⌊Δ/g⌋ + d steps). For
// outputs on the grid the likelihood ratio of two such inputs is at most
// e^{λ·steps} ≤ e^{λ(Δ/g + d)} = e^{ε}. For d = 1 this is Google's scalar
// parameter g·ε/(Δ + g). λ is computed so that λ(Δ/g + d) ≤ ε holds in exact
// arithmetic, not just in float64.
//
// The noise g·Z is a discrete Laplace with scale g/λ = (Δ + d·g)/ε, which
// exceeds b by the factor 1 + d·g/Δ ≤ 1 + 2⁻¹⁰ (NewLaplace enforces the
// bound; for ε ≥ 1 and d ≤ 1000 the factor is below 1 + 2⁻²⁹). Its
// variance is g²·2e^{−λ}/(1−e^{−λ})² ≈ 2(g/λ)².
//
// Sampling. Zᵢ is drawn by discreteLaplace, an exact sampler of the
// discrete Laplace law given uniform bits: every random decision is an exact
// Bernoulli draw, so the only error is float64 evaluation of e^{−λ·l}
// (a couple of ulps), which perturbs the probability ratios that privacy
// depends on by ~10⁻¹⁵ relative. The tests check it against the exact pmf,
// as they do twoSidedGeometric, this package's reproduction of Google's
// binary-search sampler, which it replaces for speed (≈ 30×).
//
// Floating point. round(xᵢ/g)·g and g·Zᵢ are exact; their sum is rounded
// once to float64, which is a function of the ideal real-valued output alone
// (post-processing), so it cannot weaken the guarantee. It is exact whenever
// |yᵢ| < 2⁵³·g (note 2⁵³·g ≥ 2¹³·b), and every float64 of magnitude
// ≥ 2⁵³·g is itself a multiple of g, so outputs always lie on the grid gℤ
// and their set does not depend on the low bits of the input. (Residual caveats, as in Google's
// library: |Zᵢ| > 2⁵³ is rounded before the sum and |Zᵢ| > 2⁶³−1 is truncated,
// each with probability below e^{−4000}; an input within a few b of
// ±math.MaxFloat64 can overflow to ±Inf.)
//
// A Laplace is immutable and safe for concurrent use; concurrency safety of
// the noise then rests on the Source passed to AddNoise.
type Laplace struct {
	sensitivity float64
	eps         float64
	dim         int
	granularity float64 // g
	lambda      float64 // λ, per grid step
	effEps      float64
	noise       *discreteLaplace
}

// NewLaplace returns the secure Laplace mechanism for vectors of dimension
// dim whose ℓ1 sensitivity (over the whole vector) is sensitivity, at
// privacy level eps. For the ℓ1 ball of radius l (ClipL1) the sensitivity is
// 2l; the noise on each coordinate then has scale 2l/ε, not divided by d.
//
// It returns an error if sensitivity is not positive and finite, if eps is
// outside [MinEpsilon, MaxEpsilon] (NaN and +Inf included), if dim < 1, if
// Δ/ε is so extreme that the grid cannot be represented (g below the
// smallest normal float64 or 2⁵³·g overflowing), or if d·g > 2⁻¹⁰·Δ: then
// the rounding correction would inflate the noise by more than 0.1% (this
// happens only when ε ≲ d·2⁻²⁹, e.g. ε < 2·10⁻⁶ for d = 1000).
func NewLaplace(sensitivity, eps float64, dim int) (*Laplace, error) {
	const who = "NewLaplace"
	if math.IsNaN(sensitivity) || math.IsInf(sensitivity, 0) || !(sensitivity > 0) {
		return nil, invalid("%s: sensitivity = %v must be positive and finite", who, sensitivity)
	}
	if err := checkEpsilon(who, eps); err != nil {
		return nil, err
	}
	if dim < 1 {
		return nil, invalid("%s: dimension = %d must be at least 1", who, dim)
	}
	b := sensitivity / eps
	g := ceilPowerOfTwo(b / granularityParam)
	if math.IsInf(b, 0) || !(g >= 0x1p-1022) || math.IsInf(g*0x1p53, 0) {
		return nil, invalid("%s: scale sensitivity/epsilon = %v/%v = %v is outside the representable range [2^-982, 2^1010]", who, sensitivity, eps, b)
	}
	d := float64(dim)
	if d*g > maxGridInflation*sensitivity {
		return nil, invalid("%s: epsilon = %v is too small for dimension %d: the grid correction d*g = %v would inflate the noise by more than 2^-10 of the sensitivity %v (need roughly epsilon >= %.3g)",
			who, eps, dim, d*g, sensitivity, d*0x1p-29)
	}
	lambda := g * eps / (sensitivity + d*g)
	// steps ≥ Δ/g + d exactly: Δ/g is exact (g is a power of two and the
	// quotient is normal), and one ulp up covers the rounding of the sum.
	steps := math.Nextafter(sensitivity/g+d, math.Inf(1))
	// Make λ·steps ≤ ε hold exactly: FMA computes λ·steps − ε with a single
	// rounding, which preserves its sign.
	for math.FMA(lambda, steps, -eps) > 0 {
		lambda = math.Nextafter(lambda, 0)
	}
	return &Laplace{
		sensitivity: sensitivity,
		eps:         eps,
		dim:         dim,
		granularity: g,
		lambda:      lambda,
		// ⌊Δ/g⌋ + d ≤ steps, so effEps ≤ λ·steps ≤ ε, and rounding a
		// value ≤ ε to nearest cannot exceed the float64 ε.
		effEps: lambda * (math.Floor(sensitivity/g) + d),
		// λ ≥ 2⁻⁴⁰/(1 + 2⁻¹⁰) > 2⁻⁴¹ here, inside the sampler's range.
		noise: newDiscreteLaplace(lambda),
	}, nil
}

// Sensitivity returns Δ, the ℓ1 sensitivity the mechanism was built for.
func (l *Laplace) Sensitivity() float64 { return l.sensitivity }

// Epsilon returns the requested privacy parameter ε.
func (l *Laplace) Epsilon() float64 { return l.eps }

// Dim returns the dimension d of the vectors the mechanism accepts.
func (l *Laplace) Dim() int { return l.dim }

// Scale returns the nominal Laplace scale b = Δ/ε of the noise on each
// coordinate (the standard deviation is √2·b).
func (l *Laplace) Scale() float64 { return l.sensitivity / l.eps }

// NoiseScale returns the exact scale g/λ = (Δ + d·g)/ε of the discrete noise
// actually added: Pr[noise = g·z] ∝ exp(−|g·z|/NoiseScale()). It exceeds
// Scale() by a relative d·g/Δ ≤ 2⁻¹⁰ (typically ~10⁻¹²).
func (l *Laplace) NoiseScale() float64 { return l.granularity / l.lambda }

// Granularity returns the grid step g, the smallest power of two
// ≥ Scale()/2⁴⁰. Every output is an integer multiple of g.
func (l *Laplace) Granularity() float64 { return l.granularity }

// EffectiveEpsilon returns the privacy loss the discretised mechanism
// guarantees: λ·(⌊Δ/g⌋ + d), the largest log-likelihood ratio over pairs of
// inputs at ℓ1 distance ≤ Δ (at most ⌊Δ/g⌋ + d grid steps apart after
// rounding), for the ideal discrete Laplace with parameter λ.
//
// By construction it is ≤ Epsilon(); it falls short of it by a relative
// amount of about d·g/Δ + g/Δ (about 10⁻¹² for typical parameters).
// The sampler realises the discrete Laplace up to a relative error of about
// 10⁻¹⁵ in the probability ratios (see discreteLaplace), which is the only
// way in which the realised loss can differ from this value.
func (l *Laplace) EffectiveEpsilon() float64 { return l.effEps }

// AddNoise returns a fresh slice y with yᵢ = xᵢ + Laplace noise, as described
// on [Laplace]; x is not modified. len(x) must equal Dim() and x must be
// finite. AddNoise does NOT clip: the guarantee assumes x lies in a set of
// ℓ1 diameter ≤ Δ, so the caller must clip first (ClipL1 with Δ = 2l, or
// ClipBox / ClipScalar).
func (l *Laplace) AddNoise(x []float64, src Source) ([]float64, error) {
	const who = "Laplace.AddNoise"
	if len(x) != l.dim {
		return nil, invalid("%s: len(x) = %d, mechanism dimension is %d", who, len(x), l.dim)
	}
	if err := checkFinite(who, "x", x); err != nil {
		return nil, err
	}
	y := make([]float64, len(x))
	br := bitReader{src: src}
	for i, v := range x {
		y[i] = l.noisy(v, &br)
	}
	return y, nil
}

// AddNoiseScalar is AddNoise for a mechanism of dimension 1.
func (l *Laplace) AddNoiseScalar(x float64, src Source) (float64, error) {
	const who = "Laplace.AddNoiseScalar"
	if l.dim != 1 {
		return 0, invalid("%s: mechanism dimension is %d, not 1; use AddNoise", who, l.dim)
	}
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, invalid("%s: x = %v is not finite", who, x)
	}
	br := bitReader{src: src}
	return l.noisy(x, &br), nil
}

// noisy returns g·round(x/g) + g·Z for finite x.
func (l *Laplace) noisy(x float64, br *bitReader) float64 {
	g := l.granularity
	r := x // a float64 of magnitude ≥ 2⁵³·g is already a multiple of g
	if math.Abs(x) < 0x1p53*g {
		r = math.Round(x/g) * g // exact: g is a power of two
	}
	z := l.noise.sample(br)
	return r + float64(z)*g
}

// ceilPowerOfTwo returns the smallest power of two ≥ x for positive finite
// x (Google: ceilPowerOfTwo in noise/secure_noise_math.go), computed by
// frexp so the result is exact. It returns +Inf if that power overflows and
// NaN for x ≤ 0, NaN or ±Inf.
func ceilPowerOfTwo(x float64) float64 {
	if !(x > 0) || math.IsInf(x, 0) {
		return math.NaN()
	}
	frac, exp := math.Frexp(x) // x = frac·2^exp, frac in [0.5, 1)
	if frac == 0.5 {
		return x
	}
	return math.Ldexp(1, exp)
}
