package mechanisms

import (
	"errors"
	"math"
	"math/big"
	"slices"
	"strings"
	"testing"
)

func TestClipScalar(t *testing.T) {
	for _, c := range []struct{ x, lo, hi, want float64 }{
		{0.5, 0, 1, 0.5}, {-3, 0, 1, 0}, {7, 0, 1, 1}, {0, 0, 1, 0}, {1, 0, 1, 1},
		{-1e308, -1, 1, -1}, {1e308, -1, 1, 1}, {math.SmallestNonzeroFloat64, 0, 1e-300, math.SmallestNonzeroFloat64},
	} {
		got, err := ClipScalar(c.x, c.lo, c.hi)
		if err != nil || got != c.want {
			t.Errorf("ClipScalar(%v, %v, %v) = %v, %v; want %v", c.x, c.lo, c.hi, got, err, c.want)
		}
	}
	nan, inf := math.NaN(), math.Inf(1)
	for _, c := range []struct {
		x, lo, hi float64
		want      string
	}{
		{nan, 0, 1, "[0] = NaN"}, {inf, 0, 1, "[0] = +Inf"}, {0, -inf, 1, "[1] = -Inf"}, {0, 0, nan, "[2] = NaN"},
		{0, 1, 1, "lo < hi"}, {0, 2, 1, "lo < hi"},
	} {
		if _, err := ClipScalar(c.x, c.lo, c.hi); err == nil || !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ClipScalar(%v, %v, %v) error = %v, want one mentioning %q", c.x, c.lo, c.hi, err, c.want)
		}
	}
}

func TestClipBox(t *testing.T) {
	h := []float64{-5, 0.5, 9, 2}
	got, err := ClipBox(h, []float64{-1, 0, 0, 2}, []float64{1, 1, 3, 4})
	if err != nil || !slices.Equal(got, []float64{-1, 0.5, 3, 2}) {
		t.Errorf("ClipBox = %v, %v", got, err)
	}
	if !slices.Equal(h, []float64{-5, 0.5, 9, 2}) {
		t.Error("ClipBox modified its input")
	}
	nan := math.NaN()
	for _, c := range []struct {
		h, lo, hi []float64
		want      string
	}{
		{nil, nil, nil, "empty"},
		{[]float64{1}, []float64{0, 0}, []float64{1}, "lengths differ"},
		{[]float64{1}, []float64{0}, []float64{}, "lengths differ"},
		{[]float64{0, nan}, []float64{0, 0}, []float64{1, 1}, "h[1] = NaN"},
		{[]float64{0, 0}, []float64{math.Inf(-1), 0}, []float64{1, 1}, "lo[0] = -Inf"},
		{[]float64{0, 0}, []float64{0, 0}, []float64{1, math.Inf(1)}, "hi[1] = +Inf"},
		{[]float64{0, 0}, []float64{0, 1}, []float64{1, 1}, "lo[1] < hi[1]"},
	} {
		if _, err := ClipBox(c.h, c.lo, c.hi); err == nil || !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ClipBox(%v, %v, %v) error = %v, want one mentioning %q", c.h, c.lo, c.hi, err, c.want)
		}
	}
}

// exactL1 returns Σ|vᵢ| exactly (2200 bits hold any sum of ≤ 2²⁰ float64s).
func exactL1(v []float64) *big.Float {
	s := new(big.Float).SetPrec(2200)
	for _, x := range v {
		s.Add(s, new(big.Float).SetFloat64(math.Abs(x)))
	}
	return s
}

// checkInBall asserts that v lies in the ℓ1 ball of radius l both exactly
// and for float64 summation in several orders.
func checkInBall(t *testing.T, v []float64, l float64, ctx string) {
	t.Helper()
	if exactL1(v).Cmp(new(big.Float).SetFloat64(l)) > 0 {
		t.Fatalf("%s: exact ‖v‖₁ = %v > l = %v", ctx, exactL1(v), l)
	}
	abs := make([]float64, len(v))
	for i, x := range v {
		abs[i] = math.Abs(x)
	}
	sum := func(a []float64) float64 {
		var s float64
		for _, x := range a {
			s += x
		}
		return s
	}
	rev := slices.Clone(abs)
	slices.Reverse(rev)
	asc := slices.Clone(abs)
	slices.Sort(asc)
	desc := slices.Clone(asc)
	slices.Reverse(desc)
	for name, a := range map[string][]float64{"forward": abs, "reverse": rev, "ascending": asc, "descending": desc} {
		if s := sum(a); s > l {
			t.Fatalf("%s: %s float sum of |v| = %v > l = %v", ctx, name, s, l)
		}
	}
}

