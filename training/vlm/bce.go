package vlm

import (
	"fmt"
	"hash"
	"math"
	"runtime"
	"sync"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ldpsql/ldpsql/training/nn/graph"
)

// bceRows is the Bernoulli negative log-likelihood of targets x under logits
// a (both (B, n)), summed over each row: Σ_f softplus(a) − x·a, shape (B).
// It is one fused gorgonia op (the element-wise softplus, product, difference
// and sum as separate ops cost about a quarter of a training step, mostly in
// exp and log1p): per element it evaluates e = exp(−|a|) once, giving
// softplus(a) = max(a, 0) + log1p(e) and σ(a) = 1/(1+e) or e/(1+e), and keeps
// σ(a) for the gradient op, ∂/∂a = (σ(a) − x)·g_row. x is not differentiated.
func bceRows(a, x *G.Node) (*G.Node, error) {
	if !a.Shape().Eq(x.Shape()) || a.Dims() != 2 {
		return nil, fmt.Errorf("bce: logits %v and targets %v must be matrices of one shape", a.Shape(), x.Shape())
	}
	return G.ApplyOp(&bceOp{cache: new(bceCache)}, a, x)
}

// bceCache carries σ(a) from the forward op to the gradient op of one
// graph; valid is cleared when the gradient op has used it (the gradient op
// recomputes σ(a) should it ever run without a fresh forward pass).
type bceCache struct {
	sig32 []float32
	sig64 []float64
	valid bool
	// live, when not nil, says that only the first *live rows are real: the others are padding whose
	// row sums the loss multiplies by a weight of 0 (trainGraph.live), so the forward op writes 0 for
	// them and the gradient op, whose upstream gradient there is w_r = 0, writes 0 without evaluating
	// the exponentials: the same loss and gradients as computing them.
	live *int
}

// liveRows is how many leading rows of rows the ops must compute.
func (c *bceCache) liveRows(rows int) int {
	if c.live == nil {
		return rows
	}
	return max(0, min(rows, *c.live))
}

type bceOp struct{ cache *bceCache }

func (op *bceOp) Arity() int { return 2 }
func (op *bceOp) Type() hm.Type {
	t := hm.TypeVariable('a')
	mat := G.TensorType{Dims: 2, Of: t}
	return hm.NewFnType(mat, mat, G.TensorType{Dims: 1, Of: t})
}
func (op *bceOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, ok := in[0].(tensor.Shape)
	if !ok || len(s) != 2 {
		return nil, fmt.Errorf("bce: input shape %v, want a matrix", in[0])
	}
	return tensor.Shape{s[0]}, nil
}
func (op *bceOp) ReturnsPtr() bool      { return false }
func (op *bceOp) CallsExtern() bool     { return false }
func (op *bceOp) OverwritesInput() int  { return -1 }
func (op *bceOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "vlm.bce(%p)", op.cache) }
func (op *bceOp) Hashcode() uint32      { return graph.OpHash(op) }
func (op *bceOp) String() string        { return "vlm.bce" }
func (op *bceOp) DiffWRT(int) []bool    { return []bool{true, false} }

