package audit

import (
	"math"

	"gonum.org/v1/gonum/mathext"
)

// ClopperPearsonLower returns the one-sided Clopper–Pearson lower confidence
// bound at level alpha for a binomial proportion p from k successes in n
// trials: the p with Pr[Bin(n, p) ≥ k] = alpha, i.e. the alpha quantile of
// Beta(k, n − k + 1); 0 when k = 0. For every p, Pr[bound > p] ≤ alpha.
// It panics unless 0 ≤ k ≤ n, n ≥ 1 and 0 < alpha < 1 (a programming error).
func ClopperPearsonLower(k, n int, alpha float64) float64 {
	checkBinomial(k, n, alpha)
	if k == 0 {
		return 0
	}
	// Rounded down by a relative 2⁻⁴⁰ to cover the quantile's error.
	return betaLowerQuantile(float64(k), float64(n-k+1), alpha) * (1 - 0x1p-40)
}

// ClopperPearsonUpper returns the one-sided Clopper–Pearson upper confidence
// bound at level alpha: the p with Pr[Bin(n, p) ≤ k] = alpha, i.e. one minus
// the alpha quantile of Beta(n − k, k + 1); 1 when k = n. For every p,
// Pr[bound < p] ≤ alpha. It panics like [ClopperPearsonLower].
func ClopperPearsonUpper(k, n int, alpha float64) float64 {
	checkBinomial(k, n, alpha)
	if k == n {
		return 1
	}
	// Pr[Bin(n, p) ≤ k] = I_{1−p}(n − k, k + 1): solve for q = 1 − p in the
	// lower tail, where the quantile is computed with full relative accuracy.
	// Rounded up (q by a relative 2⁻⁴⁰) to cover the quantile's error.
	return 1 - betaLowerQuantile(float64(n-k), float64(k+1), alpha)*(1-0x1p-40)
}

func checkBinomial(k, n int, alpha float64) {
	if n < 1 || k < 0 || k > n || !(alpha > 0 && alpha < 1) {
		panic("audit: Clopper-Pearson bound needs 0 <= k <= n, n >= 1 and 0 < alpha < 1")
	}
}

// betaLowerQuantile returns x ∈ [0, 1] with I_x(a, b) = q, for a, b > 0 and
// q ∈ (0, 1). gonum's InvRegIncBeta is tried first and kept when I_x(a, b)
// reproduces q to a relative 10⁻⁹; it is not reliable for every argument
// (e.g. a = 10⁶, b = 11, q = 5·10⁻⁷ returns a point where I_x = 0), so
// otherwise the quantile is found by bisection on the monotone I_x(a, b),
// to a relative 2⁻⁵⁰ in x.
func betaLowerQuantile(a, b, q float64) float64 {
	if x := mathext.InvRegIncBeta(a, b, q); x >= 0 && x <= 1 {
		if v := mathext.RegIncBeta(a, b, x); math.Abs(v-q) <= 1e-9*q {
			return x
		}
	}
	lo, hi := 0.0, 1.0
	for range 2000 {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi || hi-lo <= 0x1p-50*hi {
			break
		}
		if mathext.RegIncBeta(a, b, mid) < q {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo + (hi-lo)/2
}
