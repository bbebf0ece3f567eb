package vlm

import (
	crand "crypto/rand"
	"fmt"
	"math"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"

	"github.com/ldpsql/ldpsql/training/dp"
	"github.com/ldpsql/ldpsql/training/nn"
	"github.com/ldpsql/ldpsql/training/nn/graph"
)

// cdpStep returns the training step of DP-SGD (Abadi et al. 2016) for the VLM, and fills cfg.CDP's
// record. Each step ignores the loop's minibatch and draws its own batch by Poisson sampling: every
// row is in it with probability q = BatchSize/n, independently; the loop's ⌈n/BatchSize⌉ steps per
// epoch give steps = Epochs·⌈n/BatchSize⌉ steps, for which the accountant (package dp) calibrates σ.
// The sampled rows go through the graph in chunks of BatchSize rows, each chunk twice:
//
//  1. with row weights 1, reading each dense layer's input x_r and the loss's gradient δ_r at its
//     pre-activation: row r's gradient norm is ‖g_r‖² = Σ_layers (‖x_r‖² + 1)·‖δ_r‖² (the rows are
//     independent in the loss, so δ_r is row r's own gradient);
//  2. with row weights c_r = min(1, C/‖g_r‖), whose parameter gradient is the sum of the clipped
//     per-example gradients.
//
// The step's gradient is (Σ_r c_r g_r + N(0, σ²C²I)) / (q·n), then Adam. Twice the forward and backward
// work of a normal step. The Gaussian noise and the sampling come from crypto/rand (not the config's
// seed, which is recorded with the model: a seeded noise could be subtracted again).
func (m *Model) cdpStep(tg *trainGraph, vm G.VM, data []float32, n, bs int, xBuf, xiBuf, wBuf []float32,
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

	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return nil, err
	}
	secure := rand.New(rand.NewChaCha8(seed))
	clip := cfg.MaxGradNorm
	nParams := 0
	for _, p := range tg.params {
		nParams += p.Shape().TotalSize()
	}
	sum := make([]float32, nParams)
	norms := make([]float64, bs)
	segW, segG := make([][]float32, len(tg.params)), make([][]float32, len(tg.params))
	sampled := make([]int, 0, 2*bs)

	run := func() error {
		if err := vm.RunAll(); err != nil {
			return err
		}
		return nil
	}
	// grads reads the parameter gradients into segG (views into the machine's tensors).
	grads := func() error {
		for i, p := range tg.params {
			var err error
			if segW[i], segG[i], err = graph.WeightsGrads(p); err != nil {
				return err
			}
		}
		return nil
	}
	return func([]int) (float64, error) {
		sampled = sampled[:0]
		for r := range n {
			if secure.Float64() < q {
				sampled = append(sampled, r)
			}
		}
		clear(sum)
		lossSum := 0.0
		for lo := 0; lo == 0 || lo < len(sampled); lo += bs { // one empty chunk when no row was sampled
			chunk := sampled[lo:min(len(sampled), lo+bs)]
			k := len(chunk)
			for i := range bs {
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
			// Pass 1: per-example norms.
			if err := run(); err != nil {
				return 0, err
			}
			lossSum += float64(tg.loss.Value().Data().(float32))
			clear(norms)
			for l, x := range tg.layerIn {
				xv, err := graph.F32s(x.Value())
				if err != nil {
					return 0, fmt.Errorf("layer %d input: %w", l, err)
				}
				gv, err := graph.F32s(tg.zGrad[l].Value())
				if err != nil {
					return 0, fmt.Errorf("layer %d gradient: %w", l, err)
				}
				din, dout := len(xv)/bs, len(gv)/bs
				for r := range k {
					xx, gg := 1.0, 0.0
					for _, v := range xv[r*din : (r+1)*din] {
						xx += float64(v) * float64(v)
					}
					for _, v := range gv[r*dout : (r+1)*dout] {
						gg += float64(v) * float64(v)
					}
					norms[r] += xx * gg
				}
			}
			if err := grads(); err != nil {
				return 0, err
			}
			for _, g := range segG {
				clear(g)
			}
			vm.Reset()
			// Pass 2: the sum of the clipped gradients (same ξ, same rows).
			for r := range k {
				wBuf[r] = float32(min(1, clip/math.Sqrt(norms[r])))
				if norms[r] == 0 {
					wBuf[r] = 1
				}
			}
			if err := run(); err != nil {
				return 0, err
			}
			if err := grads(); err != nil {
				return 0, err
			}
			off := 0
			for _, g := range segG {
				for j, v := range g {
					sum[off+j] += v
				}
				off += len(g)
				clear(g)
			}
			vm.Reset()
		}
		// Noise, average over the expected batch size, step.
		scale := 1 / (q * float64(n))
		off := 0
		for _, g := range segG {
			for j := range g {
				g[j] = float32((float64(sum[off+j]) + sigma*clip*secure.NormFloat64()) * scale)
			}
			off += len(g)
		}
		opt.StepSegments(segW, segG)
		return lossSum / max(1, float64(len(sampled))), nil
	}, nil
}
