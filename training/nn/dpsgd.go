package nn

import (
	crand "crypto/rand"
	"math"
	"math/rand/v2"

	"github.com/ldpsql/ldpsql/training/dp"
)

// DPSGD is what every model's DP-SGD (Abadi et al. 2016) shares: the noise multiplier σ the accountant
// (package dp) gives for the run's steps, Poisson sampling of each step's rows, and the Gaussian noise
// on the step's sum of clipped per-example gradients. The randomness comes from crypto/rand, never from
// a model's seed (which is recorded with the model: a seeded noise could be subtracted again). The
// per-example clipping is the model's (graph.AddClipped for the gorgonia-trained ones).
type DPSGD struct {
	// Record is the target with what the run meets filled in: σ, the sampling rate, the steps, the
	// spent ε and its Rényi order; δ left at 0 is 1/rows.
	Record dp.Target
	// Rows are the training rows, Batch the expected batch size (Rows·Rate), Clip the per-example ℓ2 bound.
	Rows, Batch int
	Clip        float64

	secure  *rand.Rand      // sampling
	streams []*rand.ChaCha8 // noise, one per worker (addNoise draws from the source directly)
}

// dpsgdNoiseChunk is the smallest share of a parameter tensor's noise one worker draws.
const dpsgdNoiseChunk = 1 << 14

// NewDPSGD calibrates σ for steps Poisson batches of expected size batch out of rows to meet target, or
// says why it cannot be met. clip 0 is 1. seed, for tests only, replaces crypto/rand so that a run repeats.
func NewDPSGD(target dp.Target, rows, batch, steps int, clip float64, seed *[32]byte) (*DPSGD, error) {
	batch = min(batch, rows)
	if target.Delta == 0 {
		target.Delta = 1 / float64(rows)
	}
	q := float64(batch) / float64(rows)
	sigma, err := dp.Calibrate(q, steps, target.Epsilon, target.Delta)
	if err != nil {
		return nil, err
	}
	target.NoiseMultiplier, target.SamplingRate, target.Steps = sigma, q, steps
	target.Spent, target.Order = dp.Epsilon(q, sigma, steps, target.Delta)
	if clip == 0 {
		clip = 1
	}
	d := &DPSGD{Record: target, Rows: rows, Batch: batch, Clip: clip}
	var s [32]byte
	for i := 0; i <= Workers(); i++ {
		if seed != nil {
			s = *seed
			s[0] += byte(i)
		} else if _, err := crand.Read(s[:]); err != nil {
			return nil, err
		}
		c := rand.NewChaCha8(s)
		if i == 0 {
			d.secure = rand.New(c)
		} else {
			d.streams = append(d.streams, c)
		}
	}
	return d, nil
}

// ChunkRows is how many rows a graph that takes one step's Poisson batch in one chunk should hold: the
// batch has Batch rows on average, with standard deviation under √Batch, so room for 2 of them keeps 97 %
// of the steps in one chunk (a second chunk costs a graph run; more padding would cost every step; 2 and
// 3 deviations measured alike).
func (d *DPSGD) ChunkRows() int {
	return min(d.Rows, d.Batch+int(math.Ceil(2*math.Sqrt(float64(d.Batch)))))
}

// Sample appends one step's rows to dst (dp.PoissonSample at the run's rate).
func (d *DPSGD) Sample(dst []int) []int {
	return dp.PoissonSample(d.secure, d.Rows, d.Record.SamplingRate, dst)
}

// Privatise turns the step's sum of clipped per-example gradients, grads, into the gradient to step
// with, in place: (sum + N(0, (σ·Clip)²)) / Batch, the noise drawn in parallel, one stream per worker.
func (d *DPSGD) Privatise(grads [][]float32) {
	scale := float32(1 / float64(d.Batch))
	noise := d.Record.NoiseMultiplier * d.Clip
	for _, g := range grads {
		parts := min(len(d.streams), max(1, len(g)/dpsgdNoiseChunk))
		Parallel(parts, func(w int) {
			addNoise(d.streams[w], g[w*len(g)/parts:(w+1)*len(g)/parts], noise, scale)
		})
	}
}
