package classifier

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/ldpsql/ldpsql/training/nn"
)

// PCG streams derived from Config.Seed.
const (
	streamInit    = 0x636c617373696e69 // "classini"
	streamShuffle = 0x636c617373736866 // "classshf"
)

// objective is a training criterion: the mean over a minibatch of the
// negative noisy log-likelihood, its gradient, and the validation losses.
type objective interface {
	rows() int
	// lossGrad returns the minibatch's mean loss and writes its gradient
	// with respect to nt.params into grad.
	lossGrad(nt *net, batch []int, grad []float64) float64
	// valRows returns the loss of every validation row, nil if the split is
	// empty. Early stopping uses them row by row (nn.Steps.ValidateRows).
	valRows(nt *net) []float64
	// trainLabels returns the training split's noisy labels and their
	// channel (K×K row-major, r[k·K+y] = p(ỹ = k | y)).
	trainLabels() (labels []int, r []float64, k int)
}

// valLoss is the mean loss over obj's validation split, NaN if empty.
func valLoss(obj objective, nt *net) float64 { return nn.Mean(obj.valRows(nt)) }

// TrainStats describes a finished training run.
type TrainStats struct {
	// Objective is "marginal" (Eq 4.11) or "forward" (Eq 4.12).
	Objective string `json:"objective"`
	// EpochsRun is the number of epochs trained (≤ Config.Epochs).
	EpochsRun int `json:"epochs_run"`
	// BestEpoch is the epoch whose weights the model holds: the best
	// validation objective or the latest epoch not significantly worse
	// (nn.Loop), or the last epoch without a validation split.
	BestEpoch int `json:"best_epoch"`
	// Epochs, Patience and Restarts are the values training ran with (the
	// automatic ones resolved: Config.Resolve).
	Epochs   int `json:"epochs"`
	Patience int `json:"patience"`
	Restarts int `json:"restarts"`
	// BestRestart is the start (1-based) whose weights the model holds: the
	// lowest validation objective over the starts' epochs.
	BestRestart int `json:"best_restart"`
	// Warning, if not empty, says the model explains the validation split no better than the class
	// frequencies do (informative): it was trained, but learnt nothing the releases show.
	Warning string `json:"warning,omitempty"`
	// TrainLoss and ValLoss are the training loss of BestEpoch and its
	// validation objective (NaN without a validation split).
	TrainLoss float64 `json:"-"`
	ValLoss   float64 `json:"-"`
	// Precomputed reports whether the marginal objective's training table
	// fitted Config.MemoryBudget (false: streamed in every step; always
	// false for the forward objective).
	Precomputed bool `json:"precomputed"`
	// ProbabilitySpace reports whether the marginal objective used the
	// probability-space kernel (false: the log-space one).
	ProbabilitySpace bool `json:"probability_space"`
}

// ErrDiverged is wrapped by the error returned when the training loss
// becomes NaN or infinite.
var ErrDiverged = nn.ErrDiverged

// fit trains on obj from cfg.Restarts starts (automatic values resolved for
// obj's rows: Config.Resolve), the first from nt as given, every later one
// from nt re-initialised from Seed+r, and returns the weights of the start
// with the best validation objective: the lowest of any of its epochs, as
// the kept epoch of a start may be a later one that the validation split
// cannot tell from it (nn.Loop), and comparing those would add that noise to
// the choice of start.
func fit(ctx context.Context, cfg Config, nt *net, obj objective, progress func(nn.Progress)) (*net, TrainStats, error) {
	name := ObjectiveForward
	if _, ok := obj.(*marginalTrainer); ok {
		name = ObjectiveMarginal
	}
	cfg = cfg.Resolve(obj.rows(), hasVal(obj), name)
	var best *net
	var bestSt TrainStats
	bestLow := math.NaN()
	for r := range cfg.Restarts {
		c := cfg
		c.Seed = cfg.Seed + uint64(r)
		if r > 0 {
			nt.init(rand.New(rand.NewPCG(c.Seed, streamInit)))
		}
		b, st, low, err := fitOnce(ctx, c, nt, obj, r+1, cfg.Epochs*(cfg.Restarts-r-1), progress)
		if err != nil {
			return nil, st, err
		}
		st.BestRestart = r + 1
		if best == nil || low < bestLow {
			best, bestSt, bestLow = b, st, low
		}
	}
	bestSt.Epochs, bestSt.Patience, bestSt.Restarts = cfg.Epochs, cfg.Patience, cfg.Restarts
	if hasVal(obj) {
		if gain, se, ok := informative(obj, best); !ok {
			bestSt.Warning = fmt.Sprintf("the classifier explains the validation split's noisy labels no better than predicting the class "+
				"frequencies everywhere (gain %.2g ± %.2g nats a row): its predictions carry no information shown by these releases, "+
				"however confident (more rows or a larger ε may help)", gain, se)
		}
	}
	return best, bestSt, nil
}

