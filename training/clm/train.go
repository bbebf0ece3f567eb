package clm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ldpsql/ldpsql/training/nn"
	"github.com/ldpsql/ldpsql/training/nn/graph"
)

// PCG streams of Train, one per use of randomness.
const (
	streamInit    = 0x636c6d2d696e6974 // "clm-init"
	streamShuffle = 0x636c6d2d73687566 // "clm-shuf"
	streamViews   = 0x636c6d2d76696577 // "clm-view"
	streamNoise   = 0x636c6d2d6e6f6973 // "clm-nois"
)

// Train trains a CLM on rows (the auxiliary table's features, unlabelled): each step takes a batch of
// B rows, draws two views of each (Config's augmentations), encodes all 2B views, scales them into the
// ℓ1 ball (ν₁), adds Laplace(b) training noise, projects them with the head and takes an Adam step on
// NT-Xent (graph.NTXent). progress, if not nil, is called after every epoch. Rows stay the caller's.
func Train(ctx context.Context, c Config, rows [][]float32, progress func(nn.Progress)) (*Model, error) {
	if len(rows) < 2 {
		return nil, fmt.Errorf("clm: %d rows: want at least 2", len(rows))
	}
	n := len(rows[0])
	if err := checkRows(rows, n, "row 1 has"); err != nil {
		return nil, err
	}
	if err := configSpec.Wrap(c.withDefaults().validate()); err != nil {
		return nil, err
	}
	c, err := c.Resolve(len(rows), n)
	if err != nil {
		return nil, configSpec.Wrap(err)
	}
	m := &Model{cfg: c, inputDim: n, std: nn.FitStandardiser(rows, n), N: len(rows)}
	init := rand.New(rand.NewPCG(c.Seed, streamInit))
	in := n
	for _, h := range c.Hidden {
		m.enc = append(m.enc, graph.NewLayer(in, h, graph.ReLU))
		in = h
	}
	m.enc = append(m.enc, graph.NewLayer(in, c.D, graph.Identity))
	head := []graph.Layer{graph.NewLayer(c.D, c.Head[0], graph.ReLU), graph.NewLayer(c.Head[0], c.Head[1], graph.Identity)}
	for i := range m.enc {
		m.enc[i].Init(init)
	}
	for i := range head {
		head[i].Init(init)
	}

	bs := min(c.BatchSize, len(rows))
	t, err := newTrainer(m, head, bs)
	if err != nil {
		return nil, err
	}
	defer t.vm.Close()
	aug := newAugmenter(c, rows)
	views := rand.New(rand.NewPCG(c.Seed, streamViews))
	noise := rand.New(rand.NewPCG(c.Seed, streamNoise))
	b := c.TrainScale()
	view := make([]float32, n)
	var opt *nn.Adam[float32, float32]
	loop := nn.Loop{Epochs: c.Epochs, BatchSize: bs, Shuffle: rand.New(rand.NewPCG(c.Seed, streamShuffle)), Progress: progress}
	res, err := loop.Run(ctx, len(rows), nn.Steps{Step: func(batch []int) (float64, error) {
		// Rows [0, bs) hold the first views, [bs, 2bs) the second; padding rows are masked out.
		for i := range bs {
			for v := range 2 {
				r := i + v*bs
				x := t.xBuf[r*n : (r+1)*n]
				if i >= len(batch) {
					clear(x)
					t.maskBuf[r] = 0
					continue
				}
				aug.view(views, rows[batch[i]], view)
				copy(x, view)
				t.maskBuf[r] = 1
			}
		}
		m.std.Apply(t.xBuf)
		for i := range t.noiseBuf {
			t.noiseBuf[i] = float32(b * nn.StdLaplace(noise))
		}
		loss, ws, gs, err := graph.Run(t.vm, t.loss, t.params)
		if err != nil {
			return 0, err
		}
		if opt == nil {
			size := 0
			for _, w := range ws {
				size += len(w)
			}
			opt = nn.NewAdam[float32, float32](size, c.LR)
			opt.ZeroGrad = true // the tape machine accumulates into the gradients
		}
		opt.StepSegments(ws, gs)
		t.vm.Reset()
		return loss, nil
	}})
	if err != nil {
		if errors.Is(err, nn.ErrDiverged) {
			return nil, fmt.Errorf("clm: training diverged (try a smaller lr): %w", err)
		}
		return nil, fmt.Errorf("clm: %w", err)
	}
	// Copy the trained encoder back (the head served training only).
	for i := range m.enc {
		w, err := graph.F32s(t.params[2*i].Value())
		if err != nil {
			return nil, err
		}
		bb, err := graph.F32s(t.params[2*i+1].Value())
		if err != nil {
			return nil, err
		}
		copy(m.enc[i].W, w)
		copy(m.enc[i].B, bb)
	}
	m.TrainLoss, m.Epochs = res.TrainLoss, res.EpochsRun
	for i := range m.enc {
		if err := m.enc[i].Check(m.enc[i].In); err != nil {
			return nil, fmt.Errorf("clm: trained encoder layer %d: %w", i+1, err)
		}
	}
	return m, nil
}

