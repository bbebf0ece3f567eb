package mechanisms

import "math"

// Clipping projects an input onto the set whose diameter a mechanism's
// sensitivity was calibrated to. A mechanism's guarantee holds only for
// inputs in that set, so the clip is part of the mechanism: callers must clip
// every input, for every individual, immediately before adding noise.
//
// All clip functions return a fresh slice (the input is never modified),
// reject NaN and ±Inf in inputs and bounds with an error naming the offending
// index and value, and never return a vector outside the set.

// ClipScalar returns x clamped to [lo, hi]. It requires lo < hi and all three
// arguments finite. The sensitivity of the clipped value is hi − lo.
func ClipScalar(x, lo, hi float64) (float64, error) {
	const who = "ClipScalar"
	if err := checkFinite(who, "(x, lo, hi)", []float64{x, lo, hi}); err != nil {
		return 0, err
	}
	if !(lo < hi) {
		return 0, invalid("%s: need lo < hi, got lo = %v, hi = %v", who, lo, hi)
	}
	return math.Min(math.Max(x, lo), hi), nil
}

// ClipBox clamps each coordinate h[i] to [lo[i], hi[i]]. The three slices
// must have the same, non-zero length, all values must be finite and
// lo[i] < hi[i] for every i. The ℓ1 sensitivity of the result is
// Σᵢ (hi[i] − lo[i]).
func ClipBox(h, lo, hi []float64) ([]float64, error) {
	const who = "ClipBox"
	if len(h) == 0 {
		return nil, invalid("%s: empty vector", who)
	}
	if len(lo) != len(h) || len(hi) != len(h) {
		return nil, invalid("%s: lengths differ: len(h) = %d, len(lo) = %d, len(hi) = %d", who, len(h), len(lo), len(hi))
	}
	for _, c := range []struct {
		name string
		v    []float64
	}{{"h", h}, {"lo", lo}, {"hi", hi}} {
		if err := checkFinite(who, c.name, c.v); err != nil {
			return nil, err
		}
	}
	out := make([]float64, len(h))
	for i := range h {
		if !(lo[i] < hi[i]) {
			return nil, invalid("%s: need lo[%d] < hi[%d], got lo = %v, hi = %v", who, i, i, lo[i], hi[i])
		}
		out[i] = math.Min(math.Max(h[i], lo[i]), hi[i])
	}
	return out, nil
}

// ClipL1 returns h·min(1, l/‖h‖₁), the ℓ1-rescaling activation ν₁ of the
// thesis (Sec 4.2.1): the result lies in the ℓ1 ball of radius l, so two
// clipped vectors are at ℓ1 distance at most 2l and the Laplace mechanism
// must use sensitivity Δ = 2l.
//
// Guarantee. For the returned vector v, the exact (real-number) sum Σ|vᵢ| is
// ≤ l, and so is the float64 sum of the |vᵢ| taken in ANY order. To make that
// hold despite rounding, a vector that needs shrinking is scaled to a radius
// a hair inside l, l·(1 − (d+2)·2⁻⁵⁰) (d = len(h); about 10⁻¹² relative for
// d = 1000), and the result is checked with a rigorous bound on summation
// error; should the check fail it is shrunk again, and in the limit replaced
// by the zero vector. A vector that already passes the check, in particular
// any h with ‖h‖₁ ≤ l·(1 − (d+2)·2⁻⁵⁰), is returned unchanged (copied), so
// ClipL1 is idempotent.
//
// h = 0 is returned as is (no division by ‖h‖₁ = 0). Magnitudes up to
// math.MaxFloat64 are handled without overflow. Signs are preserved and the
// direction is preserved up to rounding (coordinates far below the largest
// can underflow to zero). l must be positive and finite, h non-empty and
// finite.
func ClipL1(h []float64, l float64) ([]float64, error) {
	const who = "ClipL1"
	if math.IsNaN(l) || math.IsInf(l, 0) || !(l > 0) {
		return nil, invalid("%s: radius l = %v must be positive and finite", who, l)
	}
	if len(h) == 0 {
		return nil, invalid("%s: empty vector", who)
	}
	if err := checkFinite(who, "h", h); err != nil {
		return nil, err
	}
	out := make([]float64, len(h))
	if l1WithinRadius(h, l) {
		copy(out, h)
		return out, nil
	}

	// Work with h scaled by 2^-e, where 2^e ≥ max|hᵢ| (exact, unless tiny
	// coordinates underflow, which the final check absorbs), so that the
	// sum cannot overflow: every scaled |hᵢ| is < 1 and the sum is < d.
	var m float64
	for _, x := range h {
		m = math.Max(m, math.Abs(x))
	}
	// m > 0 here: a zero vector is within any radius.
	_, e := math.Frexp(m) // m = f·2^e with f in [0.5, 1)
	var s float64
	for _, x := range h {
		s += math.Abs(math.Ldexp(x, -e))
	}
	target := l * (1 - float64(len(h)+2)*0x1p-50)
	for attempt := 0; attempt < 1100; attempt++ {
		f := target / s
		for i, x := range h {
			out[i] = math.Ldexp(x, -e) * f
		}
		if l1WithinRadius(out, l) {
			return out, nil
		}
		// Not reached in practice (the margin covers the rounding); shrink
		// a little, then by halves, which reaches zero within ~1100 steps
		// from any float64.
		if attempt < 4 {
			target *= 1 - 0x1p-30
		} else {
			target /= 2
		}
	}
	clear(out)
	return out, nil
}

// l1WithinRadius reports whether Σ|vᵢ| ≤ l is certain both in exact
// arithmetic and for a float64 summation in any order.
//
// Recursive float summation of d non-negative terms has relative error at
// most γ = (d−1)u/(1−(d−1)u), u = 2⁻⁵³ (Higham, Accuracy and Stability of
// Numerical Algorithms, §4.2; exact under underflow since additions of
// subnormals are exact). With ŝ the left-to-right sum, the exact sum S is
// ≤ ŝ/(1−γ), and any other order gives at most S(1+γ) ≤ ŝ(1+γ)/(1−γ). The
// factor c = 1 + 4(d+2)u bounds (1+γ)/(1−γ) and the rounding of ŝ·c itself,
// for any d below 2⁴⁰.
func l1WithinRadius(v []float64, l float64) bool {
	var s float64
	for _, x := range v {
		s += math.Abs(x)
	}
	c := 1 + float64(len(v)+2)*0x1p-51
	return s*c <= l // false if s overflowed to +Inf
}