// informative tests whether best explains obj's validation rows better than the best constant
// classifier, which predicts the class frequencies everywhere (estimated from the training split's
// noisy labels through the channel: labelPrior): the mean of the row-by-row loss differences must
// exceed informativeZ standard errors. It returns that mean and its standard error. On releases that carry no information a classifier still maps its inputs to
// classes with confidence; on clean test rows it then scores around chance, or far below it when the
// map it learnt is a derangement of the classes (about 1 in e of such maps).
func informative(obj objective, best *net) (gain, se float64, ok bool) {
	labels, r, k := obj.trainLabels()
	pi := labelPrior(labels, r, k)
	c := best.clone()
	clear(c.params)
	last := c.b(c.layers() - 1)
	for y := range last {
		last[y] = float32(math.Log(pi[y]))
	}
	model, constant := obj.valRows(best), obj.valRows(c)
	n := float64(len(model))
	if n < 2 {
		return 0, 0, true
	}
	mean, sq := 0.0, 0.0
	for i := range model {
		d := constant[i] - model[i]
		mean += d
		sq += d * d
	}
	mean /= n
	se = math.Sqrt(max(0, sq/n-mean*mean) / (n - 1))
	return mean, se, mean > informativeZ*se
}

// splitCanJudge reports whether obj's validation split tells best from the constant classifier that
// predicts the class frequencies: best is better by informativeZ standard errors (the test behind
// TrainStats.Warning, which allows for the kept epoch having been chosen on these rows: uninformative
// releases reach z 2.4), or worse by nn.SelectZ (that choice biases against it, so the plain z
// suffices). Until it does, early stopping waits for AutoMinEpochs epochs: a split that cannot tell
// the model from a constant cannot tell its epochs apart either, so its lowest objective falls on an
// epoch by chance. Measured on Fashion-MNIST releases at ε = 4 (ε_y 1.2, 13,500 training and 1,500
// validation rows, a budget of 60 epochs; all six classifiers end with the warning, gains +1.3 to +3.8
// standard errors): 5 of 6 stopped at epoch 24–50, and the one that stopped at 24 scored 43.6 % where
// 60 epochs on the same releases scored 49.8 %. A model significantly worse than the constant (a
// network overfitting 784 noisy pixels from the first epochs, −0.22 ± 0.044 nats a row) is a verdict
// the split can give, and stopping on it is not delayed.
func splitCanJudge(obj objective, best *net) bool {
	gain, se, ok := informative(obj, best)
	return ok || gain < -nn.SelectZ*se
}

// informativeZ is the z informative asks of a model's gain over the constant classifier. Not nn.SelectZ
// (2): the model's epoch and start were chosen for their loss on these same rows, which biases the gain
// upwards. Measured on synthetic releases with no usable information (K = 10, ε_x 0.5–1.4 on an ℓ1
// ball of radius 7.5, 400 validation rows): z up to 2.4 for models that scored below chance on clean
// points; informative releases give z far above 4 (TestUninformativeClassifierIsFlagged).
const informativeZ = 4

