package vlm

import (
	"fmt"
	"math"
	"slices"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ldpsql/ldpsql/training/nn/graph"
)

// priorScale is b₀ of the prior Laplace(0, 1/√2) (unit variance).
var priorScale = 1 / math.Sqrt2

// learntScaleInit is the initial learnt training scale, b = b₀/2.
var learntScaleInit = priorScale / 2

// laplaceKLRows returns, for μ of shape (B, D) and a scalar scale b with
// log b given as the scalar node logb, the part of Σᵢ KL(Laplace(μᵢ, b) ‖
// Laplace(0, b₀)) that depends on the row, Σᵢ |μᵢ|/b₀ + (b/b₀)·exp(−|μᵢ|/b)
// (shape (B)), and the constant part D·(log b₀ − log b − 1) (scalar), so that
// the KL of row r is rows[r] + constant.
func laplaceKLRows(mu, b, logb *G.Node, d int) (rows, constant *G.Node, err error) {
	dt := mu.Dtype()
	abs, err := G.Abs(mu)
	if err != nil {
		return nil, nil, err
	}
	// exp(−|μ|/b)
	e, err := G.Div(abs, b)
	if err != nil {
		return nil, nil, err
	}
	if e, err = G.Neg(e); err != nil {
		return nil, nil, err
	}
	if e, err = G.Exp(e); err != nil {
		return nil, nil, err
	}
	// (b/b₀)·exp(−|μ|/b)
	bOverB0, err := G.Mul(b, graph.Scalar(dt, 1/priorScale))
	if err != nil {
		return nil, nil, err
	}
	if e, err = G.Mul(bOverB0, e); err != nil {
		return nil, nil, err
	}
	a, err := G.Mul(abs, graph.Scalar(dt, 1/priorScale))
	if err != nil {
		return nil, nil, err
	}
	if a, err = G.Add(a, e); err != nil {
		return nil, nil, err
	}
	if rows, err = G.Sum(a, 1); err != nil {
		return nil, nil, err
	}
	// D·(log b₀ − 1 − log b)
	if constant, err = G.Sub(graph.Scalar(dt, math.Log(priorScale)-1), logb); err != nil {
		return nil, nil, err
	}
	if constant, err = G.Mul(constant, graph.Scalar(dt, float64(d))); err != nil {
		return nil, nil, err
	}
	return rows, constant, nil
}

// laplaceKL is the full Σ over rows and dimensions of the KL, for tests.
func laplaceKL(mu, b, logb *G.Node) (*G.Node, error) {
	rows, c, err := laplaceKLRows(mu, b, logb, mu.Shape()[1])
	if err != nil {
		return nil, err
	}
	s, err := G.Sum(rows)
	if err != nil {
		return nil, err
	}
	nRows := graph.Scalar(mu.Dtype(), float64(mu.Shape()[0]))
	cc, err := G.Mul(c, nRows)
	if err != nil {
		return nil, err
	}
	return G.Add(s, cc)
}

// nllRows is the negative log-likelihood of x (B, n) under the decoder
// output a (B, n), summed over features (shape (B)): Bernoulli
// Σ softplus(a) − x·a, or Gaussian Σ ½(x − a)², whose constant ½·n·log 2π is
// returned separately (0 for Bernoulli). live, when not nil, is how many leading rows are real
// (bceCache.live).
func nllRows(likelihood string, x, a *G.Node, live *int) (rows *G.Node, constant float64, err error) {
	switch likelihood {
	case Bernoulli:
		if rows, err = bceRows(a, x); err == nil && live != nil {
			rows.Op().(*bceOp).cache.live = live
		}
		return rows, 0, err
	case Gaussian:
		diff, err := G.Sub(x, a)
		if err != nil {
			return nil, 0, err
		}
		t, err := G.Square(diff)
		if err != nil {
			return nil, 0, err
		}
		if t, err = G.Mul(t, graph.Scalar(x.Dtype(), 0.5)); err != nil {
			return nil, 0, err
		}
		rows, err = G.Sum(t, 1)
		return rows, 0.5 * float64(x.Shape()[1]) * math.Log(2*math.Pi), err
	}
	return nil, 0, fmt.Errorf("likelihood %q", likelihood)
}

