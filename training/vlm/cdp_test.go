package vlm

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ldpsql/ldpsql/training/nn"
	"github.com/ldpsql/ldpsql/training/nn/graph"
)

func bernoulliRows(n, in int, seed uint64) [][]float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	rows := make([][]float32, n)
	for i := range rows {
		rows[i] = make([]float32, in)
		c := r.IntN(3)
		for j := range rows[i] {
			p := 0.1
			if j%3 == c {
				p = 0.9
			}
			if r.Float64() < p {
				rows[i][j] = float32(0.5 + 0.5*r.Float64())
			}
		}
	}
	return rows
}

// The per-example gradient norms of the closed form (‖x_r‖² + 1)·‖δ_r‖², summed over the dense layers,
// equal the norms of the gradients computed one row at a time (a backward pass with row weight 1 on row
// r and 0 elsewhere), for every row of a batch: what CDP training clips is each row's whole gradient.
func TestPerExampleNormsAreTheRowsGradients(t *testing.T) {
	in, bs := 12, 6
	cfg := Config{D: 3, L: 5, EpsPretrain: 10, Hidden: []int{7, 5}, Likelihood: Bernoulli, Epochs: 1, BatchSize: bs, LR: 1e-3,
		CDP: &CDPTarget{Epsilon: 1}, MaxGradNorm: 1}
	m := newModel(cfg, in)
	m.initWeights(rand.New(rand.NewPCG(1, 2)))
	tg, vm, err := compileTrainGraph(m, bs)
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Close()
	rows := bernoulliRows(bs, in, 3)
	x := make([]float32, bs*in)
	for i, r := range rows {
		copy(x[i*in:], r)
	}
	xi := make([]float32, bs*cfg.D)
	r := rand.New(rand.NewPCG(4, 5))
	for i := range xi {
		xi[i] = float32(nn.StdLaplace(r))
	}
	w := make([]float32, bs)
	for _, l := range []struct {
		n   *G.Node
		buf []float32
		sh  []int
	}{{tg.x, x, []int{bs, in}}, {tg.xi, xi, []int{bs, cfg.D}}, {tg.w, w, []int{bs}}} {
		if err := G.Let(l.n, tensor.New(tensor.WithShape(l.sh...), tensor.WithBacking(l.buf))); err != nil {
			t.Fatal(err)
		}
	}
	gradNorm := func() float64 {
		s := 0.0
		for _, p := range tg.params {
			_, g, err := graph.WeightsGrads(p)
			if err != nil {
				t.Fatal(err)
			}
			for j, v := range g {
				s += float64(v) * float64(v)
				g[j] = 0
			}
		}
		return math.Sqrt(s)
	}
	for i := range w {
		w[i] = 1
	}
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	closed := make([]float64, bs)
	for l, xn := range tg.layerIn {
		xv, _ := graph.F32s(xn.Value())
		gv, _ := graph.F32s(tg.zGrad[l].Value())
		din, dout := len(xv)/bs, len(gv)/bs
		for r := range bs {
			xx, gg := 1.0, 0.0
			for _, v := range xv[r*din : (r+1)*din] {
				xx += float64(v) * float64(v)
			}
			for _, v := range gv[r*dout : (r+1)*dout] {
				gg += float64(v) * float64(v)
			}
			closed[r] += xx * gg
		}
	}
	gradNorm()
	vm.Reset()
	for r := range bs {
		for i := range w {
			w[i] = 0
		}
		w[r] = 1
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		got := gradNorm()
		vm.Reset()
		if want := math.Sqrt(closed[r]); math.Abs(got-want) > 1e-4*want+1e-6 {
			t.Errorf("row %d: gradient norm %v, closed form %v", r, got, want)
		}
	}
}

// CDP training end to end: it records the accountant's σ, q, steps and spent ε (≤ the target), keeps
// the record through the artifact, and still learns (the ELBO falls); impossible or unsupported
// settings are refused with errors that say why.
func TestCDPTraining(t *testing.T) {
	rows := bernoulliRows(2000, 20, 7)
	cfg := Config{D: 4, L: 5, EpsPretrain: 20, Hidden: []int{16, 8}, Epochs: 4, BatchSize: 100, LR: 5e-3, CDP: &CDPTarget{Epsilon: 2}}
	var first, last float64
	m, err := Train(context.Background(), cfg, rows, func(p nn.Progress) {
		if p.Epoch == 1 {
			first = p.Loss
		}
		last = p.Loss
	})
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config().CDP
	if c == nil || c.Steps != 4*20 || c.SamplingRate != 0.05 || !(c.NoiseMultiplier > 0.3 && c.NoiseMultiplier < 5) ||
		!(c.Spent <= 2 && c.Spent > 1.9) || c.Delta != 1.0/2000 || m.Config().MaxGradNorm != 1 {
		t.Fatalf("CDP record %+v", c)
	}
	t.Logf("σ = %.3f, ε spent %.4f at α = %d; loss %.2f → %.2f", c.NoiseMultiplier, c.Spent, c.Order, first, last)
	if !(last < first) {
		t.Errorf("the loss did not fall: %v → %v", first, last)
	}
	art, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalModel(art)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Config().CDP; got == nil || *got != *c {
		t.Fatalf("after the artifact: %+v, want %+v", got, c)
	}
	for _, bad := range []struct {
		cfg  Config
		want string
	}{
		{Config{CDP: &CDPTarget{Epsilon: 1}}, "fixed training scale"},
		{Config{EpsPretrain: 10, Likelihood: Gaussian, CDP: &CDPTarget{Epsilon: 1}}, "bernoulli likelihood"},
		{Config{EpsPretrain: 10, CDP: &CDPTarget{Epsilon: 1, Delta: 2}}, "cdp.delta"},
		{Config{EpsPretrain: 10, MaxGradNorm: 2}, "max_grad_norm is for cdp"},
		{Config{EpsPretrain: 10, Epochs: 1000, BatchSize: 2000, CDP: &CDPTarget{Epsilon: 0.01}}, "cannot be met"},
	} {
		if _, err := Train(context.Background(), bad.cfg, rows, nil); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: %v, want an error with %q", bad.cfg, err, bad.want)
		}
	}
}
