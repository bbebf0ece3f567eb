package classifier

import "math"

// Fast exponential.
//
// fexp evaluates e^x for float32 x in float32 arithmetic (Cephes' expf
// scheme): k = round(x·log₂e) by the 1.5·2²³ rounding trick, r = x − k·ln2
// with ln2 split in two (Cody–Waite: k·C1 is exact) so |r| ≤ ln2/2 to within
// rounding, e^r = 1 + r + r²·P(r) with Cephes' degree-5 minimax P, and
// e^x = 2^k·e^r by writing k into the exponent bits. Cephes documents a peak
// relative error of 2.3e-7 for expf over ±88; TestFastExpAccuracy checks
// ≤ 1e-6 (the bound this package relies on) against math.Exp on a dense grid
// and random points and logs the observed maximum.
//
// It is branch-free and stays in float32 registers (no float32↔float64
// conversions, whose partial-register writes would chain one call's
// latency into the next), so loops over it run at throughput.
//
// Domain: x ∈ [expMin, 88] (k ≤ 127); callers flush arguments below expMin to 0
// (their result would be below the smallest normal float32, 2^-126, and is
// treated as an exact 0: see the package documentation for why that is
// exact to rounding where it is used).

// expMin is ln(2^-126), the argument below which e^x is not a normal float32.
const expMin = -87.33654

const (
	log2e32    = 1.44269504088896341
	expC1      = 0.693359375    // ln2 rounded to a few bits: k·expC1 is exact
	expC2      = -2.12194440e-4 // ln2 − expC1
	roundMagic = 12582912       // 1.5·2²³
)

func fexp(x float32) float32 {
	// Every product is converted to float32 explicitly: the conversion
	// rounds it and so forbids fusing it with the next addition (an FMA,
	// which GOAMD64=v3 would emit), keeping the result that of the
	// assembly kernels (stream_amd64.s) in every build.
	t := float32(x*log2e32) + roundMagic
	k := t - roundMagic
	r := x - float32(k*expC1) - float32(k*expC2)
	// P(r) by Estrin's scheme (shorter dependency chain than Horner, so
	// more independent calls overlap in the loops using fexp).
	r2 := r * r
	p01 := 5.0000001201e-1 + float32(1.6666665459e-1*r)
	p23 := 4.1665795894e-2 + float32(8.3334519073e-3*r)
	p45 := 1.3981999507e-3 + float32(1.9875691500e-4*r)
	p := p01 + float32(r2*(p23+float32(r2*p45)))
	p = float32(p*r2) + r + 1
	return p * math.Float32frombits(uint32(int32(k)+127)<<23)
}

// fexpFlush is fexp with arguments below expMin (and −Inf) giving 0.
func fexpFlush(x float32) float32 {
	if x < expMin {
		return 0
	}
	return fexp(x)
}
