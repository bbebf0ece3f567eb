package nn

import (
	"math"
	"testing"
)

// Known means and population deviations (in float64: values near float32's limit do not overflow);
// a constant feature gets Std 1.
func TestStandardiser(t *testing.T) {
	rows := [][]float32{{1, 7, 3e38}, {3, 7, -3e38}, {5, 7, 3e38}, {7, 7, -3e38}}
	s := FitStandardiser(rows, 3)
	if s.Mean[0] != 4 || math.Abs(float64(s.Std[0])-math.Sqrt(5)) > 1e-6 || s.Mean[1] != 7 || s.Std[1] != 1 || s.Mean[2] != 0 || float64(s.Std[2]) != float64(float32(3e38)) {
		t.Errorf("fitted %+v", s)
	}
	flat := []float32{1, 7, 0, 7, 7, 0}
	s.Apply(flat)
	if math.Abs(float64(flat[0])+3/math.Sqrt(5)) > 1e-6 || flat[1] != 0 || math.Abs(float64(flat[3])-3/math.Sqrt(5)) > 1e-6 {
		t.Errorf("standardised %v", flat)
	}
}
