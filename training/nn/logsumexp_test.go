package nn

import (
	"math"
	"testing"
)

func TestLogSumExp(t *testing.T) {
	for _, c := range []struct {
		v    []float64
		want float64
	}{
		{nil, math.Inf(-1)},
		{[]float64{math.Inf(-1), math.Inf(-1)}, math.Inf(-1)},
		{[]float64{0}, 0},
		{[]float64{math.Log(2), math.Log(3)}, math.Log(5)},
		{[]float64{1000, 1000}, 1000 + math.Log(2)}, // no overflow
		{[]float64{-1000, math.Inf(-1)}, -1000},     // no underflow, −Inf terms are 0
		{[]float64{math.NaN(), 0}, math.NaN()},      // NaN propagates
	} {
		got := LogSumExp(c.v)
		if math.IsNaN(c.want) != math.IsNaN(got) || (!math.IsNaN(got) && math.Abs(got-c.want) > 1e-12*math.Max(1, math.Abs(c.want))) {
			t.Errorf("LogSumExp(%v) = %v, want %v", c.v, got, c.want)
		}
	}
}
