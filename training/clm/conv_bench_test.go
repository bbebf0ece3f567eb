package clm

import (
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// BenchmarkEncoderStep times one forward and backward pass of a CLM training step's encoder over 256
// views of 28×28 images (2 × the default batch of 128), for the encoder the CLM uses, an MLP
// (784→512→256→32, ReLU), against a small convolutional one through gorgonia's Conv2d and MaxPool2D
// (conv 3×3 1→16, pool 2, conv 3×3 16→32, pool 2, dense 1568→256→32, ReLU). #14 asks for a
// convolutional encoder "if it trains in reasonable time on two cores": the ratio of the two, times
// the CLM's measured epoch (BenchmarkEpoch45k), estimates a convolutional CLM's epoch.
//
//	go test -tags openblas -run XXX -bench EncoderStep -benchtime 20x ./training/clm/
func BenchmarkEncoderStep(b *testing.B) {
	for _, c := range []struct {
		name  string
		build func(g *G.ExprGraph, x *G.Node) (*G.Node, []*G.Node)
	}{
		{"mlp", mlpEncoder},
		{"conv", convEncoder},
	} {
		b.Run(c.name, func(b *testing.B) {
			const batch = 256
			g := G.NewGraph()
			x := G.NewTensor(g, tensor.Float32, 4, G.WithShape(batch, 1, 28, 28), G.WithName("x"))
			out, params := c.build(g, x)
			loss := G.Must(G.Mean(G.Must(G.Square(out))))
			if _, err := G.Grad(loss, params...); err != nil {
				b.Fatal(err)
			}
			vm := G.NewTapeMachine(g, G.BindDualValues(params...))
			defer vm.Close()
			r := rand.New(rand.NewPCG(1, 2))
			data := make([]float32, batch*28*28)
			for i := range data {
				data[i] = r.Float32()
			}
			if err := G.Let(x, tensor.New(tensor.WithShape(batch, 1, 28, 28), tensor.WithBacking(data))); err != nil {
				b.Fatal(err)
			}
			var weights int
			for _, p := range params {
				weights += p.Shape().TotalSize()
			}
			b.ResetTimer()
			for range b.N {
				if err := vm.RunAll(); err != nil {
					b.Fatal(err)
				}
				vm.Reset()
			}
			b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/step")
			b.ReportMetric(float64(weights), "weights")
		})
	}
}

func param(g *G.ExprGraph, name string, shape ...int) *G.Node {
	return G.NewTensor(g, tensor.Float32, len(shape), G.WithShape(shape...), G.WithName(name), G.WithInit(G.GlorotU(1)))
}

func dense(g *G.ExprGraph, name string, x *G.Node, in, out int, relu bool) (*G.Node, []*G.Node) {
	w := param(g, name+".w", in, out)
	bias := G.NewMatrix(g, tensor.Float32, G.WithShape(1, out), G.WithName(name+".b"), G.WithInit(G.Zeroes()))
	h := G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w)), bias, nil, []byte{0}))
	if relu {
		h = G.Must(G.Rectify(h))
	}
	return h, []*G.Node{w, bias}
}

func mlpEncoder(g *G.ExprGraph, x *G.Node) (*G.Node, []*G.Node) {
	h := G.Must(G.Reshape(x, tensor.Shape{x.Shape()[0], 784}))
	var params []*G.Node
	for i, l := range []struct {
		in, out int
		relu    bool
	}{{784, 512, true}, {512, 256, true}, {256, 32, false}} {
		var ps []*G.Node
		h, ps = dense(g, "mlp"+string(rune('0'+i)), h, l.in, l.out, l.relu)
		params = append(params, ps...)
	}
	return h, params
}

func convEncoder(g *G.ExprGraph, x *G.Node) (*G.Node, []*G.Node) {
	f1 := param(g, "conv1", 16, 1, 3, 3)
	f2 := param(g, "conv2", 32, 16, 3, 3)
	h := G.Must(G.Conv2d(x, f1, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
	h = G.Must(G.MaxPool2D(G.Must(G.Rectify(h)), tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
	h = G.Must(G.Conv2d(h, f2, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
	h = G.Must(G.MaxPool2D(G.Must(G.Rectify(h)), tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
	h = G.Must(G.Reshape(h, tensor.Shape{x.Shape()[0], 32 * 7 * 7}))
	params := []*G.Node{f1, f2}
	h, ps := dense(g, "d0", h, 32*7*7, 256, true)
	params = append(params, ps...)
	h, ps = dense(g, "d1", h, 256, 32, false)
	return h, append(params, ps...)
}
