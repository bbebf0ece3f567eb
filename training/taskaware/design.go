package taskaware

import (
	"errors"
	"math"
	"slices"
)

// Design is a water-filling encoder design and what it costs at the noise its
// real sensitivity requires.
type Design struct {
	// C is the water-filling parameter the scales were computed for (eq. 11
	// with c = C; the paper's 8r²/ε²).
	C float64
	// ZPrime is eq. 12's Z′ for C with the cap, i.e. the latent dimension.
	ZPrime int
	// Sigma2 are the scales σ_i² (Σσ_i² = 1), ZPrime of them.
	Sigma2 []float64
	// Delta1 is the ℓ1 sensitivity of the encoder with these scales (the
	// delta1 function's value); NoiseVar = 2(Delta1/ε)², the variance of
	// Laplace noise of scale b = Delta1/ε.
	Delta1, NoiseVar float64
	// Loss is eq. 9 at NoiseVar.
	Loss float64
}

// DesignAt returns the design for c: the water-filling scales (at most zmax),
// their sensitivity delta1(σ) (σ the square roots of the scales, ZPrime of
// them) and the loss at the noise b = Δ1/ε.
func DesignAt(lambda []float64, zmax int, eps, c float64, delta1 func(sigma []float64) (float64, error)) (Design, error) {
	s2, z := WaterFill(lambda, c, zmax)
	if z == 0 {
		return Design{}, errors.New("the task is constant on the auxiliary rows (every eigenvalue of PᵀP is 0)")
	}
	sigma := make([]float64, z)
	for i := range sigma {
		sigma[i] = math.Sqrt(s2[i])
	}
	d1, err := delta1(sigma)
	if err != nil {
		return Design{}, err
	}
	b := d1 / eps
	nv := 2 * b * b
	return Design{C: c, ZPrime: z, Sigma2: s2[:z], Delta1: d1, NoiseVar: nv, Loss: LossAtNoise(lambda, s2, nv)}, nil
}

// OptimiseDesign returns the water-filling design whose loss at its real
// noise is smallest: it minimises DesignAt(c).Loss over c > 0.
//
// Why this c: the paper's Prop. 4 gives the optimal scales for a known ratio
// c = σ_w²/Σσ_i², which under Assumption 1 is 8r²/ε² whatever the scales.
// For a box domain the ratio 2Δ1(σ)²/(ε²Σσ_i²) depends on the scales, so no
// fixed r is right; the paper's recipe (design at r_max, then recompute the
// noise) is one point of this search. Under Assumption 1 the minimum is at
// c = 8r²/ε² exactly (Prop. 4), so this reduces to the paper's design there
// (TestOptimiseDesignSphere).
//
// The search: a grid of 12 points per decade of c over the span that matters
// (from 10⁻³ of the smallest to 10³ times the largest of eq. 12's break
// points, where Z′ changes, and of the ratio the c → 0 design really has),
// the break points themselves (just below each, where the loss of the larger
// Z′ is smallest), then a golden-section refinement between the best grid
// point's neighbours.
func OptimiseDesign(lambda []float64, zmax int, eps float64, delta1 func(sigma []float64) (float64, error)) (Design, error) {
	at := func(c float64) (Design, error) { return DesignAt(lambda, zmax, eps, c, delta1) }
	d0, err := at(0)
	if err != nil {
		return Design{}, err
	}
	// Break points: Z′ ≥ k exactly when c < √λ_k/(Σ_{j≤k}√λ_j − k√λ_k).
	marks := []float64{d0.NoiseVar} // the ratio at c → 0 (Σσ² = 1)
	s := 0.0
	for k := 1; k <= min(zmax, len(lambda)); k++ {
		r := math.Sqrt(max(lambda[k-1], 0))
		s += r
		if den := s - float64(k)*r; r > 0 && den > 0 {
			marks = append(marks, r/den)
		}
	}
	lo, hi := math.Inf(1), 0.0
	for _, m := range marks {
		if m > 0 && !math.IsInf(m, 0) {
			lo, hi = min(lo, m), max(hi, m)
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = 1, 1
	}
	lo, hi = lo*1e-3, hi*1e3
	var cs []float64
	for c := lo; c <= hi*(1+1e-9); c *= math.Pow(10, 1.0/12) {
		cs = append(cs, c)
	}
	for _, m := range marks[1:] {
		cs = append(cs, m*(1-1e-9))
	}
	slices.Sort(cs)
	cs = slices.Compact(cs)
	best, bi := d0, -1
	for i, c := range cs {
		d, err := at(c)
		if err != nil {
			return Design{}, err
		}
		if d.Loss < best.Loss {
			best, bi = d, i
		}
	}
	if bi < 0 {
		return best, nil
	}
	// Golden section on log c between the neighbours of the best grid point.
	a, b := math.Log(cs[max(bi-1, 0)]), math.Log(cs[min(bi+1, len(cs)-1)])
	const g = 0.6180339887498949
	x1, x2 := b-g*(b-a), a+g*(b-a)
	f := func(x float64) (Design, error) { return at(math.Exp(x)) }
	d1, err := f(x1)
	if err != nil {
		return Design{}, err
	}
	d2, err := f(x2)
	if err != nil {
		return Design{}, err
	}
	for range 60 {
		if d1.Loss <= d2.Loss {
			b, x2, d2 = x2, x1, d1
			x1 = b - g*(b-a)
			if d1, err = f(x1); err != nil {
				return Design{}, err
			}
		} else {
			a, x1, d1 = x1, x2, d2
			x2 = a + g*(b-a)
			if d2, err = f(x2); err != nil {
				return Design{}, err
			}
		}
	}
	for _, d := range []Design{d1, d2} {
		if d.Loss < best.Loss {
			best = d
		}
	}
	return best, nil
}
