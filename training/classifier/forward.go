package classifier

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/ldpsql/ldpsql/training/nn"
)

// fwdChunk is the number of rows per block of the forward objective; blocks
// are processed in parallel and their gradients summed in block order, so
// the result does not depend on GOMAXPROCS.
const fwdChunk = 64

// TrainForward fits p_ξ(y|x̃) on the privatised inputs themselves by
// maximising Σ_n log Σ_y R[ỹ_n][y]·softmax_ξ(x̃_n)_y (forward loss
// correction, thesis Eq 4.12), with early stopping on the same objective
// over val (whose nil R defaults to train's; an empty val disables early
// stopping). Inputs are standardised with train.X's per-feature mean and
// standard deviation. progress, if not nil, is called after every epoch.
// Cancelling ctx stops training within one step and returns ctx.Err().
func TrainForward(ctx context.Context, cfg Config, train, val ForwardData, progress func(nn.Progress)) (*Model, error) {
	return trainForward(ctx, cfg, train, val, progress, "TrainForward")
}

// NaiveTrain is the baseline that ignores the privatisation: plain softmax
// cross-entropy of the (privatised) labels on the (privatised) inputs, i.e.
// TrainForward with R the K×K identity. valX and valLabels may be empty (no
// early stopping).
func NaiveTrain(ctx context.Context, cfg Config, x [][]float32, labels []int, valX [][]float32, valLabels []int, k int, progress func(nn.Progress)) (*Model, error) {
	r := KRRMatrix(math.Inf(1), k)
	if r == nil {
		return nil, fmt.Errorf("classifier: NaiveTrain: K = %d: want 2 ≤ K ≤ %d", k, MaxClasses)
	}
	return trainForward(ctx, cfg, ForwardData{X: x, Labels: labels, R: r}, ForwardData{X: valX, Labels: valLabels, R: r}, progress, "NaiveTrain")
}

func trainForward(ctx context.Context, cfg Config, train, val ForwardData, progress func(nn.Progress), name string) (*Model, error) {
	cfg, err := prepConfig(cfg)
	if err != nil {
		return nil, err
	}
	d, k, err := checkForward(&train, &val)
	if err != nil {
		return nil, fmt.Errorf("classifier: %s: %w", name, err)
	}
	sizes, err := netSizes(d, cfg.Hidden, k)
	if err != nil {
		return nil, err
	}
	nt := newNet(sizes)
	nt.init(rand.New(rand.NewPCG(cfg.Seed, streamInit)))
	std := nn.FitStandardiser(train.X, d)
	t := newForwardTrainer(nt, std, train, val, cfg.BatchSize)
	best, st, err := fit(ctx, cfg, nt, t, progress)
	if err != nil {
		return nil, err
	}
	st.Objective = ObjectiveForward
	return &Model{nt: best, std: std, stats: st}, nil
}

// forwardTrainer implements objective for Eq 4.12.
type forwardTrainer struct {
	d, k      int
	r         []float64 // K×K row-major
	rv        []float64 // the validation split's channel when it differs
	x, xv     [][]float32
	lab, labv []int
	nv        int
	std       nn.Standardiser
	p         int
	blocks    []*fwdBlock // one per block of a batch (or of the validation set)
	lossN     []float64
}

// fwdBlock is the workspace of one block of rows.
type fwdBlock struct {
	x      []float32 // d × fwdChunk
	acts   *actBuf
	dl     []float32 // K × fwdChunk
	s0, s1 []float32
	grad   []float64
}

func newForwardTrainer(nt *net, std nn.Standardiser, train, val ForwardData, batch int) *forwardTrainer {
	t := &forwardTrainer{d: nt.inDim(), k: nt.classes(), r: flatChannel(train.R), x: train.X, lab: train.Labels,
		xv: val.X, labv: val.Labels, nv: len(val.X), std: std, p: nn.Workers()}
	if t.nv > 0 && !sameChannel(val.R, train.R) {
		// Validation under its own channel: keep it separately.
		t.rv = flatChannel(val.R)
	}
	nb := (batch + fwdChunk - 1) / fwdChunk
	if t.nv > 0 {
		nb = max(nb, min((t.nv+fwdChunk-1)/fwdChunk, 4*t.p))
	}
	w := nt.maxWidth()
	for range nb {
		t.blocks = append(t.blocks, &fwdBlock{
			x: make([]float32, t.d*fwdChunk), acts: nt.newActs(fwdChunk), dl: make([]float32, t.k*fwdChunk),
			s0: make([]float32, w*fwdChunk), s1: make([]float32, w*fwdChunk), grad: make([]float64, len(nt.params)),
		})
	}
	return t
}

