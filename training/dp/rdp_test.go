package dp

import (
	"math"
	"testing"
)

// Published DP-SGD guarantees: TensorFlow Privacy's MNIST tutorial table (tutorials/README.md: N =
// 60,000, batch 256, δ = 1e-5, RDP with the same conversion, over a grid that adds fractional orders).
// Integer orders alone can only give a larger ε; it must be within 1 % of the published one.
func TestEpsilonMatchesPublishedValues(t *testing.T) {
	for _, c := range []struct {
		sigma  float64
		epochs int
		want   float64
	}{
		{1.1, 60, 3.01},
		{1.3, 15, 1.19},
		{0.7, 45, 7.10},
	} {
		steps := int(math.Ceil(float64(c.epochs) * 60000 / 256))
		got, order := Epsilon(256.0/60000, c.sigma, steps, 1e-5)
		t.Logf("σ = %v, %d epochs: ε = %.3f at α = %d (published %.2f)", c.sigma, c.epochs, got, order, c.want)
		if got < c.want-0.005 || got > 1.01*c.want {
			t.Errorf("σ = %v, %d epochs: ε = %.4f, published %.2f", c.sigma, c.epochs, got, c.want)
		}
	}
}

// Without sampling the mechanism is the Gaussian one, whose RDP is α/(2σ²) exactly; with sampling the
// RDP is smaller, grows with q, and is 0 at q = 0.
func TestRDPLimits(t *testing.T) {
	for _, a := range []int{2, 5, 32} {
		if got, want := RDPSampledGaussian(1, 2, a), float64(a)/8; math.Abs(got-want) > 1e-12 {
			t.Errorf("q = 1, α = %d: %v, want %v", a, got, want)
		}
		// q = 1 through the binomial sum (q just below 1) agrees with the closed form.
		if got, want := RDPSampledGaussian(1-1e-12, 2, a), float64(a)/8; math.Abs(got-want) > 1e-6 {
			t.Errorf("q → 1, α = %d: %v, want %v", a, got, want)
		}
		prev := 0.0
		for _, q := range []float64{0, 0.001, 0.01, 0.1, 0.5} {
			r := RDPSampledGaussian(q, 1, a)
			if r < prev || (q == 0 && r != 0) {
				t.Errorf("α = %d: RDP %v at q = %v after %v", a, r, q, prev)
			}
			prev = r
		}
	}
	// α = 2 in closed form: log(1 + q²(e^{1/σ²} − 1)).
	q, s := 0.01, 1.5
	if got, want := RDPSampledGaussian(q, s, 2), math.Log1p(q*q*(math.Exp(1/(s*s))-1)); math.Abs(got-want) > 1e-15 {
		t.Errorf("α = 2: %v, want %v", got, want)
	}
}

// Calibrate finds the smallest σ meeting the target, and refuses an unreachable one.
func TestCalibrate(t *testing.T) {
	q, steps := 256.0/60000, 14063
	sigma, err := Calibrate(q, steps, 3.01, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := Epsilon(q, sigma, steps, 1e-5); e > 3.01 {
		t.Errorf("σ = %v gives ε = %v > 3.01", sigma, e)
	}
	if e, _ := Epsilon(q, sigma*0.99, steps, 1e-5); e <= 3.01 {
		t.Errorf("σ = %v is not the smallest: 0.99σ gives ε = %v", sigma, e)
	}
	if math.Abs(sigma-1.1) > 0.03 {
		t.Errorf("σ = %v for the tutorial's ε = 3.01, want about 1.1", sigma)
	}
	if _, err := Calibrate(1, 1_000_000, 0.01, 1e-5); err == nil {
		t.Error("an unreachable target was calibrated")
	}
	for _, bad := range [][4]float64{{0, 10, 1, 1e-5}, {0.1, 0, 1, 1e-5}, {0.1, 10, 0, 1e-5}, {0.1, 10, 1, 1}} {
		if _, err := Calibrate(bad[0], int(bad[1]), bad[2], bad[3]); err == nil {
			t.Errorf("Calibrate%v accepted", bad)
		}
	}
}
