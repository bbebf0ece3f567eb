package udf

import (
	"strconv"
	"testing"
)

// ldp_privatize's eps_x = λε and eps_y = (1 − λ)ε are the decimals the user means: 0.6 × 7 is 4.2 (the
// float product is 4.199999999999999), and what is printed is what the randomisers get.
func TestSplitEpsilonKeepsTheDecimal(t *testing.T) {
	for _, c := range []struct {
		eps, lambda float64
		x, y        string
	}{
		{7, 0.6, "4.2", "2.8"}, {0.1, 0.3, "0.03", "0.07"}, {4, 0.7, "2.8", "1.2"}, {1, 0.5, "0.5", "0.5"},
		{10, 0.9, "9", "1"}, {1.0 / 3, 0.5, "0.166666666666667", "0.166666666666667"},
	} {
		x, y := splitEpsilon(c.eps, c.lambda)
		if gx, gy := strconv.FormatFloat(x, 'g', -1, 64), strconv.FormatFloat(y, 'g', -1, 64); gx != c.x || gy != c.y {
			t.Errorf("splitEpsilon(%v, %v) = %s, %s; want %s, %s", c.eps, c.lambda, gx, gy, c.x, c.y)
		}
		if d := (x + y - c.eps) / c.eps; d > 1e-14 || d < -1e-14 {
			t.Errorf("splitEpsilon(%v, %v): eps_x + eps_y = %v", c.eps, c.lambda, x+y)
		}
	}
}
