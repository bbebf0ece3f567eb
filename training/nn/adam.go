package nn

import "math"

// Float is a parameter or gradient element type.
type Float interface{ ~float32 | ~float64 }

// Adam is Adam (Kingma & Ba 2015) with bias correction, minimising: every step moves the parameters
// against the gradient. P is the parameters' element type and G the gradient's; the moments are kept in
// G. The update is w −= lr·m̂/(√v̂ + ε) with m̂ = m/(1−β₁ᵗ), v̂ = v/(1−β₂ᵗ), computed as
// w −= (lr·√c₂/c₁)·m/(√v + ε·√c₂) with c₁ = 1−β₁ᵗ, c₂ = 1−β₂ᵗ (one division fewer per element).
// Large parameter vectors are updated in parallel chunks; every element is updated on its own, so the
// result does not depend on the split.
type Adam[P, G Float] struct {
	// LR is the learning rate of the next step; a schedule may change it between steps.
	LR                float64
	Beta1, Beta2, Eps float64
	// ZeroGrad makes every step zero the gradient it read (for gradients that accumulate, as a
	// gorgonia tape machine's do).
	ZeroGrad bool

	t    int
	m, v []G
}

// NewAdam returns Adam for n parameters with β₁ = 0.9, β₂ = 0.999, ε = 1e-8.
func NewAdam[P, G Float](n int, lr float64) *Adam[P, G] {
	return &Adam[P, G]{LR: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, m: make([]G, n), v: make([]G, n)}
}

// Steps is the number of steps taken.
func (a *Adam[P, G]) Steps() int { return a.t }

// Step applies one update to params with grad, the gradient of the loss to minimise, laid out alike.
// It panics if their lengths differ from the optimiser's.
func (a *Adam[P, G]) Step(params []P, grad []G) {
	a.StepSegments([][]P{params}, [][]G{grad})
}

// adamChunk is the length of the parallel chunks of a large update.
const adamChunk = 1 << 15

// StepSegments is Step for parameters held in several slices (a graph's parameter tensors), in a fixed
// order: segment i of params and of grads have the same length, and the segments together are the
// optimiser's n parameters, end to end.
func (a *Adam[P, G]) StepSegments(params [][]P, grads [][]G) {
	a.t++
	c1 := 1 - math.Pow(a.Beta1, float64(a.t))
	c2 := 1 - math.Pow(a.Beta2, float64(a.t))
	k := adamKernel[P, G]{
		step: G(a.LR * math.Sqrt(c2) / c1), eps: G(a.Eps * math.Sqrt(c2)),
		b1: G(a.Beta1), b2: G(a.Beta2), zero: a.ZeroGrad,
	}
	type chunk struct {
		w    []P
		g    []G
		m, v []G
	}
	var chunks []chunk
	off := 0
	for i, w := range params {
		g := grads[i]
		if len(g) != len(w) {
			panic("nn: Adam: a gradient segment's length differs from its parameters'")
		}
		for lo := 0; lo < len(w); lo += adamChunk {
			hi := min(lo+adamChunk, len(w))
			chunks = append(chunks, chunk{w[lo:hi], g[lo:hi], a.m[off+lo : off+hi], a.v[off+lo : off+hi]})
		}
		off += len(w)
	}
	if off != len(a.m) {
		panic("nn: Adam: the parameters' length differs from the optimiser's")
	}
	ParallelTasks(Workers(), len(chunks), func(_, i int) {
		c := chunks[i]
		k.update(c.w, c.g, c.m, c.v)
	})
}

// adamKernel is one step's constants.
type adamKernel[P, G Float] struct {
	step, eps, b1, b2 G
	zero              bool
}

func (k adamKernel[P, G]) update(w []P, g, m, v []G) {
	m, v = m[:len(w)], v[:len(w)]
	for i := range w {
		gi := g[i]
		mi := k.b1*m[i] + (1-k.b1)*gi
		vi := k.b2*v[i] + (1-k.b2)*gi*gi
		m[i], v[i] = mi, vi
		w[i] -= P(k.step * mi / (G(math.Sqrt(float64(vi))) + k.eps))
	}
	if k.zero {
		clear(g)
	}
}
