package vlm

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
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

// The clipped gradient sum CDP training steps with, formed from the layers' inputs and pre-activation
// gradients (addClipped), equals Σ_r min(1, C/‖g_r‖)·g_r with every g_r computed on its own: a backward
// pass of the ordinary graph of the same weights with row weight 1 on row r and 0 elsewhere. With C
// between the rows' norms some rows are clipped and some are not; with C huge it is the plain sum.
func TestClippedGradientSumIsPerExample(t *testing.T) {
	in, bs := 12, 6
	cfg := Config{D: 3, L: 5, EpsPretrain: 10, Hidden: []int{7, 5}, Likelihood: Bernoulli, Epochs: 1, BatchSize: bs, LR: 1e-3,
		CDP: &CDPTarget{Epsilon: 1}, MaxGradNorm: 1}
	m := newModel(cfg, in)
	m.initWeights(rand.New(rand.NewPCG(1, 2)))
	tgC, vmC, err := compileTrainGraph(m, bs)
	if err != nil {
		t.Fatal(err)
	}
	defer vmC.Close()
	m.cfg.CDP = nil
	tgP, vmP, err := compileTrainGraph(m, bs)
	if err != nil {
		t.Fatal(err)
	}
	defer vmP.Close()
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
	for _, tg := range []*trainGraph{tgC, tgP} {
		for _, l := range []struct {
			n   *G.Node
			buf []float32
			sh  []int
		}{{tg.x, x, []int{bs, in}}, {tg.xi, xi, []int{bs, cfg.D}}, {tg.w, w, []int{bs}}} {
			if err := G.Let(l.n, tensor.New(tensor.WithShape(l.sh...), tensor.WithBacking(l.buf))); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Each row's gradient on its own, from the ordinary graph.
	per := make([][]float64, bs)
	norm := make([]float64, bs)
	for row := range bs {
		for i := range w {
			w[i] = 0
		}
		w[row] = 1
		if err := vmP.RunAll(); err != nil {
			t.Fatal(err)
		}
		for _, p := range tgP.params {
			_, g, err := graph.WeightsGrads(p)
			if err != nil {
				t.Fatal(err)
			}
			for j, v := range g {
				per[row] = append(per[row], float64(v))
				norm[row] += float64(v) * float64(v)
				g[j] = 0
			}
		}
		norm[row] = math.Sqrt(norm[row])
		vmP.Reset()
	}
	sorted := append([]float64(nil), norm...)
	slices.Sort(sorted)
	for _, clip := range []float64{sorted[bs/2], 1e9} {
		for i := range w {
			w[i] = 1
		}
		if err := vmC.RunAll(); err != nil {
			t.Fatal(err)
		}
		grads := make([][]float32, len(tgC.params))
		for i, p := range tgC.params {
			grads[i] = make([]float32, p.Shape().TotalSize())
		}
		var scaled []float32
		if err := tgC.addClipped(bs, bs, clip, make([]float64, bs), &scaled, grads); err != nil {
			t.Fatal(err)
		}
		vmC.Reset()
		var got []float64
		for _, g := range grads {
			for _, v := range g {
				got = append(got, float64(v))
			}
		}
		clipped := 0
		for j := range got {
			want := 0.0
			for row := range bs {
				want += min(1, clip/norm[row]) * per[row][j]
			}
			if math.Abs(got[j]-want) > 1e-4*(1+math.Abs(want)) {
				t.Fatalf("C = %v, parameter %d: %v, per-example sum %v", clip, j, got[j], want)
			}
		}
		for _, nr := range norm {
			if nr > clip {
				clipped++
			}
		}
		t.Logf("C = %.4g: %d of %d rows clipped (norms %.3g)", clip, clipped, bs, norm)
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
