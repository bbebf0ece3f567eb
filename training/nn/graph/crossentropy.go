package graph

import (
	"fmt"
	"hash"
	"hash/fnv"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// CrossEntropyRows is the softmax cross-entropy of logits a against targets t (both (B, K)), one value
// per row (shape (B)): ℓ_r = Σ_k t_rk·(logsumexp(a_r) − a_rk), evaluated stably (the row's maximum
// subtracted before exp), with gradient ∂ℓ_r/∂a_rk = softmax(a_r)_k·Σ_j t_rj − t_rk (for one-hot
// targets, −log softmax at the label and softmax − t; a row of zero targets, padding, has loss and
// gradient 0). t is not differentiated. It replaces gorgonia's LogSoftMax, whose float kernels (gorgonia.org/tensor v0.9.23,
// softMaxLastDimF32) start every row's maximum at the first row's first element, so a row whose logits
// lie far below it underflows to log 0 and the loss turns NaN.
func CrossEntropyRows(a, t *G.Node) (*G.Node, error) {
	if !a.Shape().Eq(t.Shape()) || a.Dims() != 2 {
		return nil, fmt.Errorf("cross-entropy: logits %v and targets %v must be matrices of one shape", a.Shape(), t.Shape())
	}
	return G.ApplyOp(ceOp{}, a, t)
}

type ceOp struct{}

func (ceOp) Arity() int { return 2 }
func (ceOp) Type() hm.Type {
	v := hm.TypeVariable('a')
	mat := G.TensorType{Dims: 2, Of: v}
	return hm.NewFnType(mat, mat, G.TensorType{Dims: 1, Of: v})
}
func (ceOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, ok := in[0].(tensor.Shape)
	if !ok || len(s) != 2 {
		return nil, fmt.Errorf("cross-entropy: input shape %v, want a matrix", in[0])
	}
	return tensor.Shape{s[0]}, nil
}
func (ceOp) ReturnsPtr() bool          { return false }
func (ceOp) CallsExtern() bool         { return false }
func (ceOp) OverwritesInput() int      { return -1 }
func (ceOp) WriteHash(h hash.Hash)     { fmt.Fprint(h, "graph.crossEntropyRows") }
func (op ceOp) Hashcode() uint32       { return OpHash(op) }
func (ceOp) String() string            { return "graph.crossEntropyRows" }
func (ceOp) DiffWRT(int) []bool        { return []bool{true, false} }
func (ceGradOp) WriteHash(h hash.Hash) { fmt.Fprint(h, "graph.crossEntropyRowsGrad") }
func (op ceGradOp) Hashcode() uint32   { return OpHash(op) }

// OpHash is a custom op's Hashcode: the FNV-1a hash of what it writes with WriteHash.
func OpHash(op interface{ WriteHash(hash.Hash) }) uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}

