package classifier

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestFastExpAccuracy checks fexp against math.Exp: relative error ≤ 1e-6
// (the documented bound) on a grid of step 1e-4 over [expMin, 88] and on 1e6
// random float32 arguments.
func TestFastExpAccuracy(t *testing.T) {
	worst, at := 0.0, float32(0)
	check := func(x float32) {
		want := math.Exp(float64(x))
		got := float64(fexp(x))
		if e := math.Abs(got-want) / want; e > worst || math.IsNaN(e) {
			worst, at = e, x
		}
	}
	for x := float64(expMin); x <= 88; x += 1e-4 {
		check(float32(x))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000000 {
		check(float32(expMin + r.Float64()*(88-expMin)))
	}
	for _, x := range []float32{0, -0.5, 0.5, -1e-8, 1e-8, float32(math.Ln2) / 2, -float32(math.Ln2) / 2, expMin, 88} {
		check(x)
	}
	if !(worst <= 1e-6) {
		t.Fatalf("fexp relative error %.3g at x = %v: want ≤ 1e-6", worst, at)
	}
	t.Logf("max relative error %.3g (at x = %v)", worst, at)
	if fexpFlush(expMin-0.01) != 0 || fexpFlush(float32(math.Inf(-1))) != 0 {
		t.Error("fexpFlush does not flush below expMin")
	}
	if fexp(0) != 1 {
		t.Errorf("fexp(0) = %v, want exactly 1", fexp(0))
	}
}
