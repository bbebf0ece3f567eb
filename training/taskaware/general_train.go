package taskaware

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

// PCG streams of Train, one per use of randomness.
const (
	streamTaskInit = 0x74612d66696e6974 // "ta-finit"
	streamEncInit  = 0x74612d65696e6974 // "ta-einit"
	streamTaskShuf = 0x74612d6673687566 // "ta-fshuf"
	streamEncShuf  = 0x74612d6573687566 // "ta-eshuf"
	streamLatNoise = 0x74612d6e6f697365 // "ta-noise"
)

// Train trains a task-aware encoder and decoder on the labelled auxiliary rows (spec II.4):
//
//  1. the task model f on the clean rows (inputs scaled to the unit box, Adam, TaskEpochs epochs);
//  2. with f frozen, Algorithm 1: each epoch, for each batch, a Laplace noise matrix w of scale
//     b = Δ1/ε (Δ1 the data-independent sensitivity of the current encoder, recomputed before every
//     batch from the weights: spec II.6 pitfalls 1 and 2; zero in the first epoch, as the paper's
//     code), then Steps Adam steps of encoder and decoder together on ℓ(f(Dec(Enc(u) + w)), y), the
//     encoder's gradient plus η·θ_e (Algorithm 1, line 3; the paper's code steps the encoder, then
//     recomputes and steps the decoder: twice the work for the same fixed point). The noise is not
//     differentiated through its scale (Algorithm 1), which is why η is needed.
//
// The baselines train the same networks differently (Design). Rows and labels stay the caller's.
// progress, if not nil, is called after every epoch (the task model's epochs are restart 1 of 2).
func Train(ctx context.Context, c TrainConfig, rows [][]float32, labels []float64, progress func(nn.Progress)) (*Network, error) {
	return TrainFrom(ctx, c, nil, rows, labels, progress)
}

// TrainFrom is Train with the task model of base, a network trained on the same rows, labels and task
// (an experiment's designs and ε values share one f); nil trains f.
func TrainFrom(ctx context.Context, c TrainConfig, base *Network, rows [][]float32, labels []float64, progress func(nn.Progress)) (*Network, error) {
	if err := trainSpec.Wrap(c.validate()); err != nil {
		return nil, err
	}
	if len(rows) < 2 || len(rows) != len(labels) {
		return nil, fmt.Errorf("task_aware: %d rows and %d labels: want at least 2 labelled rows", len(rows), len(labels))
	}
	n := len(rows[0])
	m := &Network{Format: NetworkFormat, InputDim: n, Z: c.Z, Task: c.Task, Encoder: c.Encoder, Design: c.Design, Eps: c.Eps, N: len(rows)}
	if c.Design == DesignTaskAgnostic {
		m.Z = n
	}
	if err := m.setBox(rows, c.InputRange); err != nil {
		return nil, err
	}
	u := make([]float32, len(rows)*n)
	for r, x := range rows {
		for j, v := range m.scale(x) {
			u[r*n+j] = float32(v)
		}
	}
	k, targets, err := m.setTargets(labels, c.Classes, c.LabelRange)
	if err != nil {
		return nil, err
	}

	t := trainer{c: c, m: m, u: u, targets: targets, k: k, n: len(rows), bs: c.batchSize(len(rows))}
	if c.CDP != nil {
		if base != nil {
			return nil, errors.New("task_aware: cdp training trains its own task model")
		}
		if err := t.setupCDP(); err != nil {
			return nil, err
		}
	}
	total := c.Epochs
	if c.Design == DesignPrivacyAgnostic {
		total += c.Epochs
	}
	if base != nil {
		if base.Task != c.Task || base.InputDim != n || base.N != len(rows) || base.Classes != m.Classes {
			return nil, errors.New("task_aware: the base network's task model was trained on other rows or for another task")
		}
		m.F, m.TaskLoss = graph.CloneLayers(base.F), base.TaskLoss
	} else if err := t.taskModel(ctx, total, progress); err != nil {
		return nil, err
	}

	// Encoder and decoder.
	init := rand.New(rand.NewPCG(c.Seed, streamEncInit))
	if c.Design != DesignTaskAgnostic {
		if c.Encoder == EncoderMLP {
			m.Enc = []Layer{graph.NewLayer(n, n, graph.Sigmoid), graph.NewLayer(n, m.Z, graph.Identity)}
		} else {
			m.Enc = []Layer{graph.NewLayer(n, m.Z, graph.Identity)}
		}
	}
	if c.Encoder == EncoderMLP {
		m.Dec = []Layer{graph.NewLayer(m.Z, n, graph.Sigmoid), graph.NewLayer(n, n, graph.Identity)}
	} else {
		m.Dec = []Layer{graph.NewLayer(m.Z, n, graph.Identity)}
	}
	for i := range m.Enc {
		m.Enc[i].Init(init)
	}
	for i := range m.Dec {
		m.Dec[i].Init(init)
	}
	shuffle := rand.New(rand.NewPCG(c.Seed, streamEncShuf))
	noise := rand.New(rand.NewPCG(c.Seed, streamLatNoise))
	loop := func(epochs, later int) nn.Loop {
		return nn.Loop{Epochs: epochs, BatchSize: t.bs, Shuffle: shuffle, Restart: 2, Restarts: 2, LaterEpochs: later, Progress: progress}
	}
	var loss float64
	switch c.Design {
	case DesignTaskAware:
		loss, err = t.fitCodec(ctx, loop(c.Epochs, 0), codecPhase{trainEnc: true, eta: c.Eta, noise: noise, quietFirst: true})
	case DesignPrivacyAgnostic:
		// Noise-free, one encoder and one decoder step per batch (the paper's code), then the decoder
		// alone on the frozen encoder's noisy latents.
		if _, err = t.fitCodec(ctx, loop(c.Epochs, c.Epochs), codecPhase{trainEnc: true, steps: 1}); err == nil {
			loss, err = t.fitCodec(ctx, loop(c.Epochs, 0), codecPhase{noise: noise})
		}
	case DesignTaskAgnostic:
		loss, err = t.fitCodec(ctx, loop(c.Epochs, 0), codecPhase{noise: noise})
	}
	if err != nil {
		return nil, err
	}
	m.TrainLoss, m.Epochs = loss, c.Epochs
	if t.cdp != nil {
		rec := t.cdp.Record
		m.CDP = &rec
	}
	d1, centre, err := m.sensitivity()
	if err != nil {
		return nil, err
	}
	m.Delta1, m.Radius, m.Centre = d1, d1/2, centre
	if x, y := m.Extremes(); x != nil {
		m.ExtremeVertices = [][]float64{x, y}
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("task_aware: %w", err)
	}
	return m, nil
}

