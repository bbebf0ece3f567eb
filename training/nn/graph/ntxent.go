package graph

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// NTXent is SimCLR's normalised-temperature cross-entropy over N = 2B projections v (N×p): rows i and
// i + B are the two views of one example. With u_i = v_i/‖v_i‖ and s_ik = u_i·u_k/τ,
//
//	ℓ_i = −s_{i,p(i)} + log Σ_{k ≠ i} exp(s_ik),   loss = mean of ℓ_i over the anchors,
//
// p(i) the other view of i's example. This is the standard form (spec §6.2: the thesis's printed Eq 5.8
// lacks the exp in the denominator, the k ≠ i exclusion and τ). mask (N) marks the rows in use (1) and
// padding (0): padding rows are neither anchors nor negatives, so a short last batch trains like a
// smaller one. An anchor counts when it and its partner are in use. The gradient is exact (analytic);
// mask is not differentiated.
func NTXent(v, mask *G.Node, tau float64) (*G.Node, error) {
	s := v.Shape()
	if v.Dims() != 2 || s[0]%2 != 0 || s[0] < 2 || mask.Dims() != 1 || mask.Shape()[0] != s[0] {
		return nil, fmt.Errorf("nt-xent: projections %v must be a matrix of an even number of rows, mask %v one value per row", s, mask.Shape())
	}
	if !(tau > 0) || math.IsInf(tau, 0) {
		return nil, fmt.Errorf("nt-xent: temperature %v, want a positive number", tau)
	}
	return G.ApplyOp(ntxentOp{tau}, v, mask)
}

type ntxentOp struct{ tau float64 }

func (ntxentOp) Arity() int { return 2 }
func (ntxentOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(G.TensorType{Dims: 2, Of: a}, G.TensorType{Dims: 1, Of: a}, a)
}
func (ntxentOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return tensor.ScalarShape(), nil }
func (ntxentOp) ReturnsPtr() bool                               { return false }
func (ntxentOp) CallsExtern() bool                              { return false }
func (ntxentOp) OverwritesInput() int                           { return -1 }
func (op ntxentOp) WriteHash(h hash.Hash)                       { fmt.Fprintf(h, "graph.ntxent(%v)", op.tau) }
func (op ntxentOp) Hashcode() uint32                            { return OpHash(op) }
func (op ntxentOp) String() string                              { return fmt.Sprintf("graph.ntxent(τ=%g)", op.tau) }
func (ntxentOp) DiffWRT(int) []bool                             { return []bool{true, false} }

func (op ntxentOp) SymDiff(inputs G.Nodes, _, grad *G.Node) (G.Nodes, error) {
	gv, err := G.ApplyOp(ntxentGradOp(op), inputs[0], inputs[1], grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{gv, nil}, nil
}

func (op ntxentOp) Do(vals ...G.Value) (G.Value, error) {
	v, mask, err := ntxentInputs(vals[0], vals[1])
	if err != nil {
		return nil, err
	}
	loss, _ := ntxent(v.f64, mask, v.n, v.p, op.tau, 1)
	if v.dt == tensor.Float32 {
		return G.NewF32(float32(loss)), nil
	}
	return G.NewF64(loss), nil
}

// ntxentGradOp is ∂loss/∂v times the upstream (scalar) gradient.
type ntxentGradOp struct{ tau float64 }

func (ntxentGradOp) Arity() int { return 3 }
func (ntxentGradOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	mat := G.TensorType{Dims: 2, Of: a}
	return hm.NewFnType(mat, G.TensorType{Dims: 1, Of: a}, a, mat)
}
func (ntxentGradOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, ok := in[0].(tensor.Shape)
	if !ok {
		return nil, fmt.Errorf("nt-xent gradient: input shape %v", in[0])
	}
	return s.Clone(), nil
}
func (ntxentGradOp) ReturnsPtr() bool         { return false }
func (ntxentGradOp) CallsExtern() bool        { return false }
func (ntxentGradOp) OverwritesInput() int     { return -1 }
func (op ntxentGradOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "graph.ntxentGrad(%v)", op.tau) }
func (op ntxentGradOp) Hashcode() uint32      { return OpHash(op) }
func (op ntxentGradOp) String() string        { return fmt.Sprintf("graph.ntxentGrad(τ=%g)", op.tau) }
func (op ntxentGradOp) Do(vals ...G.Value) (G.Value, error) {
	v, mask, err := ntxentInputs(vals[0], vals[1])
	if err != nil {
		return nil, err
	}
	var g float64
	switch x := vals[2].(type) {
	case *G.F32:
		g = float64(*x)
	case *G.F64:
		g = float64(*x)
	default:
		return nil, fmt.Errorf("nt-xent gradient: upstream gradient is %T", vals[2])
	}
	_, grad := ntxent(v.f64, mask, v.n, v.p, op.tau, g)
	if v.dt == tensor.Float32 {
		out := make([]float32, len(grad))
		for i, x := range grad {
			out[i] = float32(x)
		}
		return tensor.New(tensor.WithShape(v.n, v.p), tensor.WithBacking(out)), nil
	}
	return tensor.New(tensor.WithShape(v.n, v.p), tensor.WithBacking(grad)), nil
}

