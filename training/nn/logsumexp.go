package nn

import "math"

// LogSumExp is log Σ exp(v_i), evaluated stably (shifted by the maximum); −Inf for an empty v or one
// of −Inf only.
func LogSumExp(v []float64) float64 {
	m := math.Inf(-1)
	for _, x := range v {
		m = max(m, x)
	}
	if math.IsInf(m, -1) {
		return m
	}
	s := 0.0
	for _, x := range v {
		s += math.Exp(x - m)
	}
	return m + math.Log(s)
}
