// Package taskaware is the linear task-aware LDP encoder of Cheng, Tang and
// Chinchali, "Task-aware privacy preservation for multi-dimensional data"
// (ICML 2022; seed 003, spec Part II.3): for a linear task y = Kx with
// squared-error loss, a linear encoder φ = A x that keeps the directions the
// task needs, scaled by a reverse water-filling against the Laplace noise,
// and the LMMSE decoder for the noise that is actually added.
//
// Notation (spec II.3): μ and Σ are the mean and covariance of the auxiliary
// rows, L = Σ^{1/2} (the symmetric square root; any square root gives the same
// design), h = L⁻¹(x − μ) the whitened row, P = K L, and PᵀP q_i = λ_i q_i
// with λ_1 ≥ … ≥ λ_n ≥ 0. The encoder in h-space is E = diag(σ_i) Qᵀ (rows
// i ≤ Z only), the noise w ~ Lap^Z(0, b) with b = Δ1/ε (variance σ_w² =
// 2b²), and the decoder ĥ = Eᵀ(EEᵀ + σ_w² I)⁻¹(φ + w) (Prop. 1), i.e.
// column i is q_i σ_i/(σ_i² + σ_w²). The expected task loss is (eq. 9)
//
//	L = Σ_i λ_i − Σ_{i≤Z} λ_i σ_i²/(σ_i² + σ_w²).
//
// The closed forms of this file are the paper's results under its
// Assumption 1 (the whitened domain is a ball of radius r, so that Δ1 =
// 2r√Σσ_i² and σ_w² = c·Σσ_i² with c = 8r²/ε²): the water-filling of
// Prop. 4 (eqs. 11–12), its loss (eq. 13), and the two baselines of
// Appendix A.7.3 (eqs. 58, 59). They are exact and tested against the
// paper's Fig. 3 settings.
//
// Assumption 1 never holds for a real domain, and the paper's own code
// calibrates the noise to the empirical sensitivity of the data, which is
// not LDP for anyone outside it (spec II.6, pitfall 1). [Fit] instead
// records a public input box (the auxiliary rows' per-feature range, inputs
// are clipped to it), computes the exact ℓ1 sensitivity of the linear
// encoder over that box ([BoxL1Diameter], a data-independent vertex
// formula), and chooses the water-filling parameter c that minimises eq. 9
// at the noise that sensitivity really requires ([OptimiseDesign]). Under
// Assumption 1 that choice is the paper's c = 8r²/ε² (Prop. 4), so the
// design generalises the paper's recipe (Theorem 1) rather than replacing
// it; giving "r" reproduces the recipe itself.
package taskaware

import (
	"math"
)

// WaterFill returns the paper's optimal scales σ_i² (eq. 11, normalised to
// Σσ_i² = M = 1) for eigenvalues lambda (descending, ≥ 0) and c = σ_w²/M,
// using at most zmax components, and Z′, the number of non-zero scales.
//
// Z′ is the largest k ≤ min(zmax, n) with √λ_k/Σ_{j≤k}√λ_j·(1 + kc) − c > 0
// (eq. 12). The left side is non-increasing in k (it changes by
// (√λ_{k+1} − √λ_k)(1 + kc) ≤ 0 from k to k+1, up to the positive factor
// Σ_{j≤k+1}√λ_j), so the k that satisfy it are a prefix 1..Z′ and the
// paper's code, which stops at the first failure, finds the same Z′. The
// optimum over encoders of rank ≤ zmax is the water-filling over the top zmax
// components alone, hence the cap. k = 1 always qualifies when λ_1 > 0; with
// λ_1 = 0 it returns Z′ = 0 and all scales 0.
func WaterFill(lambda []float64, c float64, zmax int) (sigma2 []float64, zPrime int) {
	n := len(lambda)
	sigma2 = make([]float64, n)
	sqrt := make([]float64, n)
	for i, l := range lambda {
		sqrt[i] = math.Sqrt(max(l, 0))
	}
	s := 0.0
	sum := 0.0 // Σ_{j≤Z′} √λ_j
	for k := 1; k <= min(zmax, n); k++ {
		s += sqrt[k-1]
		if !(sqrt[k-1] > 0) || !(sqrt[k-1]/s*(1+float64(k)*c)-c > 0) {
			break
		}
		zPrime, sum = k, s
	}
	for i := 0; i < zPrime; i++ {
		sigma2[i] = sqrt[i]/sum*(1+float64(zPrime)*c) - c
	}
	return sigma2, zPrime
}

// LossTaskAware is eq. 13, the task-aware loss under Assumption 1 with
// c = 8r²/ε², and Z′ (eq. 12, with no cap):
//
//	L = c/(1 + Z′c)·(Σ_{i≤Z′}√λ_i)² + Σ_{i>Z′} λ_i.
func LossTaskAware(lambda []float64, c float64) (float64, int) {
	_, z := WaterFill(lambda, c, len(lambda))
	s, rest := 0.0, 0.0
	for i, l := range lambda {
		if i < z {
			s += math.Sqrt(l)
		} else {
			rest += max(l, 0)
		}
	}
	return c/(1+float64(z)*c)*s*s + rest, z
}

// LossTaskAgnostic is eq. 58, the task-agnostic baseline (E = I, Z = n) under
// Assumption 1 with L = I: n c/(1 + n c)·Σλ_i.
func LossTaskAgnostic(lambda []float64, c float64) float64 {
	n := float64(len(lambda))
	return n * c / (1 + n*c) * sumPos(lambda)
}

// LossPrivacyAgnostic is eq. 59, the privacy-agnostic baseline with z equal
// scales under Assumption 1 with L = I: z c/(1 + z c)·Σ_{i≤z}λ_i +
// Σ_{i>z}λ_i.
func LossPrivacyAgnostic(lambda []float64, c float64, z int) float64 {
	z = min(z, len(lambda))
	zc := float64(z) * c
	return zc/(1+zc)*sumPos(lambda[:z]) + sumPos(lambda[z:])
}

// LossAtNoise is eq. 9: the expected task loss of the encoder with scales
// sigma2 (σ_i², along the eigenvectors of PᵀP, zero past the encoder's
// rows) and its LMMSE decoder, under noise of variance noiseVar per latent
// coordinate. It holds for any σ, not only the water-filling's.
func LossAtNoise(lambda, sigma2 []float64, noiseVar float64) float64 {
	l := sumPos(lambda)
	for i, s := range sigma2 {
		if s > 0 {
			l -= max(lambda[i], 0) * s / (s + noiseVar)
		}
	}
	return max(l, 0)
}

func sumPos(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += max(x, 0)
	}
	return s
}