// trainer is the compiled training graph for batches of bs rows (2·bs views).
type trainer struct {
	vm                      G.VM
	loss                    *G.Node
	params                  []*G.Node // encoder (W, b) pairs, then the head's
	xBuf, noiseBuf, maskBuf []float32
}

func newTrainer(m *Model, head []graph.Layer, bs int) (*trainer, error) {
	n, d, v := m.inputDim, m.cfg.D, 2*bs
	t := &trainer{xBuf: make([]float32, v*n), noiseBuf: make([]float32, v*d), maskBuf: make([]float32, v)}
	var x, noise, mask *G.Node
	vm, err := graph.Compile(func() (*G.ExprGraph, []*G.Node, error) {
		g := G.NewGraph()
		x = G.NewMatrix(g, tensor.Float32, G.WithShape(v, n), G.WithName("x"))
		noise = G.NewMatrix(g, tensor.Float32, G.WithShape(v, d), G.WithName("noise"))
		mask = G.NewVector(g, tensor.Float32, G.WithShape(v), G.WithName("mask"))
		stack := func(name string, h *G.Node, ls []graph.Layer) (*G.Node, error) {
			for i := range ls {
				w, b := ls[i].Nodes(g, fmt.Sprintf("%s%d", name, i))
				t.params = append(t.params, w, b)
				var err error
				if h, err = graph.Dense(h, w, b, ls[i].Act); err != nil {
					return nil, fmt.Errorf("%s layer %d: %w", name, i+1, err)
				}
			}
			return h, nil
		}
		h, err := stack("enc", x, m.enc)
		if err != nil {
			return nil, nil, err
		}
		if h, err = graph.NuL1(h, m.cfg.L); err != nil {
			return nil, nil, err
		}
		if h, err = G.Add(h, noise); err != nil {
			return nil, nil, err
		}
		if h, err = stack("head", h, head); err != nil {
			return nil, nil, err
		}
		if t.loss, err = graph.NTXent(h, mask, m.cfg.Tau); err != nil {
			return nil, nil, err
		}
		if _, err := G.Grad(t.loss, t.params...); err != nil {
			return nil, nil, fmt.Errorf("gradient: %w", err)
		}
		return g, t.params, nil
	})
	if err != nil {
		return nil, fmt.Errorf("clm: building the training graph: %w", err)
	}
	t.vm = vm
	for _, l := range []struct {
		node  *G.Node
		shape []int
		buf   []float32
	}{{x, []int{v, n}, t.xBuf}, {noise, []int{v, d}, t.noiseBuf}, {mask, []int{v}, t.maskBuf}} {
		if err := G.Let(l.node, tensor.New(tensor.WithShape(l.shape...), tensor.WithBacking(l.buf))); err != nil {
			vm.Close()
			return nil, err
		}
	}
	return t, nil
}