// setBox records the input domain: the public range given (every feature in [lo, hi]), else the
// auxiliary rows' per-feature range, published with the model.
func (m *Network) setBox(rows [][]float32, given []float64) error {
	n := m.InputDim
	m.Lo, m.Hi = make([]float64, n), make([]float64, n)
	for j := range n {
		m.Lo[j], m.Hi[j] = math.Inf(1), math.Inf(-1)
	}
	for r, x := range rows {
		if len(x) != n {
			return fmt.Errorf("task_aware: row %d has %d features, row 1 has %d", r+1, len(x), n)
		}
		for j, v := range x {
			f := float64(v)
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Errorf("task_aware: row %d, feature %d is %v", r+1, j+1, v)
			}
			m.Lo[j], m.Hi[j] = min(m.Lo[j], f), max(m.Hi[j], f)
		}
	}
	if given != nil {
		for j := range n {
			m.Lo[j], m.Hi[j] = given[0], given[1]
		}
	}
	return nil
}

// setTargets returns f's output count and the targets, row-major: one-hot classes (classes of them
// when given), or the label scaled to [0, 1] by its range (the given one, labels clipped into it, else
// the rows').
func (m *Network) setTargets(labels []float64, classes int, labelRange []float64) (int, []float32, error) {
	if m.Task == TaskRegression {
		lo, hi := math.Inf(1), math.Inf(-1)
		for i, y := range labels {
			if math.IsNaN(y) || math.IsInf(y, 0) {
				return 0, nil, fmt.Errorf("task_aware: label of row %d is %v", i+1, y)
			}
			lo, hi = min(lo, y), max(hi, y)
		}
		if labelRange != nil {
			lo, hi = labelRange[0], labelRange[1]
		}
		m.LabelLo, m.LabelHi = lo, hi
		t := make([]float32, len(labels))
		for i, y := range labels {
			t[i] = float32((min(hi, max(lo, y)) - lo) / max(hi-lo, 1e-300))
		}
		return 1, t, nil
	}
	if classes > 0 {
		for i, y := range labels {
			if y != math.Trunc(y) || y < 0 || y >= float64(classes) {
				return 0, nil, fmt.Errorf("task_aware: label of row %d is %v: want a class 0 to %d (classes = %d)", i+1, y, classes-1, classes)
			}
		}
	}
	k := max(2, classes)
	for i, y := range labels {
		if y != math.Trunc(y) || y < 0 || y >= MaxClasses {
			return 0, nil, fmt.Errorf("task_aware: label of row %d is %v: classification wants integer classes 0 to %d", i+1, y, MaxClasses-1)
		}
		k = max(k, int(y)+1)
	}
	m.Classes = k
	t := make([]float32, len(labels)*k)
	for i, y := range labels {
		t[i*k+int(y)] = 1
	}
	return k, t, nil
}