func (op *bceOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	ga, err := G.ApplyOp(&bceGradOp{cache: op.cache}, inputs[0], inputs[1], grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{ga, nil}, nil
}

func (op *bceOp) Do(vals ...G.Value) (G.Value, error) {
	a, ok := vals[0].(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("bce: logits are %T", vals[0])
	}
	out := tensor.New(tensor.Of(a.Dtype()), tensor.WithShape(a.Shape()[0]))
	return op.UsePreallocDo(out, vals...)
}

func (op *bceOp) UsePreallocDo(prealloc G.Value, vals ...G.Value) (G.Value, error) {
	a, x, out, err := graph.Denses("bce", vals[0], vals[1], prealloc)
	if err != nil {
		return nil, err
	}
	rows, cols := a.Shape()[0], a.Shape()[1]
	switch ad := a.Data().(type) {
	case []float32:
		xd, od := x.Data().([]float32), out.Data().([]float32)
		op.cache.sig32 = grow(op.cache.sig32, len(ad))
		sig := op.cache.sig32
		live := op.cache.liveRows(rows)
		clear(od[live:])
		parallelRows(live, cols, func(r0, r1 int) {
			for r := r0; r < r1; r++ {
				var s float64
				for k := r * cols; k < (r+1)*cols; k++ {
					v := float64(ad[k])
					sp, sg := softplusSigmoid(v)
					s += sp - float64(xd[k])*v
					sig[k] = float32(sg)
				}
				od[r] = float32(s)
			}
		})
	case []float64:
		xd, od := x.Data().([]float64), out.Data().([]float64)
		op.cache.sig64 = grow(op.cache.sig64, len(ad))
		sig := op.cache.sig64
		live := op.cache.liveRows(rows)
		clear(od[live:])
		for r := range live {
			var s float64
			for k := r * cols; k < (r+1)*cols; k++ {
				sp, sg := softplusSigmoid(ad[k])
				s += sp - xd[k]*ad[k]
				sig[k] = sg
			}
			od[r] = s
		}
	default:
		return nil, fmt.Errorf("bce: dtype %v", a.Dtype())
	}
	op.cache.valid = true
	return out, nil
}

// softplusSigmoid returns log(1 + eᵛ) and 1/(1 + e⁻ᵛ) from one exponential,
// without overflow for any v, to about 1e-9 relative: far below the float32
// rounding of the training graph, and 3–4× faster than math.Exp and
// math.Log1p (this is the inner loop of the Bernoulli likelihood).
func softplusSigmoid(v float64) (sp, sig float64) {
	e := expNonPos(-math.Abs(v)) // in [0, 1]
	l1p := log1pUnit(e)
	if v >= 0 {
		return v + l1p, 1 / (1 + e)
	}
	return l1p, e / (1 + e)
}

// expNonPos is eˣ for x ≤ 0 (0 below −708), to 3e-10 relative: x = k·ln2 + r
// with |r| ≤ ln2/2 (Cody–Waite two-part ln2), eʳ by its degree-8 Taylor
// polynomial (truncation ≤ (ln2/2)⁹/9! < 2.1e-10) evaluated by Estrin's scheme
// (short dependency chains), times 2ᵏ built from the exponent bits.
func expNonPos(x float64) float64 {
	if x < -708 {
		return 0
	}
	const (
		log2e = 1.44269504088896338700e+00
		ln2Hi = 6.93147180369123816490e-01
		ln2Lo = 1.90821492927058770002e-10
	)
	k := math.Floor(x*log2e + 0.5)
	r := (x - k*ln2Hi) - k*ln2Lo
	r2 := r * r
	r4 := r2 * r2
	p := (1 + r) + r2*(1.0/2+r*(1.0/6)) +
		r4*((1.0/24+r*(1.0/120))+r2*(1.0/720+r*(1.0/5040))) +
		r4*r4*(1.0/40320)
	return p * math.Float64frombits(uint64(int64(k)+1023)<<52)
}

// log1pUnit is log(1+e) for e in [0, 1], to 2e-10 relative, as 2·atanh(s)
// with s = e/(2+e) in [0, 1/3]: 2s·Σ_{j≤8} s²ʲ/(2j+1) (truncation ≤
// (1/9)⁹/19 < 1.4e-10), by Estrin's scheme.
func log1pUnit(e float64) float64 {
	s := e / (2 + e)
	q := s * s
	q2 := q * q
	q4 := q2 * q2
	t := (1 + q*(1.0/3)) + q2*(1.0/5+q*(1.0/7)) +
		q4*((1.0/9+q*(1.0/11))+q2*(1.0/13+q*(1.0/15))) +
		q4*q4*(1.0/17)
	return 2 * s * t
}

// parallelRows runs f over [0, rows) split into GOMAXPROCS contiguous
// ranges in parallel when there are at least 1<<14 elements (each row's
// result is computed by one goroutine, in order: the split does not change
// it).
func parallelRows(rows, cols int, f func(r0, r1 int)) {
	parts := min(runtime.GOMAXPROCS(0), rows)
	if parts < 2 || rows*cols < 1<<14 {
		f(0, rows)
		return
	}
	var wg sync.WaitGroup
	for p := range parts {
		r0, r1 := p*rows/parts, (p+1)*rows/parts
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(r0, r1)
		}()
	}
	wg.Wait()
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// bceGradOp is ∂bce/∂a given the upstream gradient g (B): (σ(a) − x)·g_row.
type bceGradOp struct{ cache *bceCache }

func (op *bceGradOp) Arity() int { return 3 }
func (op *bceGradOp) Type() hm.Type {
	t := hm.TypeVariable('a')
	mat := G.TensorType{Dims: 2, Of: t}
	return hm.NewFnType(mat, mat, G.TensorType{Dims: 1, Of: t}, mat)
}
func (op *bceGradOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, ok := in[0].(tensor.Shape)
	if !ok || len(s) != 2 {
		return nil, fmt.Errorf("bce grad: input shape %v, want a matrix", in[0])
	}
	return s.Clone(), nil
}
func (op *bceGradOp) ReturnsPtr() bool      { return false }
func (op *bceGradOp) CallsExtern() bool     { return false }
func (op *bceGradOp) OverwritesInput() int  { return -1 }
func (op *bceGradOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "vlm.bceGrad(%p)", op.cache) }
func (op *bceGradOp) Hashcode() uint32      { return graph.OpHash(op) }
func (op *bceGradOp) String() string        { return "vlm.bceGrad" }

