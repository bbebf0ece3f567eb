package taskaware

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/ldpsql/ldpsql/training/dp"
	"github.com/ldpsql/ldpsql/training/nn"
	"github.com/ldpsql/ldpsql/training/nn/graph"
)

// CDP training of a task-aware encoder (TrainConfig.CDP): both of Train's phases — the task model f on
// the labelled auxiliary rows, then the encoder and decoder through it — run DP-SGD, so the weights (f's
// included: the artifact holds it) protect the auxiliary rows at (ε, δ). Every step Poisson-samples rows
// with probability q = BatchSize/rows, forms the sum of their gradients each clipped to MaxGradNorm
// (graph.AddClipped, from the probes at every trainable layer), adds N(0, (σ·MaxGradNorm)²) noise from
// crypto/rand and divides by q·rows. One step per batch (Steps does not apply: each step is one release).
// The accountant (package dp) calibrates one σ for the two phases' steps together,
// (TaskEpochs + Epochs)·⌈rows/BatchSize⌉. The input box and the label's range or classes are the public
// ones given (TrainConfig.validate requires them), never the rows'.

// testNoiseSeed, set by tests only, replaces crypto/rand for the sampling and the noise so that a CDP
// run is reproducible; nil (always, outside tests) keeps them unpredictable, as the guarantee needs.
var testNoiseSeed *[32]byte

// cdpRun is a CDP training run's state.
type cdpRun struct {
	record  *dp.Target
	batch   int // expected Poisson batch size
	sigma   float64
	clip    float64
	secure  *rand.Rand   // sampling
	streams []*rand.Rand // noise, one per worker
}

// setupCDP calibrates σ for the run's steps and sets the graph's rows a little above the expected
// batch size (a second chunk is rare).
func (t *trainer) setupCDP() error {
	c := t.c
	rec := *c.CDP
	if rec.Delta == 0 {
		rec.Delta = 1 / float64(t.n)
	}
	b := min(c.BatchSize, t.n)
	q := float64(b) / float64(t.n)
	steps := (c.TaskEpochs + c.Epochs) * ((t.n + b - 1) / b)
	sigma, err := dp.Calibrate(q, steps, rec.Epsilon, rec.Delta)
	if err != nil {
		return fmt.Errorf("task_aware: cdp: %w", err)
	}
	rec.NoiseMultiplier, rec.SamplingRate, rec.Steps = sigma, q, steps
	rec.Spent, rec.Order = dp.Epsilon(q, sigma, steps, rec.Delta)
	clip := c.MaxGradNorm
	if clip == 0 {
		clip = 1
	}
	r := &cdpRun{record: &rec, batch: b, sigma: sigma, clip: clip}
	var seed [32]byte
	for i := 0; i <= nn.Workers(); i++ {
		if testNoiseSeed != nil { // tests only: a reproducible run
			seed = *testNoiseSeed
			seed[0] += byte(i)
		} else if _, err := crand.Read(seed[:]); err != nil {
			return err
		}
		if i == 0 {
			r.secure = rand.New(rand.NewChaCha8(seed))
		} else {
			r.streams = append(r.streams, rand.New(rand.NewChaCha8(seed)))
		}
	}
	t.cdp = r
	t.bs = min(t.n, b+int(math.Ceil(2*math.Sqrt(float64(b)))))
	return nil
}

// cdpTrain runs one phase under CDP on the compiled graph nt, whose trainable parameters are nt.params
// (the first nEnc of them the encoder's, decayed by eta); ph, for the encoder phase, draws the latent
// noise. It returns the last epoch's mean loss.
func (t *trainer) cdpTrain(ctx context.Context, nt *net, loop nn.Loop, nEnc int, eta float64, ph *codecPhase) (float64, error) {
	r := t.cdp
	loop.BatchSize, loop.Shuffle = r.batch, nil // the step samples its own rows
	n, k, gbs, in := t.n, t.k, t.bs, t.m.InputDim
	grads := make([][]float32, len(nt.params))
	for i, p := range nt.params {
		grads[i] = make([]float32, p.Shape().TotalSize())
	}
	ws := make([][]float32, len(nt.params))
	var opt *nn.Adam[float32, float32]
	norms := make([]float64, gbs)
	var scaled []float32
	var sampled []int
	batches := (n + r.batch - 1) / r.batch
	calls := 0
	q := float64(r.batch) / float64(n)
	res, err := loop.Run(ctx, n, nn.Steps{Step: func([]int) (float64, error) {
		epoch := calls/batches + 1
		calls++
		sampled = dp.PoissonSample(r.secure, n, q, sampled[:0])
		for _, g := range grads {
			clear(g)
		}
		lossSum := 0.0
		for lo := 0; lo == 0 || lo < len(sampled); lo += gbs { // one empty chunk when no row was sampled
			chunk := sampled[lo:min(len(sampled), lo+gbs)]
			for i := range gbs {
				if i < len(chunk) {
					row := chunk[i]
					copy(nt.uBuf[i*in:(i+1)*in], t.u[row*in:(row+1)*in])
					copy(nt.tBuf[i*k:(i+1)*k], t.targets[row*k:(row+1)*k])
					nt.rwBuf[i] = 1
				} else {
					clear(nt.uBuf[i*in : (i+1)*in])
					clear(nt.tBuf[i*k : (i+1)*k])
					nt.rwBuf[i] = 0
				}
			}
			if ph != nil {
				if err := t.drawNoise(nt, *ph, epoch); err != nil {
					return 0, err
				}
			}
			if err := nt.vm.RunAll(); err != nil {
				nt.vm.Reset()
				return 0, err
			}
			lossSum += float64(nt.loss.Value().Data().(float32))
			if err := graph.AddClipped(nt.layerIn, nt.zGrad, gbs, len(chunk), r.clip, norms, &scaled, grads); err != nil {
				nt.vm.Reset()
				return 0, err
			}
			nt.vm.Reset()
		}
		scale := float32(1 / (q * float64(n)))
		noise := r.sigma * r.clip
		for _, g := range grads {
			parts := min(len(r.streams), max(1, len(g)/(1<<14)))
			nn.Parallel(parts, func(w int) {
				s := r.streams[w]
				for j := w * len(g) / parts; j < (w+1)*len(g)/parts; j++ {
					g[j] = (g[j] + float32(noise*s.NormFloat64())) * scale
				}
			})
		}
		for i, p := range nt.params {
			v, err := graph.F32s(p.Value())
			if err != nil {
				return 0, err
			}
			ws[i] = v
		}
		if eta > 0 { // weight decay: post-processing of the noisy gradient
			for i := range nEnc {
				for j, v := range ws[i] {
					grads[i][j] += float32(eta) * v
				}
			}
		}
		if opt == nil {
			total := 0
			for _, g := range grads {
				total += len(g)
			}
			opt = nn.NewAdam[float32, float32](total, t.c.LR)
		}
		opt.StepSegments(ws, grads)
		return lossSum / max(1, float64(len(sampled))), nil
	}})
	return res.TrainLoss, err
}
