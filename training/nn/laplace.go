package nn

import (
	"math"
	"math/rand/v2"
)

// StdLaplace draws ξ ~ Laplace(0, 1) as −sign(u)·log(1 − 2|u|), u ~ U(−½, ½).
// u is drawn from the 2⁵³ multiples of 2⁻⁵³ in [0, 1) shifted by −½ (training noise from a seeded stream; releases draw theirs in package mechanisms), so
// 1 − 2|u| ≥ 2⁻⁵² > 0 and the log is finite (|ξ| ≤ 36); u = 0 gives 0.
func StdLaplace(r *rand.Rand) float64 {
	u := r.Float64() - 0.5
	if u < 0 {
		return math.Log1p(2 * u) // = −(−1)·(−log(1 − 2|u|))
	}
	return -math.Log1p(-2 * u)
}
