package nn

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestAddNoiseNormal: addNoise's draws are standard normal: on 2 million draws (half a million in -short)
// the Kolmogorov–Smirnov distance to Φ is under its 0.1 % critical value 1.95/√n, the mean, variance
// and fourth moment (3) are within 5 standard errors, the share beyond the ziggurat's base strip
// (|x| > 3.4426, the tail path) within 5 standard errors of 2·Φ(−3.4426), and an odd length is filled.
func TestAddNoiseNormal(t *testing.T) {
	n := 2_000_001
	if testing.Short() {
		n = 500_001
	}
	g := make([]float32, n)
	const sd, scale = 2.5, float32(0.5) // g = N·1.25
	addNoise(rand.NewChaCha8([32]byte{7}), g, sd, scale)
	xs := make([]float64, n)
	var s1, s2, s4, tail float64
	for j, v := range g {
		x := float64(v) / 1.25
		xs[j] = x
		s1 += x
		s2 += x * x
		s4 += x * x * x * x
		if math.Abs(x) > zigRn {
			tail++
		}
	}
	fn := float64(n)
	if m := s1 / fn; math.Abs(m) > 5/math.Sqrt(fn) {
		t.Errorf("mean %v", m)
	}
	if v := s2 / fn; math.Abs(v-1) > 5*math.Sqrt(2/fn) {
		t.Errorf("variance %v", v)
	}
	if k := s4 / fn; math.Abs(k-3) > 5*math.Sqrt(96/fn) {
		t.Errorf("fourth moment %v, want 3", k)
	}
	p := math.Erfc(zigRn / math.Sqrt2)
	if math.Abs(tail/fn-p) > 5*math.Sqrt(p*(1-p)/fn) {
		t.Errorf("share beyond %v: %v, want %v", zigRn, tail/fn, p)
	}
	slices.Sort(xs)
	d := 0.0
	for i, x := range xs {
		c := 0.5 * math.Erfc(-x/math.Sqrt2)
		d = max(d, math.Abs(c-float64(i)/fn), math.Abs(c-float64(i+1)/fn))
	}
	if d > 1.95/math.Sqrt(fn) {
		t.Errorf("KS distance %v > %v", d, 1.95/math.Sqrt(fn))
	}
	if g[n-1] == 0 {
		t.Error("last (odd) coordinate not drawn")
	}
}

// BenchmarkNoise compares a draw of addNoise with one of rand.NormFloat64 on the same source.
func BenchmarkNoise(b *testing.B) {
	g := make([]float32, 1<<16)
	b.Run("NormFloat64", func(b *testing.B) {
		r := rand.New(rand.NewChaCha8([32]byte{}))
		for b.Loop() {
			for j := range g {
				g[j] = (g[j] + float32(1.1*r.NormFloat64())) * 0.5
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(g)), "ns/draw")
	})
	b.Run("addNoise", func(b *testing.B) {
		c := rand.NewChaCha8([32]byte{})
		for b.Loop() {
			addNoise(c, g, 1.1, 0.5)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(g)), "ns/draw")
	})
}