// trainer holds one training run's data.
type trainer struct {
	c       TrainConfig
	m       *Network
	u       []float32 // scaled rows, n × InputDim
	targets []float32 // n × k
	k, n    int
	bs      int       // the graph's rows: the batch size, or under CDP a little more than its expected size
	cdp     *nn.DPSGD // nil without CDP
}

// net is a compiled training graph: inputs, the loss, and the trainable parameters with the layers they
// come from (to copy the trained values back).
type net struct {
	vm                 G.VM
	u, w, rowW, target *G.Node
	loss               *G.Node
	params             []*G.Node
	layers             []*Layer // params[2i], params[2i+1] are layers[i]'s W and B
	uBuf, wBuf, rwBuf  []float32
	tBuf               []float32
	// Under CDP: each trainable layer's input and the loss's gradient at its pre-activation (zero
	// probe inputs, graph.DenseProbed), for graph.AddClipped; no parameter gradient is taken.
	layerIn, zGrad, probes []*G.Node
}

// build compiles the graph: f(Dec(Enc(u) + w)) when codec, else f(u); trainable are f's layers
// (task model) or the encoder's and decoder's (codec), the rest are constants.
func (t *trainer) build(codec bool) (*net, error) {
	n, bs, k := t.m.InputDim, t.bs, t.k
	nt := &net{uBuf: make([]float32, bs*n), rwBuf: make([]float32, bs), tBuf: make([]float32, bs*k)}
	if codec {
		nt.wBuf = make([]float32, bs*t.m.Z)
	}
	var g *G.ExprGraph
	vm, err := graph.Compile(func() (*G.ExprGraph, []*G.Node, error) {
		g = G.NewGraph()
		nt.u = G.NewMatrix(g, tensor.Float32, G.WithShape(bs, n), G.WithName("u"))
		nt.rowW = G.NewVector(g, tensor.Float32, G.WithShape(bs), G.WithName("rowW"))
		nt.target = G.NewMatrix(g, tensor.Float32, G.WithShape(bs, k), G.WithName("target"))
		stack := func(name string, x *G.Node, ls []Layer, trainable bool) (*G.Node, error) {
			for i := range ls {
				l := &ls[i]
				w := graph.Matrix(g, fmt.Sprintf("%s%d.w", name, i), l.In, l.Out, l.W)
				b := graph.Matrix(g, fmt.Sprintf("%s%d.b", name, i), 1, l.Out, l.B)
				if trainable {
					nt.params = append(nt.params, w, b)
					nt.layers = append(nt.layers, l)
				}
				var probe *G.Node
				if trainable && t.cdp != nil {
					probe = graph.Matrix(g, fmt.Sprintf("%s%d.probe", name, i), bs, l.Out, make([]float32, bs*l.Out))
					nt.layerIn, nt.probes = append(nt.layerIn, x), append(nt.probes, probe)
				}
				var err error
				if x, err = graph.DenseProbed(x, w, b, probe, l.Act); err != nil {
					return nil, fmt.Errorf("%s layer %d: %w", name, i, err)
				}
			}
			return x, nil
		}
		x := nt.u
		var err error
		if codec {
			if x, err = stack("enc", x, t.m.Enc, true); err != nil {
				return nil, nil, err
			}
			nt.w = G.NewMatrix(g, tensor.Float32, G.WithShape(bs, t.m.Z), G.WithName("w"))
			if x, err = G.Add(x, nt.w); err != nil {
				return nil, nil, err
			}
			if x, err = stack("dec", x, t.m.Dec, true); err != nil {
				return nil, nil, err
			}
		}
		out, err := stack("f", x, t.m.F, !codec)
		if err != nil {
			return nil, nil, err
		}
		if nt.loss, err = taskLossNode(t.m.Task, out, nt.target, nt.rowW); err != nil {
			return nil, nil, err
		}
		if t.cdp != nil {
			if nt.zGrad, err = G.Grad(nt.loss, nt.probes...); err != nil {
				return nil, nil, fmt.Errorf("gradient: %w", err)
			}
			return g, nt.probes, nil
		}
		if _, err := G.Grad(nt.loss, nt.params...); err != nil {
			return nil, nil, fmt.Errorf("gradient: %w", err)
		}
		return g, nt.params, nil
	})
	if err != nil {
		return nil, fmt.Errorf("task_aware: building the training graph: %w", err)
	}
	nt.vm = vm
	lets := []struct {
		node  *G.Node
		shape []int
		buf   []float32
	}{{nt.u, []int{bs, n}, nt.uBuf}, {nt.rowW, []int{bs}, nt.rwBuf}, {nt.target, []int{bs, k}, nt.tBuf}}
	if codec {
		lets = append(lets, struct {
			node  *G.Node
			shape []int
			buf   []float32
		}{nt.w, []int{bs, t.m.Z}, nt.wBuf})
	}
	for _, l := range lets {
		if err := G.Let(l.node, tensor.New(tensor.WithShape(l.shape...), tensor.WithBacking(l.buf))); err != nil {
			vm.Close()
			return nil, err
		}
	}
	return nt, nil
}

