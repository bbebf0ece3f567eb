package vlm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ldpsql/ldpsql/training/nn"
	"github.com/ldpsql/ldpsql/training/nn/graph"
)

// PCG stream identifiers: one independent stream per use of randomness.
const (
	streamInit    = 0x766c6d2d696e6974 // "vlm-init"
	streamShuffle = 0x766c6d2d73687566 // "vlm-shuf"
	streamNoise   = 0x766c6d2d6e6f6973 // "vlm-nois"
)

// Train fits the VLM on rows (n × inputDim, all in memory; the caller keeps
// ownership, they are copied) and stops early with ctx.Err() when ctx is
// cancelled (checked before every step). Zero fields of cfg take their
// defaults. For the Bernoulli likelihood every value must lie in [0, 1];
// every value must be finite. progress, if not nil, is called after each
// epoch from Train's goroutine. The same cfg (Seed included) and rows give
// bit-identical weights on the same machine and BLAS build.
func Train(ctx context.Context, cfg Config, rows [][]float32, progress func(nn.Progress)) (*Model, error) {
	cfg, data, err := trainingData(cfg, rows)
	if err != nil {
		return nil, err
	}
	in := len(rows[0])
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	m := newModel(cfg, in)
	if cfg.Likelihood == Gaussian {
		st := nn.FitStandardiser(rows, in)
		m.shift, m.scale = st.Mean, st.Std
		st.Apply(data)
	}
	m.initWeights(rand.New(rand.NewPCG(cfg.Seed, streamInit)))

	n := len(rows)
	bs := min(cfg.BatchSize, n)
	gbs := bs // the graph's rows
	var dpsgd *nn.DPSGD
	if cfg.CDP != nil {
		if cfg.Likelihood != Bernoulli {
			return nil, errors.New("vlm config: cdp needs the bernoulli likelihood (features in [0, 1]): the gaussian likelihood standardises with the rows' own means and deviations, which CDP does not protect")
		}
		// The loop's ⌈n/bs⌉ steps per epoch, each a Poisson batch of expected size bs.
		var err error
		if dpsgd, err = nn.NewDPSGD(*cfg.CDP, n, bs, cfg.Epochs*((n+bs-1)/bs), cfg.MaxGradNorm, nil); err != nil {
			return nil, fmt.Errorf("vlm: cdp: %w", err)
		}
		*m.cfg.CDP = dpsgd.Record
		gbs = dpsgd.ChunkRows()
	}
	tg, vm, err := compileTrainGraph(m, gbs)
	if err != nil {
		return nil, fmt.Errorf("vlm: building the training graph: %w", err)
	}
	defer vm.Close()
	xBuf, xiBuf, wBuf, err := tg.bindInputs(gbs, in, cfg.D)
	if err != nil {
		return nil, err
	}

	nParams := 0
	for _, p := range tg.params {
		nParams += p.Shape().TotalSize()
	}
	opt := nn.NewAdam[float32, float32](nParams, cfg.LR)
	opt.ZeroGrad = true // the tape machine accumulates into the gradients
	noise := rand.New(rand.NewPCG(cfg.Seed, streamNoise))
	step := func(batch []int) (float64, error) {
		k := len(batch)
		for i := range bs {
			dst := xBuf[i*in : (i+1)*in]
			if i < k {
				r := batch[i]
				copy(dst, data[r*in:(r+1)*in])
				wBuf[i] = 1 / float32(k)
			} else {
				clear(dst) // padding: weight 0
				wBuf[i] = 0
			}
		}
		for i := range xiBuf {
			xiBuf[i] = float32(nn.StdLaplace(noise))
		}
		tg.live = k
		loss, segW, segG, err := graph.Run(vm, tg.loss, tg.params)
		if err != nil {
			return 0, err
		}
		opt.StepSegments(segW, segG)
		vm.Reset()
		return loss, nil
	}
	loop := nn.Loop{Epochs: cfg.Epochs, BatchSize: bs, Shuffle: rand.New(rand.NewPCG(cfg.Seed, streamShuffle)), Progress: progress}
	if dpsgd != nil {
		opt.ZeroGrad = false // the CDP step writes the gradient it steps with
		if step, err = m.cdpStep(tg, vm, data, dpsgd, gbs, xBuf, xiBuf, wBuf, opt, noise); err != nil {
			return nil, err
		}
		loop.Shuffle = nil // the step samples its own rows
	}
	if _, err := loop.Run(ctx, n, nn.Steps{Step: step}); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && err == ctxErr {
			return nil, err
		}
		return nil, fmt.Errorf("vlm: %w", err)
	}
	if err := tg.copyWeights(m); err != nil {
		return nil, fmt.Errorf("vlm: %w", err)
	}
	if err := m.checkFinite(); err != nil {
		return nil, err
	}
	return m, nil
}

