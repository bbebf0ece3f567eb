package vlm

import (
	crand "crypto/rand"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
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
		sampled = poissonSample(secure, n, q, sampled[:0])
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

// addClipped adds to grads (laid out as tg.params) the sum over the first k rows of the batch just run
// (the graph holds gbs rows) of each row's gradient clipped to ℓ2 norm clip, formed from the layers'
// inputs and pre-activation gradients; norms (gbs) and scaled are scratch.
func (tg *trainGraph) addClipped(gbs, k int, clip float64, norms []float64, scaled *[]float32, grads [][]float32) error {
	xs, ds := make([][]float32, len(tg.layerIn)), make([][]float32, len(tg.layerIn))
	clear(norms)
	for l := range tg.layerIn {
		var err error
		if xs[l], err = graph.F32s(tg.layerIn[l].Value()); err != nil {
			return fmt.Errorf("layer %d input: %w", l, err)
		}
		if ds[l], err = graph.F32s(tg.zGrad[l].Value()); err != nil {
			return fmt.Errorf("layer %d gradient: %w", l, err)
		}
		din, dout := len(xs[l])/gbs, len(ds[l])/gbs
		for r := range k {
			xx, gg := 1.0, 0.0
			for _, v := range xs[l][r*din : (r+1)*din] {
				xx += float64(v) * float64(v)
			}
			for _, v := range ds[l][r*dout : (r+1)*dout] {
				gg += float64(v) * float64(v)
			}
			norms[r] += xx * gg
		}
	}
	c := make([]float32, k)
	for r := range k {
		c[r] = 1
		if nr := math.Sqrt(norms[r]); nr > clip {
			c[r] = float32(clip / nr)
		}
	}
	for l := range tg.layerIn {
		din, dout := len(xs[l])/gbs, len(ds[l])/gbs
		*scaled = append((*scaled)[:0], ds[l][:k*dout]...)
		sc := *scaled
		gb := grads[2*l+1]
		for r := range k {
			row := sc[r*dout : (r+1)*dout]
			for j := range row {
				row[j] *= c[r]
				gb[j] += row[j]
			}
		}
		if k == 0 {
			continue
		}
		// W's gradient (din × dout) += Xᵀ·(c∘Δ), over the k rows.
		blas32.Gemm(blas.Trans, blas.NoTrans, 1,
			blas32.General{Rows: k, Cols: din, Stride: din, Data: xs[l][:k*din]},
			blas32.General{Rows: k, Cols: dout, Stride: dout, Data: sc},
			1, blas32.General{Rows: din, Cols: dout, Stride: dout, Data: grads[2*l]})
	}
	return nil
}

// poissonSample appends to dst the rows 0..n−1 each included with probability q independently, in
// order, drawing the geometric gaps between included rows (about q·n draws, not n).
func poissonSample(r *rand.Rand, n int, q float64, dst []int) []int {
	if q >= 1 {
		for i := range n {
			dst = append(dst, i)
		}
		return dst
	}
	logq := math.Log1p(-q)
	for i := -1; ; {
		u := 1 - r.Float64() // in (0, 1]
		gap := math.Floor(math.Log(u) / logq)
		if gap >= float64(n) {
			return dst
		}
		if i += 1 + int(gap); i >= n {
			return dst
		}
		dst = append(dst, i)
	}
}