// ntxentMatrix is an N×p matrix read as float64.
type ntxentMatrix struct {
	f64  []float64
	n, p int
	dt   tensor.Dtype
}

func ntxentInputs(x, m G.Value) (ntxentMatrix, []bool, error) {
	v, ok1 := x.(*tensor.Dense)
	mk, ok2 := m.(*tensor.Dense)
	if !ok1 || !ok2 || v.Dims() != 2 {
		return ntxentMatrix{}, nil, fmt.Errorf("nt-xent: values %T, %T, want a dense matrix and vector", x, m)
	}
	out := ntxentMatrix{n: v.Shape()[0], p: v.Shape()[1], dt: v.Dtype()}
	mask := make([]bool, out.n)
	switch d := v.Data().(type) {
	case []float32:
		out.f64 = make([]float64, len(d))
		for i, x := range d {
			out.f64[i] = float64(x)
		}
		for i, x := range mk.Data().([]float32) {
			mask[i] = x != 0
		}
	case []float64:
		out.f64 = d
		for i, x := range mk.Data().([]float64) {
			mask[i] = x != 0
		}
	default:
		return ntxentMatrix{}, nil, fmt.Errorf("nt-xent: dtype %v", v.Dtype())
	}
	return out, mask, nil
}

// ntxent returns the loss and g times its gradient with respect to v (n×p, row-major).
func ntxent(v []float64, mask []bool, n, p int, tau, g float64) (float64, []float64) {
	half := n / 2
	partner := func(i int) int { return (i + half) % n }
	// u_i = v_i/‖v_i‖ (a zero row stays zero: it has no direction, and its gradient is then 0).
	u, norm := make([]float64, n*p), make([]float64, n)
	for i := range n {
		s := 0.0
		for _, x := range v[i*p : (i+1)*p] {
			s += x * x
		}
		norm[i] = math.Sqrt(s)
		if norm[i] > 0 {
			for j := range p {
				u[i*p+j] = v[i*p+j] / norm[i]
			}
		}
	}
	sim := make([]float64, n*n)
	for i := range n {
		for k := i; k < n; k++ {
			s := 0.0
			for j := range p {
				s += u[i*p+j] * u[k*p+j]
			}
			sim[i*n+k], sim[k*n+i] = s/tau, s/tau
		}
	}
	anchors := 0
	for i := range n {
		if mask[i] && mask[partner(i)] {
			anchors++
		}
	}
	grad := make([]float64, n*p)
	if anchors == 0 {
		return 0, grad
	}
	// c[i][k] = ∂loss/∂s_ik from anchor i: (softmax_i(k) − [k = p(i)])/anchors.
	c := make([]float64, n*n)
	loss := 0.0
	for i := range n {
		if !mask[i] || !mask[partner(i)] {
			continue
		}
		m := math.Inf(-1)
		for k := range n {
			if k != i && mask[k] {
				m = max(m, sim[i*n+k])
			}
		}
		z := 0.0
		for k := range n {
			if k != i && mask[k] {
				z += math.Exp(sim[i*n+k] - m)
			}
		}
		loss += m + math.Log(z) - sim[i*n+partner(i)]
		for k := range n {
			if k != i && mask[k] {
				c[i*n+k] = math.Exp(sim[i*n+k]-m) / z / float64(anchors)
			}
		}
		c[i*n+partner(i)] -= 1 / float64(anchors)
	}
	// ∂loss/∂u_i = (1/τ) Σ_k (c_ik + c_ki) u_k; then through the normalisation:
	// ∂/∂v_i = (∂/∂u_i − (u_i·∂/∂u_i) u_i)/‖v_i‖.
	du := make([]float64, p)
	for i := range n {
		if norm[i] == 0 {
			continue
		}
		clear(du)
		for k := range n {
			w := (c[i*n+k] + c[k*n+i]) / tau
			if w == 0 {
				continue
			}
			for j := range p {
				du[j] += w * u[k*p+j]
			}
		}
		dot := 0.0
		for j := range p {
			dot += u[i*p+j] * du[j]
		}
		for j := range p {
			grad[i*p+j] = g * (du[j] - dot*u[i*p+j]) / norm[i]
		}
	}
	return loss / float64(anchors), grad
}
