package classifier

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Progress is reported after every epoch.
type Progress struct {
	// Epoch is the epoch just finished (1-based) of at most Epochs.
	Epoch, Epochs int
	// Loss is the mean training objective over the epoch's minibatches
	// (negative log-likelihood per privatised row, as the parameters moved).
	Loss float64
	// ValLoss is the mean validation objective after the epoch (NaN without
	// a validation split).
	ValLoss float64
	// RowsPerSec is the training rows per second of the epoch's steps.
	RowsPerSec float64
	// ETA is the time the remaining epochs would take at the mean epoch
	// time so far (validation included); early stopping may end sooner.
	ETA time.Duration
}

// PCG streams derived from Config.Seed.
const (
	streamInit    = 0x636c617373696e69 // "classini"
	streamShuffle = 0x636c617373736866 // "classshf"
)

// objective is a training criterion: the mean over a minibatch of the
// negative noisy log-likelihood, its gradient, and the validation mean.
type objective interface {
	rows() int
	// lossGrad returns the minibatch's mean loss and writes its gradient
	// with respect to nt.params into grad.
	lossGrad(nt *net, batch []int, grad []float64) float64
	// valLoss is the mean loss over the validation split, NaN if empty.
	valLoss(nt *net) float64
}

// TrainStats describes a finished training run.
type TrainStats struct {
	// Objective is "marginal" (Eq 4.11) or "forward" (Eq 4.12).
	Objective string `json:"objective"`
	// EpochsRun is the number of epochs trained (≤ Config.Epochs).
	EpochsRun int `json:"epochs_run"`
	// BestEpoch is the epoch whose weights the model holds: the best
	// validation objective, or the last epoch without a validation split.
	BestEpoch int `json:"best_epoch"`
	// TrainLoss and ValLoss are the training loss of BestEpoch and its
	// validation objective (NaN without a validation split).
	TrainLoss float64 `json:"-"`
	ValLoss   float64 `json:"-"`
	// Precomputed reports whether the marginal objective's training table
	// fitted Config.MemoryBudget (false: recomputed in every step; always
	// false for the forward objective).
	Precomputed bool `json:"precomputed"`
	// ProbabilitySpace reports whether the marginal objective used the
	// probability-space kernel (false: the log-space one).
	ProbabilitySpace bool `json:"probability_space"`
}

// ErrDiverged is wrapped by the error returned when the training loss
// becomes NaN or infinite.
var ErrDiverged = errors.New("classifier: training diverged")

// fit runs minibatch Adam with early stopping on obj, starting from nt, and
// returns the best weights.
func fit(ctx context.Context, cfg Config, nt *net, obj objective, progress func(Progress)) (*net, TrainStats, error) {
	var st TrainStats
	n := obj.rows()
	rng := rand.New(rand.NewPCG(cfg.Seed, streamShuffle))
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	grad := make([]float64, len(nt.params))
	opt := newAdam(len(nt.params), cfg.LR)
	best := nt.clone()
	bestVal := math.Inf(1)
	bad := 0
	start := time.Now()
	for epoch := 1; epoch <= cfg.Epochs; epoch++ {
		t0 := time.Now()
		rng.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		sum := 0.0
		for b0 := 0; b0 < n; b0 += cfg.BatchSize {
			if err := ctx.Err(); err != nil {
				return nil, st, err
			}
			batch := perm[b0:min(n, b0+cfg.BatchSize)]
			l := obj.lossGrad(nt, batch, grad)
			if math.IsNaN(l) || math.IsInf(l, 0) {
				return nil, st, fmt.Errorf("%w: loss %v in epoch %d (try a smaller lr)", ErrDiverged, l, epoch)
			}
			sum += l * float64(len(batch))
			opt.step(nt.params, grad)
		}
		loss := sum / float64(n)
		stepTime := time.Since(t0)
		if err := ctx.Err(); err != nil {
			return nil, st, err
		}
		val := obj.valLoss(nt)
		st.EpochsRun = epoch
		stop := false
		if math.IsNaN(val) && !hasVal(obj) {
			copy(best.params, nt.params)
			st.BestEpoch, st.TrainLoss, st.ValLoss = epoch, loss, math.NaN()
		} else if val < bestVal {
			bestVal, bad = val, 0
			copy(best.params, nt.params)
			st.BestEpoch, st.TrainLoss, st.ValLoss = epoch, loss, val
		} else {
			bad++
			stop = bad >= cfg.Patience
		}
		if progress != nil {
			el := time.Since(start)
			progress(Progress{
				Epoch: epoch, Epochs: cfg.Epochs, Loss: loss, ValLoss: val,
				RowsPerSec: float64(n) / max(stepTime.Seconds(), 1e-9),
				ETA:        time.Duration(float64(el) / float64(epoch) * float64(cfg.Epochs-epoch)),
			})
		}
		if stop {
			break
		}
	}
	if st.BestEpoch == 0 {
		// Every validation value was NaN: keep the last weights.
		copy(best.params, nt.params)
		st.BestEpoch = st.EpochsRun
	}
	return best, st, nil
}