// labelPrior estimates the class frequencies π from noisy labels through the channel r (K×K
// row-major, r[k·K+y] = p(ỹ = k | y)): π = R⁻¹ f with f the labels' frequencies, clipped to at least
// 10⁻³ and renormalised (the uniform distribution where R is singular).
func labelPrior(labels []int, r []float64, k int) []float64 {
	f := make([]float64, k)
	for _, y := range labels {
		if y >= 0 && y < k {
			f[y]++
		}
	}
	for i := range f {
		f[i] /= float64(max(1, len(labels)))
	}
	pi := make([]float64, k)
	var x mat.VecDense
	if err := x.SolveVec(mat.NewDense(k, k, slices.Clone(r)), mat.NewVecDense(k, f)); err != nil {
		for i := range pi {
			pi[i] = 1 / float64(k)
		}
		return pi
	}
	sum := 0.0
	for i := range pi {
		pi[i] = max(1e-3, x.AtVec(i))
		sum += pi[i]
	}
	for i := range pi {
		pi[i] /= sum
	}
	return pi
}

// fitOnce runs minibatch Adam with early stopping on obj, starting from nt,
// and returns the kept weights and the lowest validation objective of any
// epoch. laterEpochs (of the starts still to come) count in the reported
// ETA.
func fitOnce(ctx context.Context, cfg Config, nt *net, obj objective, restart, laterEpochs int, progress func(nn.Progress)) (*net, TrainStats, float64, error) {
	grad := make([]float64, len(nt.params))
	opt := nn.NewAdam[float32, float64](len(nt.params), cfg.LR)
	best := nt.clone()
	steps := nn.Steps{
		Step: func(batch []int) (float64, error) {
			l := obj.lossGrad(nt, batch, grad)
			opt.Step(nt.params, grad)
			return l, nil
		},
		Keep: func() { copy(best.params, nt.params) },
	}
	if hasVal(obj) {
		// Per-row losses: on a small validation split the epoch kept is the
		// most trained one the split cannot show to be worse (nn.Loop).
		steps.ValidateRows = func() []float64 { return obj.valRows(nt) }
		steps.MayStop = func(epoch int) bool { return epoch >= AutoMinEpochs || splitCanJudge(obj, best) }
	}
	loop := nn.Loop{
		Epochs: cfg.Epochs, BatchSize: cfg.BatchSize, Patience: cfg.Patience,
		Shuffle: rand.New(rand.NewPCG(cfg.Seed, streamShuffle)),
		Restart: restart, Restarts: cfg.Restarts, LaterEpochs: laterEpochs, Progress: progress,
	}
	res, err := loop.Run(ctx, obj.rows(), steps)
	if err != nil {
		if errors.Is(err, ErrDiverged) {
			err = fmt.Errorf("classifier: %w", err)
		}
		return nil, TrainStats{}, math.NaN(), err
	}
	return best, TrainStats{EpochsRun: res.EpochsRun, BestEpoch: res.BestEpoch, TrainLoss: res.TrainLoss, ValLoss: res.ValLoss}, res.LowestValLoss, nil
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
func TrainMarginal(ctx context.Context, cfg Config, train, val MarginalData, progress func(nn.Progress)) (*Model, error) {
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
	std := nn.FitStandardiser(train.Aux, shape.d)
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
//
// Work is handed out dynamically (parallelTasks) in every phase, so a
// worker that the operating system deschedules holds up no barrier, and
// every float sum has a fixed order: the results do not depend on
// GOMAXPROCS or on scheduling.
type marginalTrainer struct {
	pr, prVal  *prior
	train, val *mset
	p          int
	// h is the kernel accumulator (K×M): Σ_{n: ỹ_n = k} f_n·v_n over the
	// batch, H in probability space, G in log space. Rows are zero between
	// steps.
	h        []float32
	rowBuf   []float32   // chunkLen × M: the batch rows' v_n with a log-space table
	rowV     [][]float32 // per batch row of the chunk: v_n (nil: streamed)
	rowF     []float32   // per batch row of the chunk: f_n
	rowShift []float32   // per batch row of the chunk: the log-space shift
	present  []bool      // labels present in the batch
	bufs     [][]float32 // per worker: M scratch (validation)
	groups   int         // blocks are summed into this many gradients
	ggrad    [][]float64 // per group of blocks: gradient
	hs, dl   [][]float32 // per worker: K × auxChunk
	tot      [][]float32 // per worker: 2·auxChunk
	s0, s1   [][]float32 // per worker: backward scratch
	lossN    []float64
	chunkLen int // batch rows per kernel chunk
}

// maxRowBuf bounds the batch-row buffer of the kernel (bytes); larger
// batches are processed in chunks of rows. A variable for tests.
var maxRowBuf = 256 << 20

// maxGroupGrads bounds groups × parameters of the per-group gradients. A
// variable for tests.
var maxGroupGrads = 1 << 24

func sameRows(a, b [][]float32) bool {
	return slices.EqualFunc(a, b, func(x, y []float32) bool { return slices.Equal(x, y) })
}

func sameChannel(a, b [][]float64) bool {
	return slices.EqualFunc(a, b, func(x, y []float64) bool { return slices.Equal(x, y) })
}

func newMarginalTrainer(ctx context.Context, cfg Config, nt *net, std nn.Standardiser, train, val MarginalData) (*marginalTrainer, error) {
	p := nn.Workers()
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
	k, m := t.pr.k, t.pr.m
	t.h = make([]float32, k*m)
	t.present = make([]bool, k)
	t.chunkLen = max(1, min(cfg.BatchSize, t.train.n, maxRowBuf/(4*m)))
	if t.train.tab != nil && !t.pr.probSpace { // log-space table rows need a buffer
		t.rowBuf = make([]float32, t.chunkLen*m)
	}
	t.rowV = make([][]float32, t.chunkLen)
	t.rowF = make([]float32, t.chunkLen)
	t.rowShift = make([]float32, t.chunkLen)
	nb := len(t.pr.blocks)
	t.groups = max(1, min(nb, maxGroupGrads/max(1, len(nt.params))))
	for range t.groups {
		t.ggrad = append(t.ggrad, make([]float64, len(nt.params)))
	}
	w := nt.maxWidth()
	for range p {
		t.bufs = append(t.bufs, make([]float32, maxM))
		t.hs = append(t.hs, make([]float32, k*auxChunk))
		t.dl = append(t.dl, make([]float32, k*auxChunk))
		t.tot = append(t.tot, make([]float32, 2*auxChunk))
		t.s0 = append(t.s0, make([]float32, w*auxChunk))
		t.s1 = append(t.s1, make([]float32, w*auxChunk))
	}
	return t, nil
}

func (t *marginalTrainer) rows() int { return t.train.n }

func (t *marginalTrainer) trainLabels() ([]int, []float64, int) {
	return t.train.labels, t.pr.r, t.pr.k
}

// lossGrad is one step:
//
//  1. the MLP on all M auxiliary points gives Q (or A), K×M, in parallel
//     over blocks of auxiliary points;
//  2. per chunk of batch rows: each row's S_n and vector v_n (a table row or
//     computed into the row buffer), in parallel over rows; then, in
//     parallel over blocks of auxiliary points, h[ỹ_n][block] += v_n[block]/S_n
//     for the chunk's rows in batch order;
//  3. per group of blocks: the logits' gradient from h, back-propagated
//     through the MLP into the group's gradient; the groups' gradients are
//     summed in order.
func (t *marginalTrainer) lossGrad(nt *net, batch []int, grad []float64) float64 {
	pr, s, p := t.pr, t.train, t.p
	m, k := pr.m, pr.k
	pr.head(nt, p)
	nb := len(batch)
	if len(t.lossN) < nb {
		t.lossN = make([]float64, nb)
	}
	clear(t.present)
	for _, i := range batch {
		t.present[s.labels[i]] = true
	}
	blocks := pr.blocks
	for c0 := 0; c0 < nb; c0 += t.chunkLen {
		chunk := batch[c0:min(nb, c0+t.chunkLen)]
		if s.tab == nil { // streamed: groups of rows through each block of auxiliary points
			nn.ParallelTasks(p, (len(chunk)+streamGroup-1)/streamGroup, func(_, g int) {
				r0, r1 := g*streamGroup, min(len(chunk), (g+1)*streamGroup)
				var lp, f [streamGroup]float64
				pr.streamLosses(s, chunk[r0:r1], lp[:], f[:], t.rowShift[r0:r1])
				for r := r0; r < r1; r++ {
					t.lossN[c0+r] = -lp[r-r0]
					t.rowV[r], t.rowF[r] = nil, float32(f[r-r0])
				}
			})
		} else {
			nn.ParallelTasks(p, len(chunk), func(_, r int) {
				var buf []float32
				if t.rowBuf != nil {
					buf = t.rowBuf[r*m : (r+1)*m]
				}
				lp, v, f, shift := pr.rowLoss(s, chunk[r], buf)
				t.lossN[c0+r] = -lp
				t.rowV[r], t.rowF[r], t.rowShift[r] = v, float32(f), shift
			})
		}
		nn.ParallelTasks(p, len(blocks), func(_, bi int) {
			b := &blocks[bi]
			for r, i := range chunk {
				y := s.labels[i]
				h := t.h[y*m : (y+1)*m]
				switch {
				case t.rowV[r] != nil:
					blas.Saxpy(b.cols, t.rowF[r], t.rowV[r][b.m0:b.m0+b.cols], 1, h[b.m0:b.m0+b.cols], 1)
				case pr.probSpace:
					pr.at.probAxpy(s.row(i), s.c[i], s.invb, t.rowF[r], h, b.m0, b.cols)
				default:
					pr.at.logAxpy(s.row(i), s.c[i], s.invb, pr.q[y*m:(y+1)*m], t.rowShift[r], t.rowF[r], h, b.m0, b.cols)
				}
			}
		})
	}
	invB := 1 / float64(nb)
	per := (len(blocks) + t.groups - 1) / t.groups
	nn.ParallelTasks(p, t.groups, func(w, g int) {
		gg := t.ggrad[g]
		clear(gg)
		for bi := g * per; bi < min(len(blocks), (g+1)*per); bi++ {
			b := &blocks[bi]
			cols := b.cols
			hs := t.hs[w][:k*cols]
			for y := range k {
				hy := hs[y*cols : (y+1)*cols]
				if !t.present[y] {
					clear(hy)
					continue
				}
				src := t.h[y*m+b.m0 : y*m+b.m0+cols]
				copy(hy, src)
				clear(src)
			}
			dl := t.dl[w][:k*cols]
			pr.dlogits(b, hs, dl, t.tot[w], invB)
			nt.backward(b.x, cols, b.acts, dl, gg, t.s0[w], t.s1[w])
		}
	})
	clear(grad)
	for _, g := range t.ggrad {
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

// valRows is the negative log-likelihood of every validation row.
func (t *marginalTrainer) valRows(nt *net) []float64 {
	if t.val == nil {
		return nil
	}
	return t.rowLosses(nt, t.prVal, t.val)
}

// meanLoss evaluates −(1/N)·Σ_n log p(ỹ_n, z̃_n) for split s under pr.
func (t *marginalTrainer) meanLoss(nt *net, pr *prior, s *mset) float64 {
	sum := 0.0
	for _, v := range t.rowLosses(nt, pr, s) {
		sum += v
	}
	return sum / float64(s.n)
}

// rowLosses evaluates −log p(ỹ_n, z̃_n) for every row n of split s under pr.
func (t *marginalTrainer) rowLosses(nt *net, pr *prior, s *mset) []float64 {
	pr.head(nt, t.p)
	l := make([]float64, s.n)
	if s.tab == nil {
		nn.ParallelTasks(t.p, (s.n+streamGroup-1)/streamGroup, func(_, g int) {
			var rows [streamGroup]int
			var lp, f [streamGroup]float64
			var shift [streamGroup]float32
			n := min(streamGroup, s.n-g*streamGroup)
			for r := range n {
				rows[r] = g*streamGroup + r
			}
			pr.streamLosses(s, rows[:n], lp[:], f[:], shift[:])
			for r := range n {
				l[rows[r]] = -lp[r]
			}
		})
		return l
	}
	nn.ParallelTasks(t.p, s.n, func(w, i int) {
		lp, _, _, _ := pr.rowLoss(s, i, t.bufs[w])
		l[i] = -lp
	})
	return l
}