// trainGraph is the VLM's training graph for one batch shape.
type trainGraph struct {
	g *G.ExprGraph
	// Inputs: the batch, standard Laplace noise ξ (B, D), row weights (B).
	x, xi, w *G.Node
	// Parameters, in the order of Model.layers(): encoder then decoder
	// (weights, biases), then log b when it is learnt.
	params []*G.Node
	logb   *G.Node // nil when b is fixed
	mu     *G.Node // ν(h(x)), (B, D)
	loss   *G.Node // Σ_r w_r·(nll_r + kl_r) + constants: the weighted −ELBO
	// For per-example clipping (m.cfg.CDP): each dense layer's input and the loss's gradient at its
	// pre-activation, in the order of params' (W, b) pairs.
	layerIn, zGrad []*G.Node
	cdp            bool
	probes         []*G.Node // zero inputs added to the pre-activations (graph.DenseProbed)
	probeBufs      [][]float32
	// live is how many leading rows of the next run are real: the others are padding of weight 0,
	// whose Bernoulli likelihood and its gradient (multiplied by w_r = 0) the bce ops skip.
	live int
}

// newTrainGraph builds the training graph for batches of bs rows of m's
// input dimension, with copies of m's current weights as the parameter
// values: m never shares memory with gorgonia (which pools tensors);
// copyWeights brings the trained values back.
func newTrainGraph(m *Model, bs int) (*trainGraph, error) {
	return newTrainGraphOf(tensor.Float32, m, bs)
}

// newTrainGraphOf is newTrainGraph in dtype dt: Float32 for training,
// Float64 for the end-to-end gradient check in the tests.
func newTrainGraphOf(dt tensor.Dtype, m *Model, bs int) (*trainGraph, error) {
	g := G.NewGraph()
	tg := &trainGraph{g: g, cdp: m.cfg.CDP != nil}
	d, in := m.cfg.D, m.inputDim
	tg.x = G.NewMatrix(g, dt, G.WithShape(bs, in), G.WithName("x"))
	tg.xi = G.NewMatrix(g, dt, G.WithShape(bs, d), G.WithName("xi"))
	tg.w = G.NewVector(g, dt, G.WithShape(bs), G.WithName("w"))

	// backing copies v into a new slice of dt.
	backing := func(v []float32) any {
		if dt == tensor.Float32 {
			return slices.Clone(v)
		}
		c := make([]float64, len(v))
		for i, x := range v {
			c[i] = float64(x)
		}
		return c
	}
	scalarValue := func(v float64) any {
		if dt == tensor.Float32 {
			return float32(v)
		}
		return v
	}
	param := func(name string, l *layer) (w, b *G.Node) {
		w = G.NewMatrix(g, dt, G.WithShape(l.In, l.Out), G.WithName(name+".w"),
			G.WithValue(tensor.New(tensor.WithShape(l.In, l.Out), tensor.WithBacking(backing(l.W)))))
		b = G.NewMatrix(g, dt, G.WithShape(1, l.Out), G.WithName(name+".b"),
			G.WithValue(tensor.New(tensor.WithShape(1, l.Out), tensor.WithBacking(backing(l.B)))))
		tg.params = append(tg.params, w, b)
		return w, b
	}

	h := tg.x
	var err error
	for i := range m.enc {
		w, b := param(fmt.Sprintf("enc%d", i), &m.enc[i])
		in := h
		probe := tg.probe(g, dt, bs, m.enc[i].Out)
		if h, err = graph.DenseProbed(h, w, b, probe, reluIf(i < len(m.enc)-1)); err != nil {
			return nil, fmt.Errorf("encoder layer %d: %w", i, err)
		}
		tg.layerIn = append(tg.layerIn, in)
	}
	if tg.mu, err = graph.NuL1(h, m.cfg.L); err != nil {
		return nil, fmt.Errorf("ν: %w", err)
	}

	// b and log b: fixed values held in (non-trainable) input nodes, or
	// b = exp(ρ) with the parameter ρ = log b.
	var b, logb *G.Node
	if m.cfg.EpsPretrain > 0 {
		b = G.NewScalar(g, dt, G.WithName("b"), G.WithValue(scalarValue(float64(m.bTrain))))
		logb = G.NewScalar(g, dt, G.WithName("logb"), G.WithValue(scalarValue(math.Log(float64(m.bTrain)))))
	} else {
		tg.logb = G.NewScalar(g, dt, G.WithName("logb"), G.WithValue(scalarValue(math.Log(float64(m.bTrain)))))
		logb = tg.logb
		if b, err = G.Exp(tg.logb); err != nil {
			return nil, err
		}
	}

	// z = μ + b·ξ
	bxi, err := G.Mul(b, tg.xi)
	if err != nil {
		return nil, err
	}
	z, err := G.Add(tg.mu, bxi)
	if err != nil {
		return nil, err
	}
	a := z
	for i := range m.dec {
		w, bb := param(fmt.Sprintf("dec%d", i), &m.dec[i])
		in := a
		probe := tg.probe(g, dt, bs, m.dec[i].Out)
		if a, err = graph.DenseProbed(a, w, bb, probe, reluIf(i < len(m.dec)-1)); err != nil {
			return nil, fmt.Errorf("decoder layer %d: %w", i, err)
		}
		tg.layerIn = append(tg.layerIn, in)
	}
	tg.live = bs
	nll, nllConst, err := nllRows(m.cfg.Likelihood, tg.x, a, &tg.live)
	if err != nil {
		return nil, err
	}
	klRows, klConst, err := laplaceKLRows(tg.mu, b, logb, d)
	if err != nil {
		return nil, err
	}
	rows, err := G.Add(nll, klRows)
	if err != nil {
		return nil, err
	}
	loss, err := G.Mul(rows, tg.w) // Σ_r w_r·rows_r
	if err != nil {
		return nil, err
	}
	if loss, err = G.Add(loss, klConst); err != nil {
		return nil, err
	}
	if nllConst != 0 {
		if loss, err = G.Add(loss, graph.Scalar(dt, nllConst)); err != nil {
			return nil, err
		}
	}
	tg.loss = loss
	if tg.logb != nil {
		tg.params = append(tg.params, tg.logb)
	}
	if m.cfg.CDP != nil {
		// Only the pre-activations' gradients: the CDP step forms the clipped weight gradients
		// itself from them and the layers' inputs (cdp.go), so gorgonia need not compute the
		// unclipped ones.
		grads, err := G.Grad(loss, tg.probes...)
		if err != nil {
			return nil, fmt.Errorf("gradient: %w", err)
		}
		tg.zGrad = grads
		return tg, nil
	}
	if _, err := G.Grad(loss, tg.params...); err != nil {
		return nil, fmt.Errorf("gradient: %w", err)
	}
	return tg, nil
}

