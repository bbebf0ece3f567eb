// Package graph holds the gorgonia building blocks that the models trained through a gorgonia graph
// share (the VLM, the task-aware encoders): dense layers, parameters as float32 tensors, one lock
// around graph building and compiling, and the value/gradient views that nn.Adam steps in place.
package graph

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Activation is what a dense layer applies after x·W + b.
type Activation string

const (
	Identity Activation = "identity"
	ReLU     Activation = "relu"
	Sigmoid  Activation = "sigmoid"
)

// Valid reports whether a is one of the activations Dense knows.
func (a Activation) Valid() bool { return a == Identity || a == ReLU || a == Sigmoid }

// Apply is a's scalar function, for forward passes outside a graph.
func (a Activation) Apply(v float64) float64 {
	switch a {
	case ReLU:
		return max(v, 0)
	case Sigmoid:
		return 1 / (1 + math.Exp(-v))
	}
	return v
}

// Dense applies x·W + b (x of shape (B, in), W (in, out), b (1, out)), then act.
func Dense(x, w, b *G.Node, act Activation) (*G.Node, error) {
	return DenseProbed(x, w, b, nil, act)
}

// DenseProbed is Dense with probe, an input node of shape (B, out) held at zero, added to the
// pre-activation z = x·W + b: gorgonia differentiates only with respect to input nodes, and the
// gradient with respect to the probe is the loss's gradient at z. With x, it gives each row's gradient
// of W and b in closed form, of norm² (‖x_r‖² + 1)·‖∂ℓ_r/∂z_r‖² (per-example clipping without
// per-example backward passes). A nil probe is Dense.
func DenseProbed(x, w, b, probe *G.Node, act Activation) (*G.Node, error) {
	z, err := G.Mul(x, w)
	if err != nil {
		return nil, err
	}
	if z, err = G.BroadcastAdd(z, b, nil, []byte{0}); err != nil {
		return nil, err
	}
	if probe != nil {
		if z, err = G.Add(z, probe); err != nil {
			return nil, err
		}
	}
	return activate(z, act)
}

func activate(h *G.Node, act Activation) (*G.Node, error) {
	switch act {
	case ReLU:
		return G.Rectify(h)
	case Sigmoid:
		return G.Sigmoid(h)
	case Identity:
		return h, nil
	}
	return nil, fmt.Errorf("activation %q", act)
}

// Matrix returns a float32 matrix node of shape (rows, cols) holding a copy of values (row-major):
// the caller's slice never shares memory with gorgonia, which pools tensors.
func Matrix(g *G.ExprGraph, name string, rows, cols int, values []float32) *G.Node {
	return G.NewMatrix(g, tensor.Float32, G.WithShape(rows, cols), G.WithName(name),
		G.WithValue(tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(slices.Clone(values)))))
}

// mu serialises building and compiling gorgonia graphs: gorgonia v0.9.18 keeps unsynchronised
// package-level state there (op groups, shared constant nodes), which concurrent training runs — of
// any model — would race on. Running compiled machines concurrently is safe.
var mu sync.Mutex

// Compile builds a graph with build (under the lock every model shares) and returns its tape machine,
// with dual values bound for the parameters build returns (the nodes gradients are taken for).
func Compile(build func() (*G.ExprGraph, []*G.Node, error)) (vm G.VM, err error) {
	mu.Lock()
	defer mu.Unlock()
	defer func() {
		if r := recover(); r != nil { // NewTapeMachine panics on compile errors
			err = fmt.Errorf("%v", r)
		}
	}()
	g, params, err := build()
	if err != nil {
		return nil, err
	}
	return G.NewTapeMachine(g, G.BindDualValues(params...)), nil
}

// F32s returns the backing float32 slice of a dense tensor or a scalar.
func F32s(v G.Value) ([]float32, error) {
	switch v := v.(type) {
	case *tensor.Dense:
		d, ok := v.Data().([]float32)
		if !ok {
			return nil, fmt.Errorf("dtype %v, want float32", v.Dtype())
		}
		return d, nil
	case *G.F32:
		return unsafe.Slice((*float32)(v), 1), nil
	}
	return nil, fmt.Errorf("unsupported value type %T", v)
}

// WeightsGrads returns the current value and gradient slices of parameter p, views into the machine's
// tensors: look them up after every run, as the machine owns them.
func WeightsGrads(p *G.Node) (w, g []float32, err error) {
	if w, err = F32s(p.Value()); err != nil {
		return nil, nil, fmt.Errorf("parameter %s: %w", p.Name(), err)
	}
	gv, err := p.Grad()
	if err != nil {
		return nil, nil, fmt.Errorf("parameter %s has no gradient: %w", p.Name(), err)
	}
	if g, err = F32s(gv); err != nil {
		return nil, nil, fmt.Errorf("gradient of %s: %w", p.Name(), err)
	}
	if len(g) != len(w) {
		return nil, nil, fmt.Errorf("gradient of %s has %d values, want %d", p.Name(), len(g), len(w))
	}
	return w, g, nil
}

// Scalar returns a constant of dtype dt (Float32 or Float64).
func Scalar(dt tensor.Dtype, v float64) *G.Node {
	if dt == tensor.Float32 {
		return G.NewConstant(float32(v))
	}
	return G.NewConstant(v)
}

// NuL1 is the recipe's output constraint ν(h) = h / max(1, ‖h‖₁/l) row-wise for h of shape (B, D),
// written max(1, t) = 1 + relu(t − 1) so that it is differentiable
// everywhere except on the boundary ‖h‖₁ = l (where gorgonia's relu takes the
// inner side's gradient, relu'(0) = 1 — ReLU is x·[x ≥ 0]) and at coordinates
// hᵢ = 0 (where |·|' = sign(0) = 0). At h = 0 it is the identity, with the
// identity's gradient.
func NuL1(h *G.Node, l float64) (*G.Node, error) {
	dt := h.Dtype()
	abs, err := G.Abs(h)
	if err != nil {
		return nil, err
	}
	n, err := G.Sum(abs, 1) // (B)
	if err != nil {
		return nil, err
	}
	t, err := G.Mul(n, Scalar(dt, 1/l))
	if err != nil {
		return nil, err
	}
	one := Scalar(dt, 1)
	if t, err = G.Sub(t, one); err != nil {
		return nil, err
	}
	if t, err = G.Rectify(t); err != nil {
		return nil, err
	}
	s, err := G.Add(t, one)
	if err != nil {
		return nil, err
	}
	return G.BroadcastHadamardDiv(h, s, nil, []byte{1})
}

// Run runs vm once and returns the scalar loss node's value and every parameter's value and gradient
// views (WeightsGrads; looked up after every run, as the machine owns its tensors). A failed run resets
// the machine. The caller steps its optimiser on the views and then resets vm (and zeroes the
// gradients, which the machine accumulates into, unless the optimiser does: nn.Adam.ZeroGrad).
func Run(vm G.VM, loss *G.Node, params []*G.Node) (float64, [][]float32, [][]float32, error) {
	if err := vm.RunAll(); err != nil {
		vm.Reset()
		return 0, nil, nil, err
	}
	ws, gs := make([][]float32, len(params)), make([][]float32, len(params))
	for i, p := range params {
		var err error
		if ws[i], gs[i], err = WeightsGrads(p); err != nil {
			return 0, nil, nil, err
		}
	}
	l, err := F32s(loss.Value())
	if err != nil {
		return 0, nil, nil, fmt.Errorf("loss: %w", err)
	}
	return float64(l[0]), ws, gs, nil
}
