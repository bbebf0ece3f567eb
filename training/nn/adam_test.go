package nn

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// The first steps against the textbook formulas, written out separately (Kingma & Ba 2015, Alg. 1):
// m̂₁ = g, v̂₁ = g², so the first step moves every parameter by lr·g/(|g| + ε), i.e. by ≈ lr against
// its gradient's sign, whatever the gradient's size.
func TestAdamMatchesTheTextbook(t *testing.T) {
	const lr = 0.01
	r := rand.New(rand.NewPCG(1, 2))
	n := 3*adamChunk + 17 // several parallel chunks
	p := make([]float64, n)
	ref := make([]float64, n)
	m, v := make([]float64, n), make([]float64, n)
	for i := range p {
		p[i] = r.NormFloat64()
		ref[i] = p[i]
	}
	a := NewAdam[float64, float64](n, lr)
	g := make([]float64, n)
	for step := 1; step <= 5; step++ {
		for i := range g {
			g[i] = r.NormFloat64() * math.Pow(10, float64(i%7-3)) // gradients over six orders of magnitude
		}
		for i, gi := range g {
			m[i] = 0.9*m[i] + 0.1*gi
			v[i] = 0.999*v[i] + 0.001*gi*gi
			mh := m[i] / (1 - math.Pow(0.9, float64(step)))
			vh := v[i] / (1 - math.Pow(0.999, float64(step)))
			ref[i] -= lr * mh / (math.Sqrt(vh) + 1e-8)
		}
		before := p[0]
		a.Step(p, g)
		if step == 1 {
			if d := before - p[0]; math.Abs(math.Abs(d)-lr) > 1e-6 || math.Signbit(d) != math.Signbit(g[0]) {
				t.Errorf("first step moved p[0] by %v with gradient %v, want ≈ %v in the gradient's sign", -d, g[0], lr)
			}
		}
	}
	for i := range p {
		if math.Abs(p[i]-ref[i]) > 1e-12 {
			t.Fatalf("p[%d] = %.15g after 5 steps, the textbook gives %.15g", i, p[i], ref[i])
		}
	}
	if a.Steps() != 5 {
		t.Errorf("Steps() = %d", a.Steps())
	}
}

// Float32 parameters with float64 moments (the classifier), float32 throughout (the VLM) and the
// segments of StepSegments (a graph's tensors) give the same update as one flat vector; ZeroGrad
// clears the gradient read; the result does not depend on GOMAXPROCS.
func TestAdamSegmentsPrecisionsAndZeroGrad(t *testing.T) {
	n := 2*adamChunk + 5
	r := rand.New(rand.NewPCG(3, 4))
	p0, g := make([]float32, n), make([]float32, n)
	for i := range p0 {
		p0[i], g[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	flat := append([]float32(nil), p0...)
	a := NewAdam[float32, float32](n, 1e-3)
	a.Step(flat, append([]float32(nil), g...))

	old := runtime.GOMAXPROCS(1)
	seg := append([]float32(nil), p0...)
	gs := append([]float32(nil), g...)
	b := NewAdam[float32, float32](n, 1e-3)
	b.ZeroGrad = true
	cut := adamChunk + 3
	b.StepSegments([][]float32{seg[:cut], seg[cut:]}, [][]float32{gs[:cut], gs[cut:]})
	runtime.GOMAXPROCS(old)
	for i := range flat {
		if flat[i] != seg[i] {
			t.Fatalf("segmented update differs at %d: %v vs %v", i, seg[i], flat[i])
		}
		if gs[i] != 0 {
			t.Fatalf("ZeroGrad left gradient %d at %v", i, gs[i])
		}
	}

	mixed := append([]float32(nil), p0...)
	g64 := make([]float64, n)
	for i, v := range g {
		g64[i] = float64(v)
	}
	c := NewAdam[float32, float64](n, 1e-3)
	c.Step(mixed, g64)
	for i := range mixed {
		if d := math.Abs(float64(mixed[i] - flat[i])); d > 1e-6 {
			t.Fatalf("float64 moments moved p[%d] to %v, float32 ones to %v", i, mixed[i], flat[i])
		}
	}
}

// Adam minimises an ill-conditioned quadratic Σ cᵢ(xᵢ − 1)² whose curvatures span four orders of
// magnitude: the per-coordinate scaling is what lets one learning rate serve them all.
func TestAdamMinimisesAnIllConditionedQuadratic(t *testing.T) {
	c := []float64{1e-2, 1, 10, 100}
	x := make([]float64, len(c))
	g := make([]float64, len(c))
	a := NewAdam[float64, float64](len(c), 0.05)
	for range 3000 {
		for i := range x {
			g[i] = 2 * c[i] * (x[i] - 1)
		}
		a.Step(x, g)
	}
	for i := range x {
		if math.Abs(x[i]-1) > 1e-2 {
			t.Errorf("x[%d] = %v after 3000 steps, want 1 (curvature %v)", i, x[i], c[i])
		}
	}
}

func TestAdamRefusesMismatchedLengths(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a gradient of another length was accepted")
		}
	}()
	NewAdam[float32, float32](3, 1).Step(make([]float32, 3), make([]float32, 2))
}
