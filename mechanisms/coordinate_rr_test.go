package mechanisms

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// rrBin returns the bin of v among b bins of [lo, hi], failing unless v is
// exactly that bin's centre.
func rrBin(t *testing.T, v, lo, hi float64, b int) int {
	t.Helper()
	k := int(math.Floor((v - lo) / (hi - lo) * float64(b)))
	if k < 0 || k >= b || math.Abs(v-(lo+(float64(k)+0.5)*(hi-lo)/float64(b))) > 1e-12*(hi-lo) {
		t.Fatalf("release %v is not a bin centre of %d bins of [%v, %v]", v, b, lo, hi)
	}
	return k
}

// TestCoordinateRRDistribution: the joint distribution of two coordinates'
// reported bins is the product of B-ary randomised response at ε/D on each,
// keep 1 − F and every other bin F/(B − 1) (χ², fixed seed), with
// F = (B − 1)/(e^{ε/D} + B − 1); releases are the bin centres, and the input
// is clipped and quantised first (an input beyond hi reports like hi's bin).
func TestCoordinateRRDistribution(t *testing.T) {
	box := Box{Lo: []float64{0, -2}, Hi: []float64{1, 4}}
	const b, eps, n = 4, 2.4, 400000
	r, err := NewCoordinateRR(box, eps, b)
	if err != nil {
		t.Fatal(err)
	}
	f := r.FlipProbability()
	if want := float64(b-1) / (math.Exp(eps/2) + b - 1); math.Abs(f-want) > 1e-11*want {
		t.Errorf("flip probability %v, want (B−1)/(e^{ε/D}+B−1) = %v", f, want)
	}
	// x₀ = 0.3 is bin 1 of [0, 1]; x₁ = 9 clips to 4, bin 3 of [−2, 4].
	x, in := []float64{0.3, 9}, []int{1, 3}
	counts := make([]int64, b*b)
	src := NewSeededSource(2024)
	for range n {
		y, err := r.Randomise(x, src)
		if err != nil {
			t.Fatal(err)
		}
		counts[b*rrBin(t, y[0], 0, 1, b)+rrBin(t, y[1], -2, 4, b)]++
	}
	p := func(i, k int) float64 {
		if k == in[i] {
			return 1 - f
		}
		return f / (b - 1)
	}
	probs := make([]float64, b*b)
	for k0 := range b {
		for k1 := range b {
			probs[b*k0+k1] = p(0, k0) * p(1, k1)
		}
	}
	if stat, pv := chiSquarePValue(t, counts, probs); pv < 1e-6 {
		t.Errorf("joint counts %v: χ² = %.1f, p = %.2g (want the product of two B-ary RRs)", counts, stat, pv)
	}
	var kept int64
	for k1 := range b {
		kept += counts[b*in[0]+k1]
	}
	// The keep rate of coordinate 0, within 6 standard errors of 1 − F.
	if got, se := float64(kept)/n, math.Sqrt(f*(1-f)/n); math.Abs(got-(1-f)) > 6*se {
		t.Errorf("coordinate 0 kept its bin in %.4f of releases, want 1 − F = %.4f ± %.4f", got, 1-f, 6*se)
	}
}

// TestCoordinateRREdges: the ends of the range fall in the end bins and a
// value on an inner edge in the bin above it; with ε/D = 64 (flip ≈ 10⁻²⁸)
// the release is the input's bin centre.
func TestCoordinateRREdges(t *testing.T) {
	box := Box{Lo: []float64{0, 0, 0, 0, 0}, Hi: []float64{1, 1, 1, 1, 1}}
	r, err := NewCoordinateRR(box, 64, 4)
	if err != nil {
		t.Fatal(err)
	}
	r.coord, _ = newRR("test", 64, 3) // keep with probability 1 − 10⁻²⁸ per coordinate
	y, err := r.Randomise([]float64{0, 0.25, 0.2499, 1, -5}, NewSeededSource(1))
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0.125, 0.375, 0.125, 0.875, 0.125}
	for i := range want {
		if y[i] != want[i] {
			t.Errorf("release %v, want bin centres %v", y, want)
			break
		}
	}
}