func (op *bceGradOp) Do(vals ...G.Value) (G.Value, error) {
	a, ok := vals[0].(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("bce grad: logits are %T", vals[0])
	}
	out := tensor.New(tensor.Of(a.Dtype()), tensor.WithShape(a.Shape().Clone()...))
	return op.UsePreallocDo(out, vals...)
}

func (op *bceGradOp) UsePreallocDo(prealloc G.Value, vals ...G.Value) (G.Value, error) {
	a, x, out, err := graph.Denses("bce", vals[0], vals[1], prealloc)
	if err != nil {
		return nil, err
	}
	rows, cols := a.Shape()[0], a.Shape()[1]
	fresh := op.cache.valid
	op.cache.valid = false
	live := op.cache.liveRows(rows)
	switch ad := a.Data().(type) {
	case []float32:
		xd, od := x.Data().([]float32), out.Data().([]float32)
		g, err := gradRow32(vals[2], rows)
		if err != nil {
			return nil, err
		}
		sig := op.cache.sig32
		if !fresh || len(sig) != len(ad) {
			sig = make([]float32, len(ad))
			for k, v := range ad {
				_, s := softplusSigmoid(float64(v))
				sig[k] = float32(s)
			}
		}
		for r := range live {
			gr := g[r]
			for k := r * cols; k < (r+1)*cols; k++ {
				od[k] = (sig[k] - xd[k]) * gr
			}
		}
		clear(od[live*cols:])
	case []float64:
		xd, od := x.Data().([]float64), out.Data().([]float64)
		gv, ok := vals[2].(*tensor.Dense)
		if !ok || gv.Shape().TotalSize() != rows {
			return nil, fmt.Errorf("bce grad: upstream gradient %v", vals[2])
		}
		g := gv.Data().([]float64)
		sig := op.cache.sig64
		if !fresh || len(sig) != len(ad) {
			sig = make([]float64, len(ad))
			for k, v := range ad {
				_, sig[k] = softplusSigmoid(v)
			}
		}
		for r := range live {
			for k := r * cols; k < (r+1)*cols; k++ {
				od[k] = (sig[k] - xd[k]) * g[r]
			}
		}
		clear(od[live*cols:])
	default:
		return nil, fmt.Errorf("bce grad: dtype %v", a.Dtype())
	}
	return out, nil
}

func gradRow32(v G.Value, rows int) ([]float32, error) {
	gv, ok := v.(*tensor.Dense)
	if !ok || gv.Shape().TotalSize() != rows {
		return nil, fmt.Errorf("bce grad: upstream gradient %v", v)
	}
	g, ok := gv.Data().([]float32)
	if !ok {
		return nil, fmt.Errorf("bce grad: upstream gradient dtype %v", gv.Dtype())
	}
	return g, nil
}
