package graph

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// A case worked by hand: unit vectors along the axes, τ = 1, rows 0/2 and 1/3 the two views.
// s01 = 0, s02 = 1, s03 = 0, s12 = 0, s13 = −1, s23 = 0, so ℓ0 = ℓ2 = −1 + log(2 + e) and
// ℓ1 = ℓ3 = 1 + log(2 + 1/e).
func TestNTXentHandCase(t *testing.T) {
	v := []float64{1, 0, 0, 1, 2, 0, 0, -3} // norms differ: only directions count
	all := []bool{true, true, true, true}
	loss, _ := ntxent(v, all, 4, 2, 1, 1)
	want := (math.Log(2+math.E) + math.Log(2+1/math.E)) / 2
	if math.Abs(loss-want) > 1e-12 {
		t.Errorf("loss %v, want %v", loss, want)
	}
	// Rows 1 and 3 are padding: anchor 0 has only its partner left, so ℓ0 = ℓ2 = 0.
	if loss, g := ntxent(v, []bool{true, false, true, false}, 4, 2, 1, 1); loss != 0 || g[2] != 0 {
		t.Errorf("with rows 1 and 3 masked: loss %v, gradient %v; want 0", loss, g)
	}
	// τ scales the similarities: at τ = 0.5, ℓ0 = −2 + log(2 + e²), ℓ1 = 2 + log(2 + e⁻²).
	loss, _ = ntxent(v, all, 4, 2, 0.5, 1)
	if want := (math.Log(2+math.Exp(2)) + math.Log(2+math.Exp(-2))) / 2; math.Abs(loss-want) > 1e-12 {
		t.Errorf("τ 0.5: loss %v, want %v", loss, want)
	}
}

// The analytic gradient matches central differences of the loss, with a padding pair.
func TestNTXentGradient(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n, p, tau = 8, 5, 0.3
	v := make([]float64, n*p)
	for i := range v {
		v[i] = r.NormFloat64()
	}
	mask := []bool{true, true, true, false, true, true, true, false}
	_, g := ntxent(v, mask, n, p, tau, 1)
	const h = 1e-6
	for i := range v {
		x := v[i]
		v[i] = x + h
		up, _ := ntxent(v, mask, n, p, tau, 1)
		v[i] = x - h
		down, _ := ntxent(v, mask, n, p, tau, 1)
		v[i] = x
		num := (up - down) / (2 * h)
		if math.Abs(num-g[i]) > 1e-6*(1+math.Abs(num)) {
			t.Errorf("∂/∂v[%d] = %v, central difference %v", i, g[i], num)
		}
	}
	for j := range p { // padding rows get no gradient
		if g[3*p+j] != 0 || g[7*p+j] != 0 {
			t.Fatalf("padding rows have gradient %v, %v", g[3*p:4*p], g[7*p:])
		}
	}
}

// Through a gorgonia graph (float32, as training runs it) the op gives the same loss and gradient as
// the direct computation, scaled by the upstream gradient.
func TestNTXentInAGraph(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n, p, tau = 6, 4, 0.5
	v32, v64 := make([]float32, n*p), make([]float64, n*p)
	for i := range v32 {
		v32[i] = float32(r.NormFloat64())
		v64[i] = float64(v32[i])
	}
	g := G.NewGraph()
	vn := G.NewMatrix(g, tensor.Float32, G.WithShape(n, p), G.WithName("v"), G.WithValue(tensor.New(tensor.WithShape(n, p), tensor.WithBacking(v32))))
	mn := G.NewVector(g, tensor.Float32, G.WithShape(n), G.WithName("mask"), G.WithValue(tensor.New(tensor.WithShape(n), tensor.WithBacking([]float32{1, 1, 1, 1, 1, 1}))))
	loss, err := NTXent(vn, mn, tau)
	if err != nil {
		t.Fatal(err)
	}
	scaled, err := G.Mul(loss, Scalar(tensor.Float32, 3))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := G.Grad(scaled, vn); err != nil {
		t.Fatal(err)
	}
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	want, wantGrad := ntxent(v64, []bool{true, true, true, true, true, true}, n, p, tau, 3)
	if got := float64(loss.Value().Data().(float32)); math.Abs(got-want) > 1e-5 {
		t.Errorf("loss %v, want %v", got, want)
	}
	gv, err := vn.Grad()
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range gv.Data().([]float32) {
		if math.Abs(float64(x)-wantGrad[i]) > 1e-5 {
			t.Errorf("gradient %d: %v, want %v", i, x, wantGrad[i])
		}
	}
	if _, err := NTXent(vn, mn, 0); err == nil {
		t.Error("τ = 0 accepted")
	}
}
