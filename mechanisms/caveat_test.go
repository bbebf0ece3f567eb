package mechanisms

import (
	"math"
	"strings"
	"testing"
)

// TestDuchiOnBallRatio checks the ratio against the closed form of its doc
// comment, computed here from C_d's binomial definition and coth, and the
// numbers the comment quotes.
func TestDuchiOnBallRatio(t *testing.T) {
	binom := func(n, k int) float64 { // small n only
		r := 1.0
		for i := 1; i <= k; i++ {
			r = r * float64(n-k+i) / float64(i)
		}
		return r
	}
	for _, d := range []int{1, 2, 3, 8, 16, 32} {
		for _, eps := range []float64{0.1, 0.7, 1, 4.2, 7, 12} {
			got, err := DuchiOnBallRatio(L1Ball{D: d, Radius: 3.5}, eps)
			if err != nil {
				t.Fatal(err)
			}
			cd := math.Ldexp(1, d-1) / binom(d-1, d/2)
			x := eps / 2 / math.Tanh(eps/2)
			want := cd*cd*x*x/2 - eps*eps/(8*float64(d))
			if math.Abs(got-want) > 1e-6*want {
				t.Errorf("d = %d, ε = %v: ratio %v, closed form %v", d, eps, got, want)
			}
			if d == 1 && got > 0.5 {
				t.Errorf("d = 1, ε = %v: ratio %v > ½ (the ball is the cube)", eps, got)
			}
		}
	}
	for _, c := range []struct{ eps, want float64 }{{0.7, 7.2}, {4.2, 31}} {
		got, _ := DuchiOnBallRatio(L1Ball{D: 8, Radius: 10}, c.eps)
		if math.Abs(got-c.want) > 0.5 {
			t.Errorf("d = 8, ε = %v: ratio %.2f, the doc comment says %v", c.eps, got, c.want)
		}
	}
}

// TestRandomiserCaveat: Duchi on a ball of d ≥ 2 gets a caveat naming the
// ratio and laplace; everything else gets none.
func TestRandomiserCaveat(t *testing.T) {
	ball := L1Ball{D: 8, Radius: 10}
	msg := RandomiserCaveat(RandomiserDuchi, ball, 4.2)
	for _, part := range []string{"bounding cube", "31×", "use laplace", "d = 8", "radius 10"} {
		if !strings.Contains(msg, part) {
			t.Errorf("caveat %q lacks %q", msg, part)
		}
	}
	if RandomiserCaveat(RandomiserDuchi, &ball, 4.2) != msg {
		t.Error("a *L1Ball gets a different caveat from an L1Ball")
	}
	box := Box{Lo: []float64{-1, -1, -1}, Hi: []float64{1, 1, 1}}
	for _, c := range []struct {
		name string
		set  OutputSet
		eps  float64
	}{
		{RandomiserLaplace, ball, 4.2},
		{RandomiserPrivUnit, ball, 4.2},
		{RandomiserDuchi, box, 4.2},
		{"rr4", box, 4.2},
		{RandomiserDuchi, L1Ball{D: 1, Radius: 10}, 4.2},
		{RandomiserDuchi, ball, -1},          // invalid ε: NewRandomiser's error says so
		{RandomiserDuchi, L1Ball{D: 0}, 4.2}, // invalid set
		{RandomiserDuchi, nil, 4.2},
	} {
		if msg := RandomiserCaveat(c.name, c.set, c.eps); msg != "" {
			t.Errorf("%s on %v at ε = %v: unexpected caveat %q", c.name, c.set, c.eps, msg)
		}
	}
}

// TestDuchiOnBallMinRatio: the ratio never falls below the bound, which it
// approaches as ε → 0 (d ≥ 2), and the any-ε caveat speaks from d = 2.
func TestDuchiOnBallMinRatio(t *testing.T) {
	for _, d := range []int{2, 3, 8, 64} {
		lo := DuchiOnBallMinRatio(d)
		prev := 0.0
		for _, eps := range []float64{1e-3, 0.01, 0.1, 0.5, 1, 2, 4, 8, 16} {
			r, err := DuchiOnBallRatio(L1Ball{D: d, Radius: 1}, eps)
			if err != nil {
				t.Fatal(err)
			}
			if r < lo*(1-1e-9) || r < prev {
				t.Errorf("d = %d, ε = %v: ratio %v below the bound %v or the previous ε's %v", d, eps, r, lo, prev)
			}
			prev = r
		}
		if r, _ := DuchiOnBallRatio(L1Ball{D: d, Radius: 1}, 1e-3); math.Abs(r-lo) > 1e-3*lo {
			t.Errorf("d = %d: ratio at ε = 0.001 is %v, the limit %v", d, r, lo)
		}
	}
	if got := RandomiserCaveatAnyEpsilon(RandomiserDuchi, L1Ball{D: 8, Radius: 10}); !strings.Contains(got, "at least 6.7×") {
		t.Errorf("d = 8: any-ε caveat %q lacks the bound 6.7×", got)
	}
	if got := RandomiserCaveatAnyEpsilon(RandomiserDuchi, L1Ball{D: 1, Radius: 10}); got != "" {
		t.Errorf("d = 1: unexpected caveat %q", got)
	}
	if got := RandomiserCaveatAnyEpsilon(RandomiserLaplace, L1Ball{D: 8, Radius: 10}); got != "" {
		t.Errorf("laplace: unexpected caveat %q", got)
	}
}
