package audit

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/mathext"
)

// binomTail returns Pr[Bin(n, p) ≥ k] (upper) via the incomplete beta
// function: I_p(k, n − k + 1).
func binomUpperTail(k, n int, p float64) float64 {
	if k == 0 {
		return 1
	}
	return mathext.RegIncBeta(float64(k), float64(n-k+1), p)
}

// TestClopperPearson: the bounds solve their defining equations (the
// binomial tail at the bound equals α) to a relative 10⁻⁶, including the
// corner where gonum's InvRegIncBeta is wrong (k close to n, tiny α),
// bracket the estimate k/n, and have the textbook values for small n.
func TestClopperPearson(t *testing.T) {
	cases := []struct {
		k, n  int
		alpha float64
	}{
		{5, 10, 0.025}, {0, 10, 0.025}, {10, 10, 0.025}, {1, 1_000_000, 5e-7},
		{30, 1_000_000, 5e-7}, {300_000, 500_000, 5e-7}, {999_990, 1_000_000, 5e-7},
		{62_500, 500_000, 5e-8}, {499_999, 500_000, 1e-9}, {7, 8, 0.3},
	}
	for _, c := range cases {
		lo := ClopperPearsonLower(c.k, c.n, c.alpha)
		up := ClopperPearsonUpper(c.k, c.n, c.alpha)
		phat := float64(c.k) / float64(c.n)
		if !(lo <= phat && phat <= up && lo >= 0 && up <= 1) {
			t.Errorf("k=%d n=%d: [%v, %v] does not bracket %v", c.k, c.n, lo, up, phat)
		}
		// The bound solves its defining equation: the binomial tail at it
		// is α to a relative 10⁻⁶, or α lies between the tails at the
		// float64 neighbours of the bound (a bound within an ulp of 1
		// cannot be closer).
		if c.k > 0 {
			// Pr[Bin(n, lo) ≥ k] = α, increasing in lo.
			tail := func(p float64) float64 { return binomUpperTail(c.k, c.n, p) }
			if !solves(tail, lo, c.alpha, true) {
				t.Errorf("k=%d n=%d α=%v: Pr[Bin(n, %v) >= k] = %v", c.k, c.n, c.alpha, lo, tail(lo))
			}
		} else if lo != 0 {
			t.Errorf("k=0: lower bound %v, want 0", lo)
		}
		if c.k < c.n {
			// Pr[Bin(n, up) ≤ k] = I_{1−up}(n − k, k + 1) = α, decreasing in up.
			tail := func(p float64) float64 { return mathext.RegIncBeta(float64(c.n-c.k), float64(c.k+1), 1-p) }
			if !solves(tail, up, c.alpha, false) {
				t.Errorf("k=%d n=%d α=%v: Pr[Bin(n, %v) <= k] = %v", c.k, c.n, c.alpha, up, tail(up))
			}
		} else if up != 1 {
			t.Errorf("k=n: upper bound %v, want 1", up)
		}
	}
	// Textbook: k = 5 of n = 10, two-sided 95% = one-sided 2.5% each:
	// [0.187086, 0.812914].
	if lo, up := ClopperPearsonLower(5, 10, 0.025), ClopperPearsonUpper(5, 10, 0.025); math.Abs(lo-0.187086) > 1e-6 || math.Abs(up-0.812914) > 1e-6 {
		t.Errorf("CP(5, 10) = [%v, %v], want [0.187086, 0.812914]", lo, up)
	}
	// k = 0 of n: the upper bound is 1 − α^{1/n} (the "rule of three").
	if up, want := ClopperPearsonUpper(0, 1000, 0.05), 1-math.Pow(0.05, 1.0/1000); math.Abs(up-want) > 1e-12 {
		t.Errorf("CP upper(0, 1000) = %v, want %v", up, want)
	}
}

// solves reports whether f(x) = target to a relative 10⁻⁶, or target lies
// between f at the float64 neighbours of x (f increasing if inc, else
// decreasing).
func solves(f func(float64) float64, x, target float64, inc bool) bool {
	if math.Abs(f(x)-target) <= 1e-6*target {
		return true
	}
	below, above := f(math.Nextafter(x, 0)), f(math.Nextafter(x, 1))
	if !inc {
		below, above = above, below
	}
	return below <= target && target <= above
}
