package accuracy

import (
	"math"
	"testing"
)

func TestBoundMatchesThesis(t *testing.T) {
	for eps, want := range map[float64]float64{7: 80.7, 5.6: 69.3, 4.2: 53.8, 2.8: 36.0, 1.4: 20.0, 0.7: 14.2, 10: 93.70, 2: 26.25} {
		got, err := Bound(eps, 10)
		if err != nil || math.Abs(100*got-want) > 0.05 {
			t.Errorf("K=10 eps=%v: %.3f%%, want %.2f%%", eps, 100*got, want)
		}
	}
	for _, eps := range []float64{0.1, 1, 4, 10, 30} {
		got, _ := Bound(eps, 2)
		if want := 1 - math.Exp(-eps/2)/2; math.Abs(got-want) > 1e-10 {
			t.Errorf("K=2 eps=%v: %v, want %v", eps, got, want)
		}
	}
}

// The closed form (Eq 4.32) agrees where it is numerically usable (small K).
func TestBoundMatchesClosedForm(t *testing.T) {
	closed := func(eps float64, k int) float64 {
		d := k / 2
		sum := (1 - float64(d)) * (eps + 1) / 4 * math.Exp(-eps/2)
		for j := 0; j < d; j++ {
			if j == 1 {
				continue
			}
			c := math.Exp(lgamma(d) - lgamma(j+1) - lgamma(d-j))
			sum += c * math.Pow(-1, float64(j)) * (math.Exp(-float64(j)*eps/2)/(1-float64(j*j)) - math.Exp(-eps/2)/(2*(1-float64(j))))
		}
		return sum
	}
	for _, k := range []int{2, 4, 6, 10, 16} {
		for _, eps := range []float64{0.5, 2, 8} {
			got, _ := Bound(eps, k)
			if want := closed(eps, k); math.Abs(got-want) > 1e-9 {
				t.Errorf("K=%d eps=%v: %v, closed form %v", k, eps, got, want)
			}
		}
	}
}

func lgamma(n int) float64 { v, _ := math.Lgamma(float64(n)); return v }

// Large K: the bound stays in [1/K, 1], falls as K grows, and rises with eps.
func TestBoundLargeK(t *testing.T) {
	prev := 1.0
	for _, k := range []int{10, 100, 1000, 100000} {
		a, err := Bound(3, k)
		if err != nil || !(a > 0 && a <= 1) || a > prev || math.IsNaN(a) {
			t.Fatalf("K=%d: %v %v", k, a, err)
		}
		prev = a
	}
	lo, _ := Bound(1, 1000)
	hi, _ := Bound(20, 1000)
	if !(lo < hi) || hi > 1 {
		t.Fatalf("not increasing in eps: %v %v", lo, hi)
	}
	if a, _ := Bound(math.Inf(1), 10); a != 1 {
		t.Fatalf("eps=Inf: %v", a)
	}
	for _, bad := range []struct {
		eps float64
		k   int
	}{{0, 10}, {-1, 10}, {math.NaN(), 10}, {1, 1}, {1, 3}} {
		if _, err := Bound(bad.eps, bad.k); err == nil {
			t.Errorf("no error for eps=%v K=%d", bad.eps, bad.k)
		}
	}
}

// Above ε ≈ 1490 the tail's e^{−ε/2} underflows to 0; the bound was then 0/0 = NaN (found by
// FuzzAccuracyFunctions in udf). It must approach 1, never exceed it, and not decrease in ε (beyond the
// quadrature's rounding, about 1e-15 there).
func TestBoundHugeEpsilon(t *testing.T) {
	for _, k := range []int{2, 10, 1 << 30} {
		prev := 0.0
		for _, eps := range []float64{64, 1000, 1490, 1492, 2000, 1e300, math.MaxFloat64} {
			a, err := Bound(eps, k)
			if err != nil || math.IsNaN(a) || a > 1 || a < prev-1e-12 {
				t.Fatalf("Bound(%v, %d) = %v, %v (previous eps: %v)", eps, k, a, err, prev)
			}
			prev = a
		}
		if prev < 1-1e-12 {
			t.Fatalf("Bound(MaxFloat64, %d) = %v, want 1", k, prev)
		}
	}
}
