package mechanisms

import "math"

// Warner estimation of label frequencies from K-ary randomised-response
// reports (Warner 1965; Barber, "Private machine learning via randomised
// response", eq. 2 with its sign typo corrected).
//
// Let f_c be the true fraction of the n individuals with label c and f̃_c the
// fraction of reports equal to c. With p the keep and q the per-other-label
// flip probability of [KRR],
//
//	E[f̃_c] = p·f_c + q·(1 − f_c) = q + (p − q)·f_c,
//
// so the unbiased (method-of-moments) estimator is
//
//	f̂_c = (f̃_c − q) / (p − q),   p − q = (e^ε − 1)/(e^ε + K − 1),
//
// with variance Var(f̂_c) = Var(f̃_c)/(p − q)², estimated by the plug-in
// f̃_c(1 − f̃_c)/(n (p − q)²). For K = 2, q is the flip probability p_f and
// p − q = 1 − 2p_f, giving Warner's (f̃ − p_f)/(1 − 2p_f); the paper's
// "(f̃ + p)/(1 − 2p)" is a sign typo.
//
// Clipping f̂_c to [0, 1] gives the constrained maximum-likelihood estimate
// (it is what WarnerEstimate returns); the clipped estimate is biased near 0
// and 1, so sums or averages over many groups should use
// WarnerEstimateUnclipped.

// WarnerEstimate returns the estimated true frequency of a label that
// appears noisyCount times among n reports produced by KRR(eps, k), clipped
// to [0, 1]. It requires n > 0, 0 ≤ noisyCount ≤ n and valid (eps, k) as for
// NewKRR.
func WarnerEstimate(noisyCount, n int64, eps float64, k int) (float64, error) {
	f, err := WarnerEstimateUnclipped(noisyCount, n, eps, k)
	if err != nil {
		return 0, err
	}
	return math.Min(math.Max(f, 0), 1), nil
}

// WarnerEstimateUnclipped returns (f̃ − q)/(p − q) without clipping: the
// unbiased estimate, which may fall outside [0, 1].
func WarnerEstimateUnclipped(noisyCount, n int64, eps float64, k int) (float64, error) {
	r, ft, err := warnerArgs("WarnerEstimate", noisyCount, n, eps, k)
	if err != nil {
		return 0, err
	}
	return (ft - r.flip) / r.contrast, nil
}

// WarnerStdErr returns the plug-in standard error of the unclipped Warner
// estimate, √(f̃(1 − f̃)/n)/(p − q), f̃ = noisyCount/n. It is 0 when f̃ is 0
// or 1. Arguments are validated as for WarnerEstimate.
func WarnerStdErr(noisyCount, n int64, eps float64, k int) (float64, error) {
	r, ft, err := warnerArgs("WarnerStdErr", noisyCount, n, eps, k)
	if err != nil {
		return 0, err
	}
	return math.Sqrt(ft*(1-ft)/float64(n)) / r.contrast, nil
}

// warnerArgs validates the arguments and returns the mechanism and f̃.
func warnerArgs(who string, noisyCount, n int64, eps float64, k int) (*KRR, float64, error) {
	if n <= 0 {
		return nil, 0, invalid("%s: number of reports n = %d must be positive", who, n)
	}
	if noisyCount < 0 || noisyCount > n {
		return nil, 0, invalid("%s: noisyCount = %d must be in 0..n = %d", who, noisyCount, n)
	}
	r, err := NewKRR(eps, k)
	if err != nil {
		return nil, 0, err
	}
	return r, float64(noisyCount) / float64(n), nil
}
