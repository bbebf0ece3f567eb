package classifier

import "math"

// Fast exponential.
//
// fexp evaluates e^x for float32 x by range reduction and a polynomial, all
// in float64: k = round(x·log₂e) (by the 1.5·2⁵² rounding trick), r = x − k·ln2
// with |r| ≤ ln2/2, e^r by its degree-6 Taylor polynomial in Horner form, and
// e^x = 2^k·e^r by writing k into the exponent bits. The truncation error of
// the polynomial is at most |r|⁷/7!·e^|r| ≤ 1.7e-7 relative, float64 rounding
// adds ~1e-15, and the final rounding to float32 at most 2^-24 ≈ 6e-8, so the
// relative error is below 2.3e-7 (TestFastExpAccuracy checks ≤ 1e-6 on a
// dense grid and random points). It is branch-free, so the loops using it
// are plain straight-line arithmetic.
//
// Domain: x ∈ [expMin, 88.7]; callers flush arguments below expMin to 0
// (their result would be below the smallest normal float32, 2^-126, and is
// treated as an exact 0: see the package documentation for why that is
// exact to rounding where it is used).

// expMin is ln(2^-126), the argument below which e^x is not a normal float32.
const expMin = -87.33654

const (
	log2e      = 1.4426950408889634
	ln2        = 0.6931471805599453
	roundMagic = 0x1.8p52
)

func fexp(x float32) float32 {
	xd := float64(x)
	t := xd*log2e + roundMagic
	k := t - roundMagic
	r := xd - k*ln2
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720))))))
	return float32(p * math.Float64frombits(uint64(int64(k)+1023)<<52))
}

// fexpFlush is fexp with arguments below expMin (and −Inf) giving 0.
func fexpFlush(x float32) float32 {
	if x < expMin {
		return 0
	}
	return fexp(x)
}
