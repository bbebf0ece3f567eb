package mechanisms

import (
	"math"
	"testing"
)

// TestVectorLaplaceCalibration checks the noise scales and the privacy
// accounting: 2l/ε on every coordinate of an L1Ball (not divided by d), and
// (hiᵢ − loᵢ)·d/ε per coordinate of a Box, whose parts compose to at most ε.
func TestVectorLaplaceCalibration(t *testing.T) {
	ball, err := NewVectorLaplace(L1Ball{D: 32, Radius: 5}, 4)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range ball.Scales() {
		if s != 2*5/4.0 {
			t.Fatalf("L1Ball scale[%d] = %v, want 2l/ε = 2.5", i, s)
		}
	}
	if ref := mustLaplace(t, 10, 4, 32); ball.EffectiveEpsilon() != ref.EffectiveEpsilon() {
		t.Errorf("L1Ball effective ε = %v, want the Laplace(2l, ε, d) value %v", ball.EffectiveEpsilon(), ref.EffectiveEpsilon())
	}
	lo, hi := []float64{0, 0, -1, 3}, []float64{1, 1, 1, 3.5}
	box, err := NewVectorLaplace(Box{Lo: lo, Hi: hi}, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range box.Scales() {
		want := (hi[i] - lo[i]) * 4 / 2
		if math.Abs(s-want) > 1e-12*want || s < want {
			t.Errorf("Box scale[%d] = %v, want (hi−lo)·d/ε = %v", i, s, want)
		}
	}
	if e := box.EffectiveEpsilon(); !(e <= 2 && e > 2*(1-1e-10)) {
		t.Errorf("Box effective ε = %v, want ≤ 2 and within 1e-10 of it", e)
	}
	if box.perCoord[0] != box.perCoord[1] || box.perCoord[0] == box.perCoord[2] {
		t.Error("Box: equal widths should share one mechanism, different widths not")
	}
	// A large dimension: the composed ε still does not exceed ε.
	d := 100000
	wide, err := NewVectorLaplace(Box{Lo: make([]float64, d), Hi: onesVec(d)}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if e := wide.EffectiveEpsilon(); !(e <= 1 && e > 1-1e-9) {
		t.Errorf("d = %d: effective ε = %v", d, e)
	}
}

func onesVec(d int) []float64 {
	v := make([]float64, d)
	for i := range v {
		v[i] = 1
	}
	return v
}

// TestVectorLaplaceUnbiased: the release minus the CLIPPED input has mean 0
// and variance 2b² per coordinate. Tolerances (seeded): mean within 5
// standard errors √(2b²/n); variance within 5 standard errors √(20/n)·b²
// (see TestLaplaceDistribution); with 2·d = 10 coordinates checked per set,
// a correct mechanism fails with probability ~10⁻⁵.
func TestVectorLaplaceUnbiased(t *testing.T) {
	const n = 100000
	for i, c := range []struct {
		set OutputSet
		x   []float64
	}{
		{L1Ball{D: 5, Radius: 2}, []float64{3, -1, 0, 0, 4}}, // clipped to the ball
		{Box{Lo: []float64{0, 0, -1, 10, 0}, Hi: []float64{1, 2, 1, 11, 0.1}}, []float64{0.3, 5, -0.5, 0, 0.05}},
	} {
		r, err := NewVectorLaplace(c.set, 3)
		if err != nil {
			t.Fatal(err)
		}
		clipped, _ := c.set.Clip(c.x)
		src := NewSeededSource(200 + uint64(i))
		d := len(c.x)
		sum, sum2 := make([]float64, d), make([]float64, d)
		for range n {
			y, err := r.Randomise(c.x, src)
			if err != nil {
				t.Fatal(err)
			}
			for j := range y {
				e := y[j] - clipped[j]
				sum[j] += e
				sum2[j] += e * e
			}
		}
		for j, b := range r.Scales() {
			mean := sum[j] / n
			v := sum2[j]/n - mean*mean
			if se := math.Sqrt(2 * b * b / n); math.Abs(mean) > 5*se {
				t.Errorf("set %d coord %d: mean noise %v, want 0 ± %v", i, j, mean, 5*se)
			}
			if se := math.Sqrt(20.0/n) * b * b; math.Abs(v-2*b*b) > 5*se {
				t.Errorf("set %d coord %d: noise variance %v, want %v ± %v", i, j, v, 2*b*b, 5*se)
			}
		}
	}
}
