package graph

import (
	"math"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// ceLoss builds Σ_r CrossEntropyRows(a, t) over the values av, tv (rows × k) in dtype float64 and
// returns the loss and ∂loss/∂a.
func ceLoss(t *testing.T, rows, k int, av, tv []float64) (float64, []float64) {
	t.Helper()
	g := G.NewGraph()
	a := G.NewMatrix(g, tensor.Float64, G.WithShape(rows, k), G.WithName("a"), G.WithValue(tensor.New(tensor.WithShape(rows, k), tensor.WithBacking(append([]float64(nil), av...)))))
	tt := G.NewMatrix(g, tensor.Float64, G.WithShape(rows, k), G.WithName("t"), G.WithValue(tensor.New(tensor.WithShape(rows, k), tensor.WithBacking(append([]float64(nil), tv...)))))
	per, err := CrossEntropyRows(a, tt)
	if err != nil {
		t.Fatal(err)
	}
	loss, err := G.Sum(per)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := G.Grad(loss, a); err != nil {
		t.Fatal(err)
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(a))
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	gv, err := a.Grad()
	if err != nil {
		t.Fatal(err)
	}
	return loss.Value().Data().(float64), append([]float64(nil), gv.Data().([]float64)...)
}

// The loss is Σ_r (logsumexp(a_r) − a_r,y_r) and its gradient softmax − onehot, exactly, also for rows
// whose logits lie far below the first row's (where gorgonia's LogSoftMax gives −Inf and NaN) and for
// a padding row of zero targets (loss and gradient 0); and the gradient matches central finite
// differences everywhere.
func TestCrossEntropyRows(t *testing.T) {
	const rows, k = 4, 3
	av := []float64{50, 0, 0, -100, -101, -99, 0.3, -0.2, 0.1, 5, 1, 2}
	tv := []float64{1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0} // the last row is padding
	loss, grad := ceLoss(t, rows, k, av, tv)
	want := 0.0
	for r := range rows {
		m := math.Inf(-1)
		for j := range k {
			m = max(m, av[r*k+j])
		}
		s, ts := 0.0, 0.0
		for j := range k {
			s += math.Exp(av[r*k+j] - m)
			ts += tv[r*k+j]
		}
		lse := m + math.Log(s)
		for j := range k {
			want -= tv[r*k+j] * av[r*k+j]
			g := math.Exp(av[r*k+j]-lse)*ts - tv[r*k+j]
			if math.Abs(grad[r*k+j]-g) > 1e-12 {
				t.Errorf("∂/∂a[%d][%d] = %v, want %v", r, j, grad[r*k+j], g)
			}
		}
		want += ts * lse
	}
	if math.IsNaN(loss) || math.Abs(loss-want) > 1e-9 {
		t.Fatalf("loss %v, want %v", loss, want)
	}
	for r := range rows {
		for j := range k {
			h := 1e-6
			p, m := append([]float64(nil), av...), append([]float64(nil), av...)
			p[r*k+j] += h
			m[r*k+j] -= h
			lp, _ := ceLoss(t, rows, k, p, tv)
			lm, _ := ceLoss(t, rows, k, m, tv)
			if fd := (lp - lm) / (2 * h); math.Abs(fd-grad[r*k+j]) > 1e-5 {
				t.Errorf("finite difference at [%d][%d]: %v, gradient %v", r, j, fd, grad[r*k+j])
			}
		}
	}
}
