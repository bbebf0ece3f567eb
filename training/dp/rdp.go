// Package dp is central differential privacy for training: the Rényi-DP accountant of the Poisson-
// sampled Gaussian mechanism (DP-SGD), its conversion to (ε, δ), and the calibration of the noise
// multiplier to a target. It is pure math: the trainers clip per-example gradients and add the noise.
package dp

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// Orders are the Rényi orders α the accountant evaluates (integers: the binomial expansion below is
// exact for them; a finer grid of fractional orders would give slightly smaller ε, never a larger one).
var Orders = func() []int {
	var o []int
	for a := 2; a <= 64; a++ {
		o = append(o, a)
	}
	for _, a := range []int{80, 96, 128, 160, 192, 256, 384, 512} {
		o = append(o, a)
	}
	return o
}()

// RDPSampledGaussian returns the Rényi DP, at integer order alpha ≥ 2, of one step of the sampled
// Gaussian mechanism: each example is included with probability q (Poisson sampling), the sum of the
// included examples' gradients, each clipped to ℓ2 norm C, gets N(0, (σC)²) noise. By Mironov, Talwar
// and Zhang, "Rényi Differential Privacy of the Sampled Gaussian Mechanism" (2019, §3.3), for integer α
//
//	ε(α) = log A_α / (α − 1),   A_α = Σ_{k=0}^{α} C(α, k) (1 − q)^{α−k} q^k exp((k² − k)/(2σ²)),
//
// summed here in log space. q = 1 (no sampling) is the Gaussian mechanism's α/(2σ²).
func RDPSampledGaussian(q, sigma float64, alpha int) float64 {
	switch {
	case q == 0:
		return 0
	case q == 1:
		return float64(alpha) / (2 * sigma * sigma)
	case math.IsInf(sigma, 1):
		return 0
	}
	a := float64(alpha)
	logA := math.Inf(-1)
	for k := 0; k <= alpha; k++ {
		kf := float64(k)
		lgAlpha, _ := math.Lgamma(a + 1)
		lgK, _ := math.Lgamma(kf + 1)
		lgRest, _ := math.Lgamma(a - kf + 1)
		term := lgAlpha - lgK - lgRest + kf*math.Log(q) + (a-kf)*math.Log1p(-q) + (kf*kf-kf)/(2*sigma*sigma)
		logA = logAdd(logA, term)
	}
	return logA / (a - 1)
}

func logAdd(x, y float64) float64 {
	if math.IsInf(x, -1) {
		return y
	}
	if math.IsInf(y, -1) {
		return x
	}
	if x < y {
		x, y = y, x
	}
	return x + math.Log1p(math.Exp(y-x))
}

// Epsilon returns the (ε, δ)-DP guarantee of steps compositions of the sampled Gaussian mechanism
// (q, σ), and the order that gives it: the RDP of the composition is steps·ε(α) at every α, and
// (α, ρ)-RDP implies (ρ + log(1/δ)/(α − 1), δ)-DP (Mironov 2017, Prop. 3); the smallest over Orders.
func Epsilon(q, sigma float64, steps int, delta float64) (eps float64, order int) {
	eps = math.Inf(1)
	for _, a := range Orders {
		e := float64(steps)*RDPSampledGaussian(q, sigma, a) + math.Log(1/delta)/float64(a-1)
		if e < eps {
			eps, order = e, a
		}
	}
	return eps, order
}

// MaxNoiseMultiplier bounds Calibrate: a noise multiplier above it drowns every gradient (the target
// is refused instead).
const MaxNoiseMultiplier = 50

// Calibrate returns the smallest noise multiplier σ (to 0.1 %) with which steps steps at sampling rate
// q are (targetEps, delta)-DP, or an error saying why the target cannot be met.
func Calibrate(q float64, steps int, targetEps, delta float64) (float64, error) {
	switch {
	case !(q > 0 && q <= 1):
		return 0, fmt.Errorf("sampling rate %v: want 0 < q ≤ 1", q)
	case steps < 1:
		return 0, fmt.Errorf("%d steps", steps)
	case !(targetEps > 0) || math.IsInf(targetEps, 0):
		return 0, fmt.Errorf("epsilon %v: want a positive number", targetEps)
	case !(delta > 0 && delta < 1):
		return 0, fmt.Errorf("delta %v: want 0 < δ < 1", delta)
	}
	if e, _ := Epsilon(q, MaxNoiseMultiplier, steps, delta); e > targetEps {
		return 0, fmt.Errorf("(ε = %g, δ = %g) cannot be met with %d steps at sampling rate %.4g: even noise multiplier %d gives ε = %.3g "+
			"(train fewer epochs, use a smaller batch, or a larger table)", targetEps, delta, steps, q, MaxNoiseMultiplier, e)
	}
	lo, hi := 0.0, float64(MaxNoiseMultiplier)
	for hi-lo > 1e-3*hi {
		mid := (lo + hi) / 2
		if e, _ := Epsilon(q, mid, steps, delta); e <= targetEps {
			hi = mid
		} else {
			lo = mid
		}
	}
	if hi <= 0 {
		return 0, errors.New("calibration failed")
	}
	return hi, nil
}

// Target is the central DP a training run must meet (Epsilon, Delta), and after training what it met.
type Target struct {
	Epsilon float64 `json:"epsilon"`
	Delta   float64 `json:"delta,omitempty"`
	// Set by training: the noise multiplier σ (noise N(0, (σC)²) on each step's clipped gradient sum),
	// the Poisson sampling rate, the number of steps, the ε the accountant gives for them (≤ Epsilon)
	// and the Rényi order it was read at.
	NoiseMultiplier float64 `json:"noise_multiplier,omitempty"`
	SamplingRate    float64 `json:"sampling_rate,omitempty"`
	Steps           int     `json:"steps,omitempty"`
	Spent           float64 `json:"spent_epsilon,omitempty"`
	Order           int     `json:"rdp_order,omitempty"`
}

// PoissonSample appends to dst the rows 0..n−1 each included with probability q independently, in
// order, drawing the geometric gaps between included rows (about q·n draws, not n).
func PoissonSample(r *rand.Rand, n int, q float64, dst []int) []int {
	if q >= 1 {
		for i := range n {
			dst = append(dst, i)
		}
		return dst
	}
	logq := math.Log1p(-q)
	for i := -1; ; {
		u := 1 - r.Float64() // in (0, 1]
		gap := math.Floor(math.Log(u) / logq)
		if gap >= float64(n) {
			return dst
		}
		if i += 1 + int(gap); i >= n {
			return dst
		}
		dst = append(dst, i)
	}
}