func hasVal(obj objective) bool {
	switch o := obj.(type) {
	case *marginalTrainer:
		return o.val != nil
	case *forwardTrainer:
		return o.nv > 0
	}
	return false
}

// netSizes returns {d, hidden…, k} after checking the parameter count.
func netSizes(d int, hidden []int, k int) ([]int, error) {
	sizes := append(append([]int{d}, hidden...), k)
	if paramCount(sizes) < 0 {
		return nil, fmt.Errorf("classifier: a network of sizes %v has more than %d parameters", sizes, maxParamsLen)
	}
	return sizes, nil
}

func prepConfig(cfg Config) (Config, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return cfg, fmt.Errorf("classifier config: %w", err)
	}
	return cfg, nil
}

// TrainMarginal fits p_ψ(y|z) on clean auxiliary latents by maximising the
// prior-marginalised likelihood of the privatised pairs (z̃_n, ỹ_n) (thesis
// Eq 4.11; see the package documentation), with early stopping on the same
// objective over val (whose nil Aux, zero Scale and nil R default to
// train's; an empty val disables early stopping). The model classifies clean
// latents: its inputs are standardised with the auxiliary latents' mean and
// standard deviation. progress, if not nil, is called after every epoch.
// Cancelling ctx stops training within one step and returns ctx.Err().
func TrainMarginal(ctx context.Context, cfg Config, train, val MarginalData, progress func(Progress)) (*Model, error) {
	cfg, err := prepConfig(cfg)
	if err != nil {
		return nil, err
	}
	shape, err := checkMarginal(&train, &val)
	if err != nil {
		return nil, fmt.Errorf("classifier: TrainMarginal: %w", err)
	}
	if len(train.Aux) >= maxAux || len(val.Aux) >= maxAux {
		return nil, fmt.Errorf("classifier: TrainMarginal: %d auxiliary points: want fewer than %d", max(len(train.Aux), len(val.Aux)), maxAux)
	}
	sizes, err := netSizes(shape.d, cfg.Hidden, shape.k)
	if err != nil {
		return nil, err
	}
	nt := newNet(sizes)
	nt.init(rand.New(rand.NewPCG(cfg.Seed, streamInit)))
	std := fitStandardiser(train.Aux, shape.d)
	tr, err := newMarginalTrainer(ctx, cfg, nt, std, train, val)
	if err != nil {
		return nil, err
	}
	best, st, err := fit(ctx, cfg, nt, tr, progress)
	if err != nil {
		return nil, err
	}
	st.Objective = ObjectiveMarginal
	st.Precomputed = tr.train.tab != nil
	st.ProbabilitySpace = tr.pr.probSpace
	return &Model{nt: best, std: std, stats: st}, nil
}

// marginalTrainer implements objective for Eq 4.11.
type marginalTrainer struct {
	pr, prVal  *prior
	train, val *mset
	p          int
	hw         [][]float32 // per worker: K×M kernel accumulators
	touched    [][]bool    // per worker: which labels' rows of hw are nonzero
	bufs       [][]float32 // per worker: M scratch
	wgrad      [][]float64 // per worker gradient
	hs, dl     [][]float32 // per worker: K × auxChunk
	tot        [][]float32 // per worker: 2·auxChunk
	s0, s1     [][]float32 // per worker: backward scratch
	lossN      []float64
}