// copyWeights copies the parameter values of the graph into m.
func (tg *trainGraph) copyWeights(m *Model) error {
	for i, l := range m.layers() {
		w, err := graph.F32s(tg.params[2*i].Value())
		if err != nil {
			return err
		}
		b, err := graph.F32s(tg.params[2*i+1].Value())
		if err != nil {
			return err
		}
		if len(w) != len(l.W) || len(b) != len(l.B) {
			return fmt.Errorf("layer %d: graph has %d+%d values, model %d+%d", i, len(w), len(b), len(l.W), len(l.B))
		}
		copy(l.W, w)
		copy(l.B, b)
	}
	if tg.logb != nil {
		v, err := graph.F32s(tg.logb.Value())
		if err != nil {
			return err
		}
		m.bTrain = float32(math.Exp(float64(v[0])))
	}
	return nil
}

// reluIf is ReLU for hidden layers, identity for output layers.
func reluIf(hidden bool) graph.Activation {
	if hidden {
		return graph.ReLU
	}
	return graph.Identity
}

// probe returns a zero input node of shape (bs, out) for a layer's pre-activation when the model trains
// under CDP (its gradient is the loss's at the pre-activation), else nil.
func (tg *trainGraph) probe(g *G.ExprGraph, dt tensor.Dtype, bs, out int) *G.Node {
	if !tg.cdp {
		return nil
	}
	var backing any = make([]float64, bs*out)
	if dt == tensor.Float32 {
		buf := make([]float32, bs*out)
		tg.probeBufs = append(tg.probeBufs, buf)
		backing = buf
	}
	p := G.NewMatrix(g, dt, G.WithShape(bs, out), G.WithName(fmt.Sprintf("probe%d", len(tg.probes))),
		G.WithValue(tensor.New(tensor.WithShape(bs, out), tensor.WithBacking(backing))))
	tg.probes = append(tg.probes, p)
	return p
}