// TestClipL1Adversarial: random vectors of dimension 1..1000 mixing huge
// (up to ±MaxFloat64), tiny (subnormal), zero and ordinary entries of both
// signs, against radii from subnormal to 1e300, always land in the ball
// (exactly and under any tested summation order), keep their signs and,
// where representable, their direction; clipping is idempotent and does
// not over-shrink.
func TestClipL1Adversarial(t *testing.T) {
	gen := NewSeededSource(77)
	pick := func(xs []float64) float64 { return xs[IntN(gen, len(xs))] }
	radii := []float64{5e-324, 1e-300, 1e-5, 1, 3.7, 10, 1e300, math.MaxFloat64}
	for trial := range 1500 {
		d := 1 + IntN(gen, 10)
		if trial%3 == 0 {
			d = 1 + IntN(gen, 1000)
		}
		h := make([]float64, d)
		for i := range h {
			switch IntN(gen, 6) {
			case 0:
				h[i] = pick([]float64{1e300, math.MaxFloat64, 1e308, 3e307})
			case 1:
				h[i] = pick([]float64{5e-324, 1e-310, 1e-300, 2.2e-308})
			case 2:
				h[i] = 0
			default:
				h[i] = math.Ldexp(Float64(gen)+0.5, IntN(gen, 40)-20)
			}
			if IntN(gen, 2) == 0 {
				h[i] = -h[i]
			}
		}
		l := pick(radii)
		orig := slices.Clone(h)
		out, err := ClipL1(h, l)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if !slices.Equal(h, orig) {
			t.Fatalf("trial %d: ClipL1 modified its input", trial)
		}
		checkInBall(t, out, l, "trial")
		for i := range out {
			if out[i] != 0 && math.Signbit(out[i]) != math.Signbit(h[i]) {
				t.Fatalf("trial %d: sign of coordinate %d flipped: %v -> %v", trial, i, h[i], out[i])
			}
		}
		// Direction: out = c·h with one c, up to rounding, on coordinates
		// far from underflow.
		j := 0
		for i := range h {
			if math.Abs(h[i]) > math.Abs(h[j]) {
				j = i
			}
		}
		if h[j] != 0 && out[j] != 0 {
			for i := range h {
				want, got := h[i]/h[j], out[i]/out[j]
				if math.Abs(out[i]) > 1e-290 && math.Abs(want) > 1e-290 && math.Abs(got-want) > 1e-12*math.Abs(want) {
					t.Fatalf("trial %d: out[%d]/out[%d] = %v, want h[%d]/h[%d] = %v (direction changed)", trial, i, j, got, i, j, want)
				}
			}
		}
		// Not over-shrunk: a clipped vector has norm ≥ l(1 − 10⁻⁹), unless
		// l is so small that subnormal rounding dominates.
		if exactL1(h).Cmp(new(big.Float).SetFloat64(l)) > 0 && l > 1e-290 {
			if n, _ := exactL1(out).Float64(); n < l*(1-1e-9) {
				t.Fatalf("trial %d: clipped norm %v, want ≈ l = %v", trial, n, l)
			}
		}
		again, _ := ClipL1(out, l)
		if !slices.Equal(again, out) {
			t.Fatalf("trial %d: ClipL1 is not idempotent", trial)
		}
	}
}

// TestClipL1InsideUnchanged: vectors strictly inside the ball (norm up to
// l(1 − 10⁻⁹)) come back unchanged, in a fresh slice; zero stays zero.
func TestClipL1InsideUnchanged(t *testing.T) {
	gen := NewSeededSource(78)
	for trial := range 300 {
		d := 1 + IntN(gen, 1000)
		l := math.Ldexp(1+Float64(gen), IntN(gen, 60)-30)
		h := make([]float64, d)
		var s float64
		for i := range h {
			h[i] = Float64(gen) - 0.5
			s += math.Abs(h[i])
		}
		scale := l * (1 - 1e-9) * Float64(gen) / (s * (1 + 1e-12))
		for i := range h {
			h[i] *= scale
		}
		out, err := ClipL1(h, l)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(out, h) {
			t.Fatalf("trial %d: inside-ball vector was changed", trial)
		}
		if &out[0] == &h[0] {
			t.Fatal("ClipL1 returned its input slice")
		}
	}
	out, err := ClipL1(make([]float64, 5), 1)
	if err != nil || !slices.Equal(out, make([]float64, 5)) {
		t.Errorf("ClipL1(0) = %v, %v", out, err)
	}
	// On the boundary and just outside: clipped into the ball.
	for _, h := range [][]float64{{0.5, -0.5}, {1}, {0.1, 0.2, 0.7}, {0.1 + 1e-16, 0.2, 0.7}, {1 + 1e-15}} {
		out, err := ClipL1(h, 1)
		if err != nil {
			t.Fatal(err)
		}
		checkInBall(t, out, 1, "boundary")
	}
	// A textbook case: (3, −4) with l = 1 → (3/7, −4/7) up to the margin.
	out, _ = ClipL1([]float64{3, -4}, 1)
	if math.Abs(out[0]-3.0/7) > 1e-14 || math.Abs(out[1]+4.0/7) > 1e-14 {
		t.Errorf("ClipL1((3,-4), 1) = %v", out)
	}
}

func TestClipL1Errors(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, c := range []struct {
		h    []float64
		l    float64
		want string
	}{
		{[]float64{1, nan}, 1, "h[1] = NaN"},
		{[]float64{inf}, 1, "h[0] = +Inf"},
		{[]float64{0, 0, -inf}, 1, "h[2] = -Inf"},
		{[]float64{1}, 0, "radius"},
		{[]float64{1}, -1, "radius"},
		{[]float64{1}, nan, "radius"},
		{[]float64{1}, inf, "radius"},
		{nil, 1, "empty"},
	} {
		if _, err := ClipL1(c.h, c.l); err == nil || !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ClipL1(%v, %v) error = %v, want one mentioning %q", c.h, c.l, err, c.want)
		}
	}
}
