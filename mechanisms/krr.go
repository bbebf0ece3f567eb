package mechanisms

import "math"

// krrFlipMargin enlarges the sampler's flip probability by a relative 2⁻⁴⁰
// so that floating-point error in computing it can only add privacy: the
// computed value has relative error below 2⁻⁵⁰ (a few ulps), so the enlarged
// value is never below the exact (K−1)/(e^ε+K−1).
const krrFlipMargin = 0x1p-40

// KRR is K-ary randomised response (Warner 1965; Wang, Wu & Hu 2014; thesis
// Eq 4.7, "flip mechanism" of Learning to Noise §4.1) on labels {0, …, K−1}:
//
//	p(ỹ = i | y = j) = e^ε / (e^ε + K − 1)   if i = j   (keep probability p)
//	                 = 1   / (e^ε + K − 1)   if i ≠ j   (flip probability q)
//
// It is ε-LDP: for every output i and inputs j, j', the ratio
// p(ỹ=i|y=j)/p(ỹ=i|y=j') is 1, p/q = e^ε or q/p. It is sampled as the
// thesis prescribes: keep y with probability p; otherwise output a label
// drawn uniformly from the OTHER K−1 labels (drawing from all K labels
// instead would change the probabilities and the ε).
//
// Exactness. The flip decision is Bernoulli(F), exact for the float64 F
// (no 2⁻⁵³ quantisation: see [Bernoulli]), and the replacement label is
// drawn by [IntN], exactly uniform. F is the flip probability
// (K−1)/(e^ε+K−1) enlarged by a relative 2⁻⁴⁰ so that rounding can only add
// privacy: the realised keep/flip ratio (1−F)(K−1)/F is at most e^ε, and its
// logarithm is reported by EffectiveEpsilon. Everything else
// (KeepProbability, FlipProbability, TransitionMatrix, the Warner estimator)
// uses the nominal Eq 4.7 values, which differ from the realised ones by at
// most 2⁻⁴⁰ relative (≤ 10⁻¹² absolute).
//
// A KRR is immutable and safe for concurrent use.
type KRR struct {
	eps       float64
	k         int
	keep      float64 // p, nominal
	flip      float64 // q, nominal, per other label
	contrast  float64 // p − q, computed without cancellation
	flipTotal float64 // F ≥ (K−1)q, the sampler's flip probability
	effEps    float64
}

// NewKRR returns K-ary randomised response with privacy level eps over k
// labels. It returns an error unless eps is in [MinEpsilon, MaxEpsilon]
// (NaN and +Inf are rejected: +Inf would mean "always keep", which is no
// privacy; callers wanting that should not call a mechanism) and k ≥ 2.
func NewKRR(eps float64, k int) (*KRR, error) {
	const who = "NewKRR"
	if err := checkEpsilon(who, eps); err != nil {
		return nil, err
	}
	if k < 2 {
		return nil, invalid("%s: number of labels K = %d must be at least 2", who, k)
	}
	// Work with e^{−ε} ≤ 1 so nothing overflows for large ε:
	// p = 1/(1 + (K−1)e^{−ε}), q = e^{−ε}/(1 + (K−1)e^{−ε}),
	// p − q = (1 − e^{−ε})/(1 + (K−1)e^{−ε}) = −expm1(−ε)/(…).
	em := math.Exp(-eps)
	km1 := float64(k - 1)
	den := 1 + km1*em
	flipTotal := km1 * em / den * (1 + krrFlipMargin)
	return &KRR{
		eps:       eps,
		k:         k,
		keep:      1 / den,
		flip:      em / den,
		contrast:  -math.Expm1(-eps) / den,
		flipTotal: flipTotal,
		// ln((1−F)(K−1)/F), the realised log-likelihood ratio.
		effEps: math.Log1p(-flipTotal) + math.Log(km1) - math.Log(flipTotal),
	}, nil
}

// K returns the number of labels.
func (r *KRR) K() int { return r.k }

// Epsilon returns the requested privacy parameter ε.
func (r *KRR) Epsilon() float64 { return r.eps }

// EffectiveEpsilon returns ln((1−F)(K−1)/F), the privacy loss of the sampler
// as implemented (F its flip probability, see [KRR]). It is ≤ Epsilon() and
// smaller by about 2⁻⁴⁰/(1−F) ≈ 10⁻¹².
func (r *KRR) EffectiveEpsilon() float64 { return r.effEps }

// KeepProbability returns p = e^ε/(e^ε+K−1), the probability of reporting
// the true label, computed stably as 1/(1 + (K−1)e^{−ε}).
func (r *KRR) KeepProbability() float64 { return r.keep }

// FlipProbability returns q = 1/(e^ε+K−1), the probability of reporting one
// particular other label (so the total flip probability is (K−1)q),
// computed stably as e^{−ε}/(1 + (K−1)e^{−ε}).
func (r *KRR) FlipProbability() float64 { return r.flip }

// TransitionMatrix returns a fresh K×K matrix R with R[i][j] = p(ỹ=i | y=j):
// p on the diagonal and q elsewhere. Each column sums to 1 (up to rounding)
// and R[j][j]/R[i][j] = e^ε for i ≠ j.
func (r *KRR) TransitionMatrix() [][]float64 {
	m := make([][]float64, r.k)
	cells := make([]float64, r.k*r.k)
	for i := range m {
		m[i] = cells[i*r.k : (i+1)*r.k : (i+1)*r.k]
		for j := range m[i] {
			if i == j {
				m[i][j] = r.keep
			} else {
				m[i][j] = r.flip
			}
		}
	}
	return m
}

// Randomise returns the randomised report of label y ∈ {0, …, K−1}: y itself
// with probability p, otherwise one of the other K−1 labels uniformly at
// random. It returns an error, naming y and K, if y is out of range.
func (r *KRR) Randomise(y int, src Source) (int, error) {
	if y < 0 || y >= r.k {
		return 0, invalid("KRR.Randomise: label y = %d is outside 0..K-1 for K = %d", y, r.k)
	}
	if !Bernoulli(src, r.flipTotal) {
		return y, nil
	}
	o := IntN(src, r.k-1) // uniform over the K−1 labels other than y:
	if o >= y {           // 0..y−1 map to themselves, y..K−2 to y+1..K−1
		o++
	}
	return o, nil
}
