package mechanisms

import "math"

// This file reproduces, with this package's Source, the secure geometric
// samplers of Google's differential-privacy library: geometric and
// twoSidedGeometric in
// github.com/google/differential-privacy/go/v3/noise/laplace_noise.go
// (v3.0.0; Apache 2.0), described in "Secure Noise Generation",
// https://github.com/google/differential-privacy/blob/main/common_docs/Secure_Noise_Generation.pdf.
// They work for any λ without precomputation, but need ~70 expm1/log1p
// evaluations per draw at the Laplace mechanism's λ ≈ 2⁻⁴⁰; Laplace
// therefore uses discreteLaplace (same law, one exp per draw), and these
// serve as the reference implementation that the tests check against the
// same exact pmf.
//
// Two changes from Google's code, neither of which alters the algorithm:
//   - each "uniform float ≤ q" comparison is replaced by Bernoulli(src, q),
//     which is true with probability exactly q (Google's Uniform() is a float
//     in (0, 1], so its comparison is exact only up to float spacing);
//   - the midpoint formula is rewritten with expm1/log1p (identical value up
//     to rounding). The midpoint only affects speed, never the distribution:
//     any midpoint strictly inside the interval, paired with the matching
//     conditional probability q, samples the same law.

// geometric draws X ≥ 1 with Pr[X = k] = (1 − e^{−λ}) e^{−λ(k−1)}: the number
// of Bernoulli(1 − e^{−λ}) trials up to and including the first success.
// Samples larger than math.MaxInt64 are truncated to math.MaxInt64, which
// happens with probability e^{−λ(2⁶³−1)} (0 in float64 for any λ > 2⁻⁵³; the
// Laplace mechanism uses λ ≈ 2⁻⁴⁰).
//
// It binary-searches for X in (left, right], starting from (0, 2⁶³−1].
// Given X ∈ (left, right], the probability that X ≤ mid is
//
//	q = (1 − e^{−λ(mid−left)}) / (1 − e^{−λ(right−left)})
//	  = expm1(−λ(mid−left)) / expm1(−λ(right−left)),
//
// so keeping (left, mid] with probability q and (mid, right] otherwise
// preserves the conditional law at every step, and the search ends on a
// single integer. The midpoint is chosen so that q ≈ ½:
//
//	mid = left − ⌊ln(½(1 + e^{−λ(right−left)}))/λ⌋ = left − ⌊log1p(D/2)/λ⌋,
//
// with D = expm1(−λ(right−left)), which takes about log₂(1/λ) + 2 steps.
//
// Exactness. Every q is computed from expm1 with a relative error of a few
// ulps, and Bernoulli realises the computed q exactly, so each output
// probability has relative error at most ~2·steps·4·2⁻⁵³ ≈ 10⁻¹⁴ for the
// ≈ 45 steps of the Laplace mechanism; the privacy loss is therefore within
// about 10⁻¹⁴ of the ideal one. Unlike inverting a CDF of a floating-point
// uniform, no output has zero or grossly wrong probability: the support is
// every integer up to the truncation point.
func geometric(src Source, lambda float64) int64 {
	// Truncation, as in Google's code: Pr[X > MaxInt64] = e^{−λ·MaxInt64}.
	if Bernoulli(src, math.Exp(-lambda*math.MaxInt64)) {
		return math.MaxInt64
	}
	left, right := int64(0), int64(math.MaxInt64) // X in (left, right]
	// den = expm1(−λ(right−left)) = −Pr[X ∈ (left, right]] / e^{−λ·left}.
	den := math.Expm1(-lambda * float64(right-left))
	for left+1 < right {
		mid := left - int64(math.Floor(math.Log1p(den/2)/lambda))
		// Keep mid strictly inside the interval (a safeguard against
		// rounding, and against an out-of-range float→int conversion).
		if mid <= left {
			mid = left + 1
		} else if mid >= right {
			mid = right - 1
		}
		num := math.Expm1(-lambda * float64(mid-left))
		if Bernoulli(src, num/den) {
			right = mid
			den = num
		} else {
			left = mid
			den = math.Expm1(-lambda * float64(right-left))
		}
	}
	return right
}

// twoSidedGeometric draws Z ∈ ℤ with Pr[Z = z] = tanh(λ/2) e^{−λ|z|}, the
// discrete Laplace distribution (Google: twoSidedGeometric). It draws
// |Z| = X − 1 with X from geometric and a uniform sign, and redraws the
// pair (0, −) so that 0 is not counted twice: then Pr[Z = z] ∝ e^{−λ|z|}
// for every z, with the same exactness as geometric.
func twoSidedGeometric(src Source, lambda float64) int64 {
	for {
		s := geometric(src, lambda) - 1
		negative := src.Uint64()&1 == 1
		if !negative {
			return s
		}
		if s != 0 {
			return -s
		}
	}
}
