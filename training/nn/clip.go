package nn

import (
	"math"

	"github.com/ldpsql/ldpsql/mechanisms"
)

// l1Safe32 reports whether Σ|vᵢ| ≤ l is certain for the float32 values v:
// in exact arithmetic, for a float64 summation in any order (what
// sdk.OutputSet.Contains does) and for a float32 summation in any order.
//
// s below is the float64 left-to-right sum of the |vᵢ| (exact conversions).
// The exact sum S is ≤ ŝ(1+γ₆₄) and a float32 summation in any order gives at
// most S(1+γ₃₂), with γ_u = (d−1)u/(1−(d−1)u) (Higham, §4.2), u = 2⁻²⁴ for
// float32. c = 1 + (d+2)·2⁻²³ bounds (1+γ₆₄)(1+γ₃₂) and the rounding of s·c
// itself for every d < 2²⁰ (the float64 bound, also summing in any order, is
// weaker still).
func l1Safe32(v []float32, l float64) bool {
	var s float64
	for _, x := range v {
		s += math.Abs(float64(x))
	}
	c := 1 + float64(len(v)+2)*0x1p-23
	return s*c <= l // false for NaN and +Inf
}

// toward0 rounds x to a float32 of no larger magnitude.
func toward0(x float64) float32 {
	f := float32(x)
	if math.Abs(float64(f)) > math.Abs(x) {
		f = math.Nextafter32(f, 0)
	}
	return f
}

// ClipL1To32 writes ν(h) = h·min(1, l/‖h‖₁) to out as float32 values whose ℓ1
// norm is certainly ≤ l (see l1Safe32); h must be finite, len(out) ==
// len(h) < 2²⁰, 0 < l ≤ 1e9. A vector that already passes the check after
// rounding toward zero is returned as rounded; otherwise h is scaled by
// mechanisms.ClipL1 (float64, overflow-safe) onto the ball of a radius a hair
// inside l, l·(1 − (d+2)·2⁻²¹), whose float32 rounding toward zero then
// passes (the margin is 4× what the check needs); should it not, the radius
// is halved until it does, or, in the limit, the result is 0.
//
// The direction is that of h up to float32 rounding; the relative shrinkage
// from the margin is below 10⁻⁵ for d ≤ 20.
func ClipL1To32(h []float64, l float64, out []float32) {
	for i, x := range h {
		out[i] = toward0(x)
	}
	if l1Safe32(out, l) {
		return
	}
	r := l * (1 - float64(len(h)+2)*0x1p-21)
	for range 1100 {
		v, err := mechanisms.ClipL1(h, r)
		if err == nil {
			for i, x := range v {
				out[i] = toward0(x)
			}
			if l1Safe32(out, l) {
				return
			}
		}
		r /= 2
	}
	clear(out)
}