// trainingData checks cfg and rows, resolves cfg's data-driven settings (the likelihood among them)
// and returns the rows as one row-major slice.
func trainingData(cfg Config, rows [][]float32) (Config, []float32, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return cfg, nil, fmt.Errorf("vlm config: %w", err)
	}
	if len(rows) == 0 {
		return cfg, nil, errNoRows
	}
	in := len(rows[0])
	if in == 0 {
		return cfg, nil, fmt.Errorf("vlm: rows have no values")
	}
	if err := checkRows("row", rows, in); err != nil {
		return cfg, nil, err
	}
	cfg = cfg.Resolve(len(rows), in)
	if err := cfg.validate(); err != nil {
		return cfg, nil, fmt.Errorf("vlm config: %w", err)
	}
	if cfg.Likelihood == "" {
		cfg.Likelihood = chooseLikelihood(rows)
	}
	data := make([]float32, len(rows)*in)
	for i, r := range rows {
		if cfg.Likelihood == Bernoulli {
			for j, v := range r {
				if v < 0 || v > 1 {
					return cfg, nil, fmt.Errorf("vlm: row %d, value %d is %v: the bernoulli likelihood needs features in [0, 1] (use \"gaussian\", or leave the likelihood out to choose it from the data)", i, j, v)
				}
			}
		}
		copy(data[i*in:], r)
	}
	return cfg, data, nil
}

// bindInputs gives the graph's inputs (a batch of rows rows × in, its Laplace draws rows × d and its
// weights) the buffers a step fills, and returns them.
func (tg *trainGraph) bindInputs(rows, in, d int) (x, xi, w []float32, err error) {
	x, xi, w = make([]float32, rows*in), make([]float32, rows*d), make([]float32, rows)
	if err := G.Let(tg.x, tensor.New(tensor.WithShape(rows, in), tensor.WithBacking(x))); err != nil {
		return nil, nil, nil, err
	}
	if err := G.Let(tg.xi, tensor.New(tensor.WithShape(rows, d), tensor.WithBacking(xi))); err != nil {
		return nil, nil, nil, err
	}
	if err := G.Let(tg.w, tensor.New(tensor.WithShape(rows), tensor.WithBacking(w))); err != nil {
		return nil, nil, nil, err
	}
	return x, xi, w, nil
}

func compileTrainGraph(m *Model, bs int) (tg *trainGraph, vm G.VM, err error) {
	vm, err = graph.Compile(func() (*G.ExprGraph, []*G.Node, error) {
		var err error
		if tg, err = newTrainGraph(m, bs); err != nil {
			return nil, nil, err
		}
		if tg.cdp {
			return tg.g, tg.probes, nil // gradients for the probes only (cdp.go forms the weights')
		}
		return tg.g, tg.params, nil
	})
	return tg, vm, err
}

// initWeights draws the initial weights (see the package doc): He-uniform
// for layers followed by a ReLU, Glorot-uniform for the encoder's and
// decoder's output layers, zero biases; b starts at 2L/EpsPretrain or, when
// learnt, at b₀/2.
func (m *Model) initWeights(r *rand.Rand) {
	fill := func(ls []layer) {
		for i := range ls {
			l := &ls[i]
			var lim float64
			if i < len(ls)-1 {
				lim = math.Sqrt(6 / float64(l.In))
			} else {
				lim = math.Sqrt(6 / float64(l.In+l.Out))
			}
			for k := range l.W {
				l.W[k] = float32((2*r.Float64() - 1) * lim)
			}
			clear(l.B)
		}
	}
	fill(m.enc)
	fill(m.dec)
	if m.cfg.EpsPretrain > 0 {
		m.bTrain = float32(2 * m.cfg.L / m.cfg.EpsPretrain)
	} else {
		m.bTrain = float32(learntScaleInit)
	}
}

func (m *Model) checkFinite() error {
	for li, l := range m.layers() {
		for _, v := range l.W {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("vlm: training diverged: layer %d has non-finite weights", li)
			}
		}
		for _, v := range l.B {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("vlm: training diverged: layer %d has non-finite biases", li)
			}
		}
	}
	if b := float64(m.bTrain); !(b > 0) || math.IsInf(b, 0) {
		return fmt.Errorf("vlm: training diverged: scale b = %v", b)
	}
	return nil
}

// chooseLikelihood is Bernoulli when every value lies in [0, 1] (pixel
// intensities), else Gaussian.
func chooseLikelihood(rows [][]float32) string {
	for _, r := range rows {
		for _, v := range r {
			if v < 0 || v > 1 {
				return Gaussian
			}
		}
	}
	return Bernoulli
}