// taskLossNode is Σ_r rowW_r·ℓ_r: cross-entropy of the logits out against one-hot targets, or the
// squared error.
func taskLossNode(task string, out, target, rowW *G.Node) (*G.Node, error) {
	var per *G.Node
	if task == TaskRegression {
		d, err := G.Sub(out, target)
		if err != nil {
			return nil, err
		}
		if d, err = G.Square(d); err != nil {
			return nil, err
		}
		per, err = G.Sum(d, 1)
		if err != nil {
			return nil, err
		}
	} else {
		var err error
		if per, err = graph.CrossEntropyRows(out, target); err != nil {
			return nil, err
		}
	}
	if per == nil {
		return nil, errors.New("no loss")
	}
	return G.Mul(per, rowW)
}

// load fills the input buffers with the batch (padding rows get weight 0).
func (t *trainer) load(nt *net, batch []int) {
	n, k := t.m.InputDim, t.k
	for i := range t.bs {
		if i < len(batch) {
			r := batch[i]
			copy(nt.uBuf[i*n:(i+1)*n], t.u[r*n:(r+1)*n])
			copy(nt.tBuf[i*k:(i+1)*k], t.targets[r*k:(r+1)*k])
			nt.rwBuf[i] = 1 / float32(len(batch))
		} else {
			clear(nt.uBuf[i*n : (i+1)*n])
			clear(nt.tBuf[i*k : (i+1)*k])
			nt.rwBuf[i] = 0
		}
	}
}

// run evaluates the graph and returns the loss and the parameters' value and gradient views; the
// caller steps and then calls done.
func (nt *net) run() (float64, [][]float32, [][]float32, error) {
	return graph.Run(nt.vm, nt.loss, nt.params)
}

// done zeroes the gradients (the machine accumulates into them) and readies the machine for a run.
func (nt *net) done(gs [][]float32) {
	for _, g := range gs {
		clear(g)
	}
	nt.vm.Reset()
}

// copyBack copies the graph's trained values into the layers.
func (nt *net) copyBack() error {
	for i, l := range nt.layers {
		w, err := graph.F32s(nt.params[2*i].Value())
		if err != nil {
			return err
		}
		b, err := graph.F32s(nt.params[2*i+1].Value())
		if err != nil {
			return err
		}
		copy(l.W, w)
		copy(l.B, b)
	}
	return nil
}

func count(segs [][]float32) int {
	s := 0
	for _, v := range segs {
		s += len(v)
	}
	return s
}

// fitTaskModel trains f on the clean scaled rows and returns its mean training loss.
func (t *trainer) fitTaskModel(ctx context.Context, loop nn.Loop) (float64, error) {
	nt, err := t.build(false)
	if err != nil {
		return 0, err
	}
	defer nt.vm.Close()
	if t.cdp != nil {
		loss, err := t.cdpTrain(ctx, nt, loop, 0, 0, nil)
		if err != nil {
			return 0, wrapTrainErr(ctx, "task model", err)
		}
		return loss, nt.copyBack()
	}
	var opt *nn.Adam[float32, float32]
	res, err := loop.Run(ctx, t.n, nn.Steps{Step: func(batch []int) (float64, error) {
		t.load(nt, batch)
		loss, ws, gs, err := nt.run()
		if err != nil {
			return 0, err
		}
		if opt == nil {
			opt = nn.NewAdam[float32, float32](count(ws), t.c.LR)
		}
		opt.StepSegments(ws, gs)
		nt.done(gs)
		return loss, nil
	}})
	if err != nil {
		return 0, wrapTrainErr(ctx, "task model", err)
	}
	return res.TrainLoss, nt.copyBack()
}