func sameRows(a, b [][]float32) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) > 0 && len(a[0]) > 0 && len(b[0]) > 0 && &a[0][0] == &b[0][0] && &a[len(a)-1][0] == &b[len(b)-1][0] {
		return true
	}
	for i := range a {
		if !slices.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func sameChannel(a, b [][]float64) bool {
	return slices.EqualFunc(a, b, func(x, y []float64) bool { return slices.Equal(x, y) })
}

func newMarginalTrainer(ctx context.Context, cfg Config, nt *net, std standardiser, train, val MarginalData) (*marginalTrainer, error) {
	p := workers()
	t := &marginalTrainer{p: p}
	t.pr = newPrior(nt, std, train.Aux, train.R)
	budget := cfg.MemoryBudget
	fits := func(n, m int) bool {
		need := 4 * float64(n) * float64(m)
		if budget > 0 && need <= float64(budget) {
			budget -= int64(need)
			return true
		}
		return false
	}
	var err error
	t.train, err = newMset(ctx, t.pr, train.Noisy, train.Labels, train.Scale, fits(len(train.Noisy), t.pr.m), p)
	if err != nil {
		return nil, err
	}
	maxM := t.pr.m
	if len(val.Noisy) > 0 {
		t.prVal = t.pr
		if !sameRows(val.Aux, train.Aux) || !sameChannel(val.R, train.R) {
			t.prVal = newPrior(nt, std, val.Aux, val.R)
		}
		maxM = max(maxM, t.prVal.m)
		t.val, err = newMset(ctx, t.prVal, val.Noisy, val.Labels, val.Scale, fits(len(val.Noisy), t.prVal.m), p)
		if err != nil {
			return nil, err
		}
	}
	k := t.pr.k
	w := nt.maxWidth()
	for range p {
		t.hw = append(t.hw, make([]float32, k*t.pr.m))
		t.touched = append(t.touched, make([]bool, k))
		t.bufs = append(t.bufs, make([]float32, maxM))
		t.wgrad = append(t.wgrad, make([]float64, len(nt.params)))
		t.hs = append(t.hs, make([]float32, k*auxChunk))
		t.dl = append(t.dl, make([]float32, k*auxChunk))
		t.tot = append(t.tot, make([]float32, 2*auxChunk))
		t.s0 = append(t.s0, make([]float32, w*auxChunk))
		t.s1 = append(t.s1, make([]float32, w*auxChunk))
	}
	return t, nil
}

func (t *marginalTrainer) rows() int { return t.train.n }

// lossGrad is one step: (1) the MLP on all M auxiliary points gives Q (or
// A), K×M; (2) each worker runs the kernel over its share of the batch,
// accumulating per label; (3) per block of auxiliary points, the workers'
// accumulators are summed, turned into the logits' gradient and
// back-propagated through the MLP.
func (t *marginalTrainer) lossGrad(nt *net, batch []int, grad []float64) float64 {
	pr, s, p := t.pr, t.train, t.p
	m, k := pr.m, pr.k
	pr.head(nt, p)
	if len(t.lossN) < len(batch) {
		t.lossN = make([]float64, len(batch))
	}
	nb := len(batch)
	parallel(p, func(w int) {
		for bi := w * nb / p; bi < (w+1)*nb/p; bi++ {
			i := batch[bi]
			lp, v, f := pr.rowLoss(s, i, t.bufs[w])
			t.lossN[bi] = -lp
			y := s.labels[i]
			t.touched[w][y] = true
			blas.Saxpy(m, float32(f), v, 1, t.hw[w][y*m:(y+1)*m], 1)
		}
	})
	invB := 1 / float64(nb)
	parallel(p, func(w int) {
		g := t.wgrad[w]
		clear(g)
		for bi := w; bi < len(pr.blocks); bi += p {
			b := &pr.blocks[bi]
			cols := b.cols
			hs := t.hs[w][:k*cols]
			clear(hs)
			for y := range k {
				hy := hs[y*cols : (y+1)*cols]
				for ww := range p {
					if !t.touched[ww][y] {
						continue
					}
					src := t.hw[ww][y*m+b.m0 : y*m+b.m0+cols]
					for c, v := range src {
						hy[c] += v
					}
					clear(src)
				}
			}
			dl := t.dl[w][:k*cols]
			pr.dlogits(b, hs, dl, t.tot[w], invB)
			nt.backward(b.x, cols, b.acts, dl, g, t.s0[w], t.s1[w])
		}
	})
	for w := range p {
		clear(t.touched[w])
	}
	clear(grad)
	for _, g := range t.wgrad {
		for i, v := range g {
			grad[i] += v
		}
	}
	loss := 0.0
	for _, l := range t.lossN[:nb] {
		loss += l
	}
	return loss * invB
}

// valLoss is the mean negative log-likelihood of the validation split.
func (t *marginalTrainer) valLoss(nt *net) float64 {
	if t.val == nil {
		return math.NaN()
	}
	return t.meanLoss(nt, t.prVal, t.val)
}

// meanLoss evaluates −(1/N)·Σ_n log p(ỹ_n, z̃_n) for split s under pr.
func (t *marginalTrainer) meanLoss(nt *net, pr *prior, s *mset) float64 {
	pr.head(nt, t.p)
	l := make([]float64, s.n)
	parallel(t.p, func(w int) {
		for i := w * s.n / t.p; i < (w+1)*s.n/t.p; i++ {
			lp, _, _ := pr.rowLoss(s, i, t.bufs[w])
			l[i] = -lp
		}
	})
	sum := 0.0
	for _, v := range l {
		sum += v
	}
	return sum / float64(s.n)
}
