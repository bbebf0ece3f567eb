package vlm

import (
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"

	"github.com/ldpsql/ldpsql/training/dp"
	"github.com/ldpsql/ldpsql/training/nn"
	"github.com/ldpsql/ldpsql/training/nn/graph"
)

// noiseChunk is the smallest share of a parameter tensor's noise one worker draws.
const noiseChunk = 1 << 14

// cdpStep returns the training step of DP-SGD (Abadi et al. 2016) for the VLM, and fills cfg.CDP's
// record. Each step ignores the loop's minibatch and draws its own batch by Poisson sampling: every
// row is in it with probability q = BatchSize/n, independently; the loop's ⌈n/BatchSize⌉ steps per
// epoch give steps = Epochs·⌈n/BatchSize⌉ steps, for which the accountant (package dp) calibrates σ.
// The sampled rows go through the graph in chunks of gbs rows (a little more than BatchSize, so that
// a second chunk is rare). The graph gives, for each dense layer, its input X (rows x_r) and the
// loss's gradient Δ at its pre-activation (rows δ_r, row r's own: the rows are independent in the
// loss). Row r's gradient has norm² Σ_layers (‖x_r‖² + 1)·‖δ_r‖², so with c_r = min(1, C/‖g_r‖) the
// sum of the clipped per-example gradients is, per layer, Xᵀ·diag(c)·Δ for W and Σ_r c_r δ_r for b:
// one GEMM per layer here, and gorgonia computes no weight gradient at all.
//
// The step's gradient is (Σ_r c_r g_r + N(0, σ²C²I)) / (q·n), then Adam. The Gaussian noise and the
// sampling come from crypto/rand (not the config's seed, which is recorded with the model: a seeded
// noise could be subtracted again).
func (m *Model) cdpStep(tg *trainGraph, vm G.VM, data []float32, n, bs, gbs int, xBuf, xiBuf, wBuf []float32,
	opt *nn.Adam[float32, float32], xiNoise *rand.Rand) (func([]int) (float64, error), error) {
	cfg := m.cfg
	in := m.inputDim
	if cfg.CDP.Delta == 0 {
		cfg.CDP.Delta = 1 / float64(n)
	}
	q := float64(bs) / float64(n)
	steps := cfg.Epochs * ((n + bs - 1) / bs)
	sigma, err := dp.Calibrate(q, steps, cfg.CDP.Epsilon, cfg.CDP.Delta)
	if err != nil {
		return nil, fmt.Errorf("vlm: cdp: %w", err)
	}
	spent, order := dp.Epsilon(q, sigma, steps, cfg.CDP.Delta)
	cfg.CDP.NoiseMultiplier, cfg.CDP.SamplingRate, cfg.CDP.Steps, cfg.CDP.Spent, cfg.CDP.Order = sigma, q, steps, spent, order
	m.cfg = cfg
	if len(tg.params) != 2*len(tg.layerIn) {
		return nil, fmt.Errorf("vlm: cdp: %d parameters for %d layers", len(tg.params), len(tg.layerIn))
	}

	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return nil, err
	}
	secure := rand.New(rand.NewChaCha8(seed))
	streams := make([]*rand.Rand, nn.Workers())
	for i := range streams {
		if _, err := crand.Read(seed[:]); err != nil {
			return nil, err
		}
		streams[i] = rand.New(rand.NewChaCha8(seed))
	}
	clip := cfg.MaxGradNorm
	segW, segG := make([][]float32, len(tg.params)), make([][]float32, len(tg.params))
	for i, p := range tg.params {
		segG[i] = make([]float32, p.Shape().TotalSize())
	}
	norms := make([]float64, gbs)
	scaled := make([]float32, 0) // c∘Δ of one layer
	sampled := make([]int, 0, 2*gbs)

	return func([]int) (float64, error) {
		sampled = dp.PoissonSample(secure, n, q, sampled[:0])
		for _, g := range segG {
			clear(g)
		}
		lossSum := 0.0
		for lo := 0; lo == 0 || lo < len(sampled); lo += gbs { // one empty chunk when no row was sampled
			chunk := sampled[lo:min(len(sampled), lo+gbs)]
			k := len(chunk)
			for i := range gbs {
				dst := xBuf[i*in : (i+1)*in]
				if i < k {
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
			if err := vm.RunAll(); err != nil {
				vm.Reset()
				return 0, err
			}
			lossSum += float64(tg.loss.Value().Data().(float32))
			if err := tg.addClipped(gbs, k, clip, norms, &scaled, segG); err != nil {
				vm.Reset()
				return 0, err
			}
			vm.Reset()
		}
		for i, p := range tg.params {
			w, err := graph.F32s(p.Value())
			if err != nil {
				return 0, err
			}
			segW[i] = w
		}
		// Noise, average over the expected batch size, step; the noise is drawn in parallel, one
		// secure stream per worker.
		scale := float32(1 / (q * float64(n)))
		noise := sigma * clip
		for _, g := range segG {
			parts := min(len(streams), max(1, len(g)/noiseChunk))
			nn.Parallel(parts, func(w int) {
				r := streams[w]
				for j := w * len(g) / parts; j < (w+1)*len(g)/parts; j++ {
					g[j] = (g[j] + float32(noise*r.NormFloat64())) * scale
				}
			})
		}
		opt.StepSegments(segW, segG)
		return lossSum / max(1, float64(len(sampled))), nil
	}, nil
}

// addClipped adds to grads (laid out as tg.params) the sum of the first k rows' gradients, each clipped
// to ℓ2 norm clip (graph.AddClipped).
func (tg *trainGraph) addClipped(gbs, k int, clip float64, norms []float64, scaled *[]float32, grads [][]float32) error {
	return graph.AddClipped(tg.layerIn, tg.zGrad, gbs, k, clip, norms, scaled, grads)
}