// codecPhase says what one encoder/decoder training phase does.
type codecPhase struct {
	trainEnc   bool       // step the encoder (else it stays as it is)
	eta        float64    // the encoder's weight decay
	noise      *rand.Rand // nil: no noise
	quietFirst bool       // no noise in the first epoch
	steps      int        // steps per batch; 0 is TrainConfig.Steps
}

// fitCodec runs one phase and returns the last epoch's mean loss.
func (t *trainer) fitCodec(ctx context.Context, loop nn.Loop, ph codecPhase) (float64, error) {
	nt, err := t.build(true)
	if err != nil {
		return 0, err
	}
	defer nt.vm.Close()
	nEnc := 2 * len(t.m.Enc) // the encoder's parameters come first
	if t.cdp != nil {
		loss, err := t.cdpTrain(ctx, nt, loop, nEnc, ph.eta, &ph)
		if err != nil {
			return 0, wrapTrainErr(ctx, "encoder", err)
		}
		return loss, nt.copyBack()
	}
	var encOpt, decOpt *nn.Adam[float32, float32]
	steps := ph.steps
	if steps == 0 {
		steps = t.c.Steps
	}
	batches := (t.n + t.bs - 1) / t.bs
	calls := 0
	res, err := loop.Run(ctx, t.n, nn.Steps{Step: func(batch []int) (float64, error) {
		epoch := calls/batches + 1
		calls++
		t.load(nt, batch)
		if err := t.drawNoise(nt, ph, epoch); err != nil {
			return 0, err
		}
		var first float64
		for s := range steps {
			loss, ws, gs, err := nt.run()
			if err != nil {
				return 0, err
			}
			if s == 0 {
				first = loss
			}
			if ph.trainEnc {
				if encOpt == nil {
					encOpt = nn.NewAdam[float32, float32](count(ws[:nEnc]), t.c.LR)
				}
				if ph.eta > 0 {
					for i := range nEnc {
						for j, w := range ws[i] {
							gs[i][j] += float32(ph.eta) * w
						}
					}
				}
				encOpt.StepSegments(ws[:nEnc], gs[:nEnc])
			}
			if decOpt == nil {
				decOpt = nn.NewAdam[float32, float32](count(ws[nEnc:]), t.c.LR)
			}
			decOpt.StepSegments(ws[nEnc:], gs[nEnc:])
			nt.done(gs)
		}
		return first, nil
	}})
	if err != nil {
		return 0, wrapTrainErr(ctx, "encoder", err)
	}
	return res.TrainLoss, nt.copyBack()
}

// drawNoise fills the noise input: zero without noise (or in a quiet first epoch), else Laplace of
// scale Δ1/ε for the encoder's current weights.
func (t *trainer) drawNoise(nt *net, ph codecPhase, epoch int) error {
	if ph.noise == nil || (ph.quietFirst && epoch == 1) {
		clear(nt.wBuf)
		return nil
	}
	if err := nt.copyBack(); err != nil { // the encoder's current weights, for Δ1
		return err
	}
	d1, _, err := t.m.sensitivity()
	if err != nil {
		return err
	}
	b := d1 / t.c.Eps
	for i := range nt.wBuf {
		nt.wBuf[i] = float32(b * nn.StdLaplace(ph.noise))
	}
	return nil
}

func wrapTrainErr(ctx context.Context, what string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		return ctxErr
	}
	return fmt.Errorf("task_aware: training the %s: %w", what, err)
}

// taskModel trains f; later is the encoder's epochs still to come, for the ETA.
func (t *trainer) taskModel(ctx context.Context, later int, progress func(nn.Progress)) error {
	c, m, n, k := t.c, t.m, t.m.InputDim, t.k
	hidden := c.TaskHidden
	if hidden == 0 {
		hidden = int(math.Ceil(1.5 * float64(n)))
	}
	if c.TaskModel == EncoderLinear {
		m.F = []Layer{graph.NewLayer(n, k, graph.Identity)}
	} else {
		m.F = []Layer{graph.NewLayer(n, hidden, graph.ReLU), graph.NewLayer(hidden, k, graph.Identity)}
	}
	init := rand.New(rand.NewPCG(c.Seed, streamTaskInit))
	for i := range m.F {
		m.F[i].Init(init)
	}
	// Progress counts the task model's training as start 1 of 2, the encoder's as start 2.
	loss, err := t.fitTaskModel(ctx, nn.Loop{Epochs: c.TaskEpochs, BatchSize: t.bs, Shuffle: rand.New(rand.NewPCG(c.Seed, streamTaskShuf)),
		Restart: 1, Restarts: 2, LaterEpochs: later, Progress: progress})
	if err != nil {
		return err
	}
	m.TaskLoss = loss
	return nil
}
