package taskaware

import (
	"math"
	"math/rand/v2"
	"testing"
)

// l1 returns ‖A(x − y)‖₁.
func l1Dist(a [][]float64, x, y []float64) float64 {
	s := 0.0
	for _, r := range a {
		v := 0.0
		for j, aj := range r {
			v += aj * (x[j] - y[j])
		}
		s += math.Abs(v)
	}
	return s
}

// vertex returns the box vertex with bits v: Hi_j where bit j is set, else Lo_j.
func vertex(lo, hi []float64, v int) []float64 {
	x := make([]float64, len(lo))
	for j := range x {
		x[j] = lo[j]
		if v>>j&1 == 1 {
			x[j] = hi[j]
		}
	}
	return x
}

// The vertex formula against brute force: the largest ‖A(x − x′)‖₁ over every pair of the box's
// vertices (the maximum of a convex function over the box, attained at vertices), for random encoders
// and boxes with n ≤ 7 features and Z ≤ 6 rows; the returned direction attains it; random points of the
// box never exceed it.
func TestBoxL1DiameterBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 400 {
		n, z := 1+rng.IntN(7), 1+rng.IntN(6)
		a := make([][]float64, z)
		for i := range a {
			a[i] = make([]float64, n)
			for j := range a[i] {
				a[i][j] = rng.NormFloat64()
				if rng.IntN(4) == 0 {
					a[i][j] = 0
				}
			}
		}
		lo, hi, width := make([]float64, n), make([]float64, n), make([]float64, n)
		for j := range lo {
			lo[j] = 3 * rng.NormFloat64()
			width[j] = rng.ExpFloat64()
			if rng.IntN(6) == 0 {
				width[j] = 0 // a constant feature
			}
			hi[j] = lo[j] + width[j]
		}
		d1, s, err := BoxL1Diameter(a, width)
		if err != nil {
			t.Fatal(err)
		}
		brute := 0.0
		for u := 0; u < 1<<n; u++ {
			for v := u + 1; v < 1<<n; v++ {
				brute = max(brute, l1Dist(a, vertex(lo, hi, u), vertex(lo, hi, v)))
			}
		}
		if math.Abs(d1-brute) > 1e-12*max(1, brute) {
			t.Fatalf("trial %d (n %d, Z %d): formula %v, brute force over vertex pairs %v", trial, n, z, d1, brute)
		}
		x, y := make([]float64, n), make([]float64, n)
		for j := range x {
			mid := lo[j] + width[j]/2
			x[j], y[j] = mid+s[j]*width[j]/2, mid-s[j]*width[j]/2
		}
		if got := l1Dist(a, x, y); math.Abs(got-d1) > 1e-12*max(1, d1) {
			t.Fatalf("trial %d: the returned vertices are %v apart, Δ1 = %v", trial, got, d1)
		}
		for range 200 {
			for j := range x {
				x[j], y[j] = lo[j]+rng.Float64()*width[j], lo[j]+rng.Float64()*width[j]
			}
			if got := l1Dist(a, x, y); got > d1*(1+1e-12) {
				t.Fatalf("trial %d: two points of the box are %v apart, Δ1 = %v", trial, got, d1)
			}
		}
	}
	// The cheap bound Σ_ij |A_ij| width_j of spec II.6 1(a) is an upper bound, equal for Z = 1.
	a := [][]float64{{1, -2, 0.5}, {0.3, 1, -1}}
	w := []float64{1, 2, 3}
	d1, _, _ := BoxL1Diameter(a, w)
	if bound := 1*1 + 2*2 + 0.5*3 + 0.3*1 + 1*2 + 1*3; !(d1 <= bound) {
		t.Errorf("Δ1 %v exceeds the cheap bound %v", d1, bound)
	}
	if d1, _, _ := BoxL1Diameter(a[:1], w); d1 != 1+4+1.5 {
		t.Errorf("Z = 1: Δ1 = %v, want Σ|a_j|w_j = 6.5", d1)
	}
	// 16 rows (the cap) enumerates 2¹⁵ sign vectors; a 17th is refused.
	big := make([][]float64, MaxZ+1)
	for i := range big {
		big[i] = []float64{float64(i%3) - 1, 1}
	}
	if _, _, err := BoxL1Diameter(big[:MaxZ], []float64{1, 1}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := BoxL1Diameter(big, []float64{1, 1}); err == nil {
		t.Fatal("17 rows accepted")
	}
}