func (ceOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	ga, err := G.ApplyOp(ceGradOp{}, inputs[0], inputs[1], grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{ga, nil}, nil
}

func (op ceOp) Do(vals ...G.Value) (G.Value, error) {
	a, ok := vals[0].(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("cross-entropy: logits are %T", vals[0])
	}
	return op.UsePreallocDo(tensor.New(tensor.Of(a.Dtype()), tensor.WithShape(a.Shape()[0])), vals...)
}

func (ceOp) UsePreallocDo(prealloc G.Value, vals ...G.Value) (G.Value, error) {
	a, t, out, err := Denses("cross-entropy", vals[0], vals[1], prealloc)
	if err != nil {
		return nil, err
	}
	rows, k := a.Shape()[0], a.Shape()[1]
	switch ad := a.Data().(type) {
	case []float32:
		td, od := t.Data().([]float32), out.Data().([]float32)
		for r := range rows {
			lse, dot, ts := rowCE(k, func(j int) float64 { return float64(ad[r*k+j]) }, func(j int) float64 { return float64(td[r*k+j]) })
			od[r] = float32(ts*lse - dot)
		}
	case []float64:
		td, od := t.Data().([]float64), out.Data().([]float64)
		for r := range rows {
			lse, dot, ts := rowCE(k, func(j int) float64 { return ad[r*k+j] }, func(j int) float64 { return td[r*k+j] })
			od[r] = ts*lse - dot
		}
	default:
		return nil, fmt.Errorf("cross-entropy: dtype %v", a.Dtype())
	}
	return out, nil
}

// rowCE returns logsumexp of a row, Σ t·a and Σ t.
func rowCE(k int, a, t func(int) float64) (lse, dot, tsum float64) {
	m := math.Inf(-1)
	for j := range k {
		m = max(m, a(j))
	}
	s := 0.0
	for j := range k {
		s += math.Exp(a(j) - m)
		dot += t(j) * a(j)
		tsum += t(j)
	}
	return m + math.Log(s), dot, tsum
}

// ceGradOp is ∂/∂a of CrossEntropyRows given the upstream gradient g (B): g_r·(softmax(a_r)·Σt_r − t_r).
type ceGradOp struct{}

func (ceGradOp) Arity() int { return 3 }
func (ceGradOp) Type() hm.Type {
	v := hm.TypeVariable('a')
	mat := G.TensorType{Dims: 2, Of: v}
	return hm.NewFnType(mat, mat, G.TensorType{Dims: 1, Of: v}, mat)
}
func (ceGradOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, ok := in[0].(tensor.Shape)
	if !ok {
		return nil, fmt.Errorf("cross-entropy gradient: input shape %v", in[0])
	}
	return s.Clone(), nil
}
func (ceGradOp) ReturnsPtr() bool     { return false }
func (ceGradOp) CallsExtern() bool    { return false }
func (ceGradOp) OverwritesInput() int { return -1 }
func (ceGradOp) String() string       { return "graph.crossEntropyRowsGrad" }

func (op ceGradOp) Do(vals ...G.Value) (G.Value, error) {
	a, ok := vals[0].(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("cross-entropy gradient: logits are %T", vals[0])
	}
	return op.UsePreallocDo(tensor.New(tensor.Of(a.Dtype()), tensor.WithShape(a.Shape().Clone()...)), vals...)
}

func (ceGradOp) UsePreallocDo(prealloc G.Value, vals ...G.Value) (G.Value, error) {
	a, t, out, err := Denses("cross-entropy", vals[0], vals[1], prealloc)
	if err != nil {
		return nil, err
	}
	g, ok := vals[2].(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("cross-entropy gradient: upstream gradient is %T", vals[2])
	}
	rows, k := a.Shape()[0], a.Shape()[1]
	switch ad := a.Data().(type) {
	case []float32:
		td, od, gd := t.Data().([]float32), out.Data().([]float32), g.Data().([]float32)
		for r := range rows {
			av := func(j int) float64 { return float64(ad[r*k+j]) }
			lse, _, ts := rowCE(k, av, func(j int) float64 { return float64(td[r*k+j]) })
			for j := range k {
				od[r*k+j] = float32(float64(gd[r]) * (math.Exp(av(j)-lse)*ts - float64(td[r*k+j])))
			}
		}
	case []float64:
		td, od, gd := t.Data().([]float64), out.Data().([]float64), g.Data().([]float64)
		for r := range rows {
			av := func(j int) float64 { return ad[r*k+j] }
			lse, _, ts := rowCE(k, av, func(j int) float64 { return td[r*k+j] })
			for j := range k {
				od[r*k+j] = gd[r] * (math.Exp(av(j)-lse)*ts - td[r*k+j])
			}
		}
	default:
		return nil, fmt.Errorf("cross-entropy gradient: dtype %v", a.Dtype())
	}
	return out, nil
}

// Denses returns a custom op's three values as dense tensors of one dtype, or an error naming the op.
func Denses(op string, x, y, z G.Value) (a, b, c *tensor.Dense, err error) {
	var ok [3]bool
	a, ok[0] = x.(*tensor.Dense)
	b, ok[1] = y.(*tensor.Dense)
	c, ok[2] = z.(*tensor.Dense)
	if !ok[0] || !ok[1] || !ok[2] {
		return nil, nil, nil, fmt.Errorf("%s: values %T, %T, %T, want dense tensors", op, x, y, z)
	}
	if a.Dtype() != b.Dtype() || a.Dtype() != c.Dtype() {
		return nil, nil, nil, fmt.Errorf("%s: dtypes %v, %v, %v differ", op, a.Dtype(), b.Dtype(), c.Dtype())
	}
	return a, b, c, nil
}
