package vlm

import (
	"fmt"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"

	"github.com/ldpsql/ldpsql/training/nn"
	"github.com/ldpsql/ldpsql/training/nn/graph"
)

// cdpStep returns the training step of DP-SGD for the VLM (nn.DPSGD: σ, sampling, noise). Each step
// ignores the loop's minibatch and draws its own Poisson batch; the loop's ⌈n/BatchSize⌉ steps per epoch
// are the steps d was calibrated for. The sampled rows go through the graph in chunks of gbs rows
// (d.ChunkRows: a second chunk is rare). The graph gives, for each dense layer, its input X (rows x_r)
// and the loss's gradient Δ at its pre-activation (rows δ_r, row r's own: the rows are independent in
// the loss); graph.DPGradient (the sampling, the chunks, the clipping and the noise every CDP model
// shares) forms the sum of the per-example gradients clipped to d.Clip from them with
// graph.AddClipped, one GEMM per layer, so gorgonia computes no weight gradient at all, and d.Privatise
// adds the noise and divides by the expected batch size; then Adam steps.
func (m *Model) cdpStep(tg *trainGraph, vm G.VM, data []float32, d *nn.DPSGD, gbs int, xBuf, xiBuf, wBuf []float32,
	opt *nn.Adam[float32, float32], xiNoise *rand.Rand) (func([]int) (float64, error), error) {
	in := m.inputDim
	if len(tg.params) != 2*len(tg.layerIn) {
		return nil, fmt.Errorf("vlm: cdp: %d parameters for %d layers", len(tg.params), len(tg.layerIn))
	}
	segW, segG := make([][]float32, len(tg.params)), make([][]float32, len(tg.params))
	for i, p := range tg.params {
		segG[i] = make([]float32, p.Shape().TotalSize())
	}
	dg := &graph.DPGradient{D: d, Rows: gbs, VM: vm, Loss: tg.loss, LayerIn: tg.layerIn, ZGrad: tg.zGrad}
	load := func(chunk []int) error {
		for i := range gbs {
			dst := xBuf[i*in : (i+1)*in]
			if i < len(chunk) {
				copy(dst, data[chunk[i]*in:(chunk[i]+1)*in])
				wBuf[i] = 1
			} else {
				clear(dst)
				wBuf[i] = 0
			}
		}
		for i := range xiBuf {
			xiBuf[i] = float32(nn.StdLaplace(xiNoise))
		}
		tg.live = len(chunk)
		return nil
	}
	return func([]int) (float64, error) {
		loss, err := dg.Step(segG, load)
		if err != nil {
			return 0, err
		}
		for i, p := range tg.params {
			w, err := graph.F32s(p.Value())
			if err != nil {
				return 0, err
			}
			segW[i] = w
		}
		opt.StepSegments(segW, segG)
		return loss, nil
	}, nil
}

// addClipped adds to grads (laid out as tg.params) the sum of the first k rows' gradients, each clipped
// to ℓ2 norm clip (graph.AddClipped).
func (tg *trainGraph) addClipped(gbs, k int, clip float64, norms []float64, scaled *[]float32, grads [][]float32) error {
	return graph.AddClipped(tg.layerIn, tg.zGrad, gbs, k, clip, norms, scaled, grads)
}
