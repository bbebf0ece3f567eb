package graph

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	G "gorgonia.org/gorgonia"
)

// Layer is a dense layer's parameters as a model stores them in its JSON artifact: out = act(in·W + B),
// W of In×Out values, row-major. Training builds graph nodes from it ([Layer.Nodes]) and copies the
// trained values back; inference runs it on the host ([Layer.Forward], [RunStack]).
type Layer struct {
	In  int        `json:"in"`
	Out int        `json:"out"`
	W   []float32  `json:"w"`
	B   []float32  `json:"b"`
	Act Activation `json:"act"`
}

// NewLayer returns an in→out layer with zero weights.
func NewLayer(in, out int, act Activation) Layer {
	return Layer{In: in, Out: out, W: make([]float32, in*out), B: make([]float32, out), Act: act}
}

// Init draws W uniformly (He for ReLU layers, Glorot otherwise) and zeroes B.
func (l *Layer) Init(r *rand.Rand) {
	lim := math.Sqrt(6 / float64(l.In+l.Out))
	if l.Act == ReLU {
		lim = math.Sqrt(6 / float64(l.In))
	}
	for i := range l.W {
		l.W[i] = float32((2*r.Float64() - 1) * lim)
	}
	clear(l.B)
}

// Forward applies the layer to one row, in float64.
func (l *Layer) Forward(x []float64) []float64 {
	y := make([]float64, l.Out)
	for o := range y {
		y[o] = float64(l.B[o])
	}
	for i, xi := range x {
		if xi == 0 {
			continue
		}
		w := l.W[i*l.Out : (i+1)*l.Out]
		for o := range y {
			y[o] += xi * float64(w[o])
		}
	}
	for o := range y {
		y[o] = l.Act.Apply(y[o])
	}
	return y
}

// Check reports whether the layer takes in inputs and holds finite weights of the shapes it declares.
func (l *Layer) Check(in int) error {
	if l.In != in || l.Out < 1 || len(l.W) != l.In*l.Out || len(l.B) != l.Out || !l.Act.Valid() {
		return fmt.Errorf("layer %d→%d (%s) with %d weights and %d biases does not take %d inputs", l.In, l.Out, l.Act, len(l.W), len(l.B), in)
	}
	for _, vs := range [][]float32{l.W, l.B} {
		for _, v := range vs {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return errors.New("non-finite weight")
			}
		}
	}
	return nil
}

// Nodes returns the layer's weight and bias as graph nodes named name.w and name.b, holding copies
// of its values (see [Matrix]).
func (l *Layer) Nodes(g *G.ExprGraph, name string) (w, b *G.Node) {
	return Matrix(g, name+".w", l.In, l.Out, l.W), Matrix(g, name+".b", 1, l.Out, l.B)
}

// RunStack applies layers in order to one row.
func RunStack(ls []Layer, x []float64) []float64 {
	for i := range ls {
		x = ls[i].Forward(x)
	}
	return x
}

// CheckStack checks that layers chain from in inputs and returns their output count.
func CheckStack(ls []Layer, in int) (int, error) {
	for i := range ls {
		if err := ls[i].Check(in); err != nil {
			return 0, fmt.Errorf("layer %d: %w", i+1, err)
		}
		in = ls[i].Out
	}
	return in, nil
}

// CloneLayers returns a deep copy.
func CloneLayers(ls []Layer) []Layer {
	out := make([]Layer, len(ls))
	for i, l := range ls {
		out[i] = Layer{In: l.In, Out: l.Out, W: slices.Clone(l.W), B: slices.Clone(l.B), Act: l.Act}
	}
	return out
}

// ForwardBatch applies layers to n rows (x row-major, n × layers[0].In) in float32 with one GEMM per
// layer (package sgemm's kernels through blas32, OpenBLAS under -tags openblas), and returns the n × Out outputs. A value that overflows float32
// comes out ±Inf or NaN: callers that need the exact value redo the row with [RunStack].
func ForwardBatch(ls []Layer, x []float32, n int) []float32 {
	return ForwardBatchInto(ls, x, n, nil)
}

// ForwardBatchInto is ForwardBatch writing layer i's n × Out outputs into buf(i, n·Out) (nil buf:
// new slices), so that a caller encoding chunk after chunk reuses its memory. Each layer is the GEMM
// x·W, then the bias added and the activation applied, row by row.
func ForwardBatchInto(ls []Layer, x []float32, n int, buf func(i, size int) []float32) []float32 {
	for i, l := range ls {
		var y []float32
		if buf != nil {
			y = buf(i, n*l.Out)
		} else {
			y = make([]float32, n*l.Out)
		}
		blas32.Gemm(blas.NoTrans, blas.NoTrans, 1,
			blas32.General{Rows: n, Cols: l.In, Stride: l.In, Data: x},
			blas32.General{Rows: l.In, Cols: l.Out, Stride: l.Out, Data: l.W},
			0, blas32.General{Rows: n, Cols: l.Out, Stride: l.Out, Data: y})
		for r := range n {
			yr := y[r*l.Out : (r+1)*l.Out : (r+1)*l.Out]
			b := l.B[:len(yr)]
			switch l.Act {
			case ReLU:
				for k, v := range yr {
					yr[k] = max(v+b[k], 0) // max(NaN, 0) is NaN: overflow stays visible
				}
			case Sigmoid:
				for k, v := range yr {
					yr[k] = float32(1 / (1 + math.Exp(-float64(v+b[k]))))
				}
			default:
				for k := range yr {
					yr[k] += b[k]
				}
			}
		}
		x = y
	}
	return x
}
