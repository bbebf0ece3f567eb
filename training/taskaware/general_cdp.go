package taskaware

import (
	"context"
	"fmt"

	"github.com/ldpsql/ldpsql/training/nn"
	"github.com/ldpsql/ldpsql/training/nn/graph"
)

// CDP training of a task-aware encoder (TrainConfig.CDP): both of Train's phases — the task model f on
// the labelled auxiliary rows, then the encoder and decoder through it — run DP-SGD, so the weights (f's
// included: the artifact holds it) protect the auxiliary rows at (ε, δ). Every step Poisson-samples rows
// (nn.DPSGD), forms the sum of their gradients each clipped to MaxGradNorm (graph.AddClipped, from the
// probes at every trainable layer), and nn.DPSGD adds the Gaussian noise and averages. One step per batch
// (Steps does not apply: each step is one release); one σ for the two phases' steps together,
// (TaskEpochs + Epochs)·⌈rows/BatchSize⌉. The input box and the label's range or classes are the public
// ones given (TrainConfig.validate requires them), never the rows'.

// testNoiseSeed, set by tests only, replaces crypto/rand for the sampling and the noise so that a CDP
// run is reproducible; nil (always, outside tests) keeps them unpredictable, as the guarantee needs.
var testNoiseSeed *[32]byte

// setupCDP calibrates DP-SGD (nn.DPSGD) for the two phases' steps together and sets the graph's rows
// to its chunk size.
func (t *trainer) setupCDP() error {
	c := t.c
	b := min(c.BatchSize, t.n)
	d, err := nn.NewDPSGD(*c.CDP, t.n, b, (c.TaskEpochs+c.Epochs)*((t.n+b-1)/b), c.MaxGradNorm, testNoiseSeed)
	if err != nil {
		return fmt.Errorf("task_aware: cdp: %w", err)
	}
	t.cdp, t.bs = d, d.ChunkRows()
	return nil
}

// cdpTrain runs one phase under CDP on the compiled graph nt, whose trainable parameters are nt.params
// (the first nEnc of them the encoder's, decayed by eta); ph, for the encoder phase, draws the latent
// noise. It returns the last epoch's mean loss.
func (t *trainer) cdpTrain(ctx context.Context, nt *net, loop nn.Loop, nEnc int, eta float64, ph *codecPhase) (float64, error) {
	d := t.cdp
	loop.BatchSize, loop.Shuffle = d.Batch, nil // the step samples its own rows
	n, k, gbs, in := t.n, t.k, t.bs, t.m.InputDim
	grads := make([][]float32, len(nt.params))
	for i, p := range nt.params {
		grads[i] = make([]float32, p.Shape().TotalSize())
	}
	ws := make([][]float32, len(nt.params))
	var opt *nn.Adam[float32, float32]
	dg := &graph.DPGradient{D: d, Rows: gbs, VM: nt.vm, Loss: nt.loss, LayerIn: nt.layerIn, ZGrad: nt.zGrad}
	batches := (n + d.Batch - 1) / d.Batch
	calls := 0
	res, err := loop.Run(ctx, n, nn.Steps{Step: func([]int) (float64, error) {
		epoch := calls/batches + 1
		calls++
		loss, err := dg.Step(grads, func(chunk []int) error {
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
				return t.drawNoise(nt, *ph, epoch)
			}
			return nil
		})
		if err != nil {
			return 0, err
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
		return loss, nil
	}})
	return res.TrainLoss, err
}
