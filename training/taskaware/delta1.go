package taskaware

import (
	"errors"
	"fmt"
	"math"
)

// MaxZ bounds the latent dimension: [BoxL1Diameter] enumerates 2^(Z−1) sign
// vectors, exactly (the ℓ∞→ℓ1 norm it computes is NP-hard in general, so an
// exact value needs the enumeration).
const MaxZ = 16

// BoxL1Diameter returns the ℓ1 diameter of the image of the box
// {x : |x_j − mid_j| ≤ width_j/2} under the linear map with rows a (Z × n):
//
//	Δ1 = max_{x,x′ in the box} ‖A(x − x′)‖₁ = max_{t ∈ {±1}^Z} Σ_j |(Aᵀt)_j|·width_j,
//
// and the vertex direction s ∈ {±1}^n attaining it: the opposite vertices
// mid ± s∘width/2 are a pair at ℓ1 distance Δ1 after the map.
//
// Why: x − x′ ranges over the box [−width, width], and ‖v‖₁ = max_t tᵀv, so
// Δ1 = max_t max_{|d_j| ≤ width_j} (Aᵀt)ᵀd, and the inner maximum, a linear
// function over a box, is Σ_j |(Aᵀt)_j|·width_j, at d = width∘sign(Aᵀt).
// t and −t give the same value, so t_1 = +1 is fixed and the other Z − 1
// signs are enumerated in Gray-code order (one row of A added or subtracted
// per step; the sum is recomputed from scratch every 256 steps so that
// rounding cannot accumulate). The value depends on A and the box only, never
// on the rows a mechanism releases.
func BoxL1Diameter(a [][]float64, width []float64) (float64, []float64, error) {
	z := len(a)
	if z == 0 || z > MaxZ {
		return 0, nil, fmt.Errorf("the encoder has %d rows, want 1 to %d", z, MaxZ)
	}
	n := len(width)
	for i, r := range a {
		if len(r) != n {
			return 0, nil, fmt.Errorf("encoder row %d has %d values, want %d", i, len(r), n)
		}
		for _, v := range r {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return 0, nil, errors.New("the encoder is not finite")
			}
		}
	}
	for _, w := range width {
		if !(w >= 0) || math.IsInf(w, 0) {
			return 0, nil, fmt.Errorf("box width %v: want a finite number ≥ 0", w)
		}
	}
	t := make([]float64, z)
	u := make([]float64, n) // Aᵀt
	fresh := func() {
		clear(u)
		for i, r := range a {
			for j, v := range r {
				u[j] += t[i] * v
			}
		}
	}
	value := func() float64 {
		s := 0.0
		for j, v := range u {
			s += math.Abs(v) * width[j]
		}
		return s
	}
	for i := range t {
		t[i] = 1
	}
	fresh()
	best, bestT := value(), make([]float64, z)
	copy(bestT, t)
	for g := uint64(1); g < 1<<(z-1); g++ {
		// Gray code g ^ g>>1 flips the bit of g's lowest set bit: sign 1 + that bit.
		k := 1
		for b := g; b&1 == 0; b >>= 1 {
			k++
		}
		t[k] = -t[k]
		if g%256 == 0 {
			fresh()
		} else {
			for j, v := range a[k] {
				u[j] += 2 * t[k] * v
			}
		}
		if v := value(); v > best {
			best = v
			copy(bestT, t)
		}
	}
	// The value and direction of the best t, from scratch.
	copy(t, bestT)
	fresh()
	best = value()
	s := make([]float64, n)
	for j, v := range u {
		s[j] = 1
		if v < 0 {
			s[j] = -1
		}
	}
	return best, s, nil
}