func (t *forwardTrainer) rows() int { return len(t.x) }

func (t *forwardTrainer) trainLabels() ([]int, []float64, int) { return t.lab, t.r, t.k }

// workersFor picks the goroutine count for blocks of this network: 1 when a
// block is too little work to pay for a goroutine.
func (t *forwardTrainer) workersFor(nt *net, blocks int) int {
	if len(nt.params)*fwdChunk < 1<<16 {
		return 1
	}
	return min(t.p, blocks)
}

// colLoss computes, for column c of logits lg (K × cols) with label y, the
// loss −log Σ_j R[y][j]·p_j and (when dl is not nil) its gradient
// (p_j − R[y][j]·p_j/Q)·scale into dl's column c.
func colLoss(r []float64, k int, lg []float32, cols, c, y int, logp, p []float64, dl []float32, scale float64) float64 {
	colSoftmax64(lg, cols, c, logp, p)
	ry := r[y*k : (y+1)*k]
	q := 0.0
	for j, rv := range ry {
		q += rv * p[j]
	}
	var a float64
	under := !(q > 1e-300)
	if under {
		a = logQ(ry, logp, p)
	} else {
		a = math.Log(q)
	}
	if dl != nil {
		for j, rv := range ry {
			var f float64
			if under {
				if rv > 0 {
					f = rv * math.Exp(logp[j]-a)
				}
			} else {
				f = rv * p[j] / q
			}
			dl[j*cols+c] = float32((p[j] - f) * scale)
		}
	}
	return -a
}

func (t *forwardTrainer) lossGrad(nt *net, batch []int, grad []float64) float64 {
	nb := len(batch)
	nblk := (nb + fwdChunk - 1) / fwdChunk
	if len(t.lossN) < nb {
		t.lossN = make([]float64, nb)
	}
	scale := 1 / float64(nb)
	nn.ParallelTasks(t.workersFor(nt, nblk), nblk, func(_, bi int) {
		b := t.blocks[bi]
		lo := bi * fwdChunk
		idx := batch[lo:min(nb, lo+fwdChunk)]
		cols := len(idx)
		block(t.std, b.x, t.x, idx, 0, cols)
		nt.forward(b.x, cols, b.acts)
		lg := b.acts.logits()
		logp, p := make([]float64, t.k), make([]float64, t.k)
		for c, i := range idx {
			t.lossN[lo+c] = colLoss(t.r, t.k, lg, cols, c, t.lab[i], logp, p, b.dl, scale)
		}
		clear(b.grad)
		nt.backward(b.x, cols, b.acts, b.dl, b.grad, b.s0, b.s1)
	})
	clear(grad)
	for _, b := range t.blocks[:nblk] {
		for i, v := range b.grad {
			grad[i] += v
		}
	}
	loss := 0.0
	for _, l := range t.lossN[:nb] {
		loss += l
	}
	return loss * scale
}

func (t *forwardTrainer) valRows(nt *net) []float64 {
	if t.nv == 0 {
		return nil
	}
	r := t.r
	if t.rv != nil {
		r = t.rv
	}
	nblk := (t.nv + fwdChunk - 1) / fwdChunk
	l := make([]float64, t.nv)
	nw := min(len(t.blocks), t.workersFor(nt, nblk))
	if nw == 1 && t.p > 1 && t.nv*len(nt.params) >= 1<<18 {
		nw = min(len(t.blocks), t.p)
	}
	// Each worker uses its own block workspace; outputs are per row.
	nn.Parallel(nw, func(w int) {
		b := t.blocks[w]
		logp, p := make([]float64, t.k), make([]float64, t.k)
		for bi := w; bi < nblk; bi += nw {
			lo := bi * fwdChunk
			cols := min(fwdChunk, t.nv-lo)
			block(t.std, b.x, t.xv, nil, lo, cols)
			nt.forward(b.x, cols, b.acts)
			lg := b.acts.logits()
			for c := range cols {
				l[lo+c] = colLoss(r, t.k, lg, cols, c, t.labv[lo+c], logp, p, nil, 0)
			}
		}
	})
	return l
}