// TestCoordinateRRPrivacy: the empirical privacy loss of one coordinate's
// report between its two extreme inputs reaches, and does not exceed, ε/D;
// EffectiveEpsilon is D times the exact per-coordinate loss, ≤ ε.
func TestCoordinateRRPrivacy(t *testing.T) {
	box := Box{Lo: []float64{0, 0, 0}, Hi: []float64{1, 1, 1}}
	const eps = 3.0
	r := mustRandomiser(t, "rr3", box, eps)
	rr := r.(*CoordinateRR)
	k := float64(rr.Bins() - 1)
	perCoord := math.Log((1 - rr.FlipProbability()) * k / rr.FlipProbability())
	if eff := r.EffectiveEpsilon(); !(eff <= eps) || math.Abs(eff-3*perCoord) > 1e-12 || eff < eps*(1-1e-9) {
		t.Errorf("EffectiveEpsilon %v: want 3 × %v ≤ ε = %v, within 1e-9 of it", eff, perCoord, eps)
	}
	cell := func(y []float64) int { return int(y[0] * 3) }
	pc := empiricalPrivacy(t, r, [][]float64{{0, 0.5, 0.5}, {1, 0.5, 0.5}}, cell, 3, 200000, 31)
	assertPrivate(t, "rr3, one coordinate", pc, perCoord)
}

func TestCoordinateRRErrors(t *testing.T) {
	box := Box{Lo: []float64{0, 0}, Hi: []float64{1, 1}}
	for _, c := range []struct {
		name string
		set  OutputSet
		eps  float64
		want string
	}{
		{"rr2", L1Ball{D: 2, Radius: 1}, 1, "needs a Box"},
		{"rr2", box, 0, "epsilon"},
		{"rr2", box, 65, "MaxEpsilon"},
		{"rr2", Box{Lo: make([]float64, 4), Hi: []float64{1, 1, 1, 1}}, 3 * MinEpsilon, "per-coordinate"},
		{"rr1", box, 1, "rrB with B a whole number of bins, 2 ≤ B ≤ 65536"},
		{"rr65537", box, 1, "2 ≤ B ≤ 65536"},
		{"rr02", box, 1, "2 ≤ B ≤ 65536"},
		{"rr-2", box, 1, "2 ≤ B ≤ 65536"},
		{"rr", box, 1, "valid names are laplace, duchi, privunit, or rrB"},
		{"RR2", box, 1, "valid names are"},
	} {
		if _, err := NewRandomiser(c.name, c.set, c.eps); err == nil || !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewRandomiser(%q, %T, %v) error = %v, want one mentioning %q", c.name, c.set, c.eps, err, c.want)
		}
	}
	if _, err := NewCoordinateRR(box, 1, 1); err == nil || !strings.Contains(err.Error(), "bins B = 1") {
		t.Errorf("NewCoordinateRR bins 1: error = %v", err)
	}
	for name, want := range map[string]int{"rr2": 2, "rr16": 16, "rr65536": 65536} {
		if b, ok := ParseRRName(name); !ok || b != want || RRName(b) != name || CheckRandomiserName(name) != nil {
			t.Errorf("ParseRRName(%q) = %d, %v", name, b, ok)
		}
		r := mustRandomiser(t, name, &box, 2)
		if r.Name() != name || r.Epsilon() != 2 || r.Set().Dim() != 2 {
			t.Errorf("%s: Name %q, Epsilon %v, Set %v", name, r.Name(), r.Epsilon(), r.Set())
		}
	}
	if _, err := mustRandomiser(t, "rr2", box, 1).Randomise([]float64{math.NaN(), 0}, CryptoSource()); err == nil || !strings.Contains(err.Error(), "h[0]") {
		t.Errorf("NaN input: error = %v", err)
	}
}
