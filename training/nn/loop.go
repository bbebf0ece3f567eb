package nn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// ErrDiverged is wrapped by the error a Loop returns when the training loss becomes NaN or infinite.
var ErrDiverged = errors.New("training diverged")

// A Loop trains by epochs of minibatch steps over n rows: each epoch shuffles the rows (with Shuffle,
// or keeps their order), hands the steps the minibatches of at most BatchSize row indices, then asks
// for the validation loss and keeps the best epoch; Patience epochs without improvement stop it. The
// context is checked before every step and after every epoch.
//
// With per-row validation losses (Steps.ValidateRows) the epoch kept is the latest one whose
// validation loss is not significantly above the lowest so far: the mean of its per-row differences
// from the lowest epoch's is at most SelectZ of their standard errors. A small validation split is
// noisy, and the plain lowest loss then picks among models that it cannot tell apart, often a barely
// trained one: on a 369-row table (37 validation rows) a classifier of the first few epochs, still
// predicting the majority class, had the lowest validation loss in 22 of 240 noise draws, though
// within 1.3 standard errors of trained ones that classified 93 % right against its 70 %.
type Loop struct {
	Epochs    int
	BatchSize int
	// Patience is how many epochs without a lower validation loss end training; 0 never stops early.
	Patience int
	// Shuffle draws each epoch's row order; nil keeps the rows in order.
	Shuffle *rand.Rand
	// Restart and Restarts are reported in Progress (0 reads as 1); LaterEpochs, the epochs of the
	// starts still to come, count in the ETA.
	Restart, Restarts, LaterEpochs int
	// Progress, if not nil, is called after every epoch.
	Progress func(Progress)
}

// Steps is what a Loop drives.
type Steps struct {
	// Step takes one optimiser step on the minibatch (row indices, valid until it returns) and returns
	// the minibatch's mean loss before the step.
	Step func(batch []int) (float64, error)
	// Validate, if not nil, returns the validation loss after an epoch (NaN counts as no improvement).
	// Without it every epoch is the best so far (the last weights are kept).
	Validate func() float64
	// ValidateRows, if not nil, is used instead of Validate: it returns the per-row validation losses
	// after an epoch (valid until the next call; the validation loss is their mean, a NaN counting as no
	// improvement), so that the Loop can tell a rise of the validation loss from noise (see Loop).
	ValidateRows func() []float64
	// Keep, if not nil, is called after an epoch that is kept (the best so far): the model saves its
	// weights.
	Keep func()
	// MayStop, if not nil, is asked after the epoch (1-based) with which Patience epochs have passed
	// without a lower validation loss; false goes on for another Patience epochs. A validation split
	// too noisy to tell the kept model from a trivial one cannot tell epochs apart either: its lowest
	// loss falls on an epoch by chance, and stopping there ends training at a random point.
	MayStop func(epoch int) bool
}

// SelectZ is the one-sided z of the significance test with which a Loop over per-row validation losses
// (Steps.ValidateRows) prefers the most trained epoch: a later epoch is kept unless its validation loss
// is more than SelectZ standard errors above the lowest (2: a false alarm in about 2 % of comparisons).
const SelectZ = 2

// Result describes a finished Loop.
type Result struct {
	// EpochsRun is the number of epochs trained (≤ Epochs).
	EpochsRun int
	// BestEpoch is the epoch last kept: the lowest validation loss (with per-row validation losses,
	// the latest not significantly above it), or the last epoch without validation (or when every
	// validation loss was NaN).
	BestEpoch int
	// TrainLoss and ValLoss are BestEpoch's training and validation losses (ValLoss NaN without
	// validation).
	TrainLoss, ValLoss float64
	// LowestValLoss is the lowest validation loss of any epoch (ValLoss but with per-row validation
	// losses; NaN without validation or when every one was NaN).
	LowestValLoss float64
}

// Run trains on n rows. A non-finite minibatch loss ends it with an error wrapping ErrDiverged.
func (l Loop) Run(ctx context.Context, n int, s Steps) (Result, error) {
	var res Result
	if n < 1 || l.BatchSize < 1 {
		return res, fmt.Errorf("nn: a loop over %d rows in batches of %d", n, l.BatchSize)
	}
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	keep := func(epoch int, loss, val float64) {
		if s.Keep != nil {
			s.Keep()
		}
		res.BestEpoch, res.TrainLoss, res.ValLoss = epoch, loss, val
	}
	bestVal, bad := math.Inf(1), 0
	var bestRows []float64 // per-row validation losses of the lowest epoch (ValidateRows)
	start := time.Now()
	for epoch := 1; epoch <= l.Epochs; epoch++ {
		t0 := time.Now()
		if l.Shuffle != nil {
			l.Shuffle.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		}
		sum := 0.0
		for lo := 0; lo < n; lo += l.BatchSize {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			batch := perm[lo:min(n, lo+l.BatchSize)]
			loss, err := s.Step(batch)
			if err != nil {
				return res, fmt.Errorf("epoch %d: %w", epoch, err)
			}
			if math.IsNaN(loss) || math.IsInf(loss, 0) {
				return res, fmt.Errorf("%w: loss %v in epoch %d (try a smaller lr)", ErrDiverged, loss, epoch)
			}
			sum += loss * float64(len(batch))
		}
		loss := sum / float64(n)
		stepTime := time.Since(t0)
		if err := ctx.Err(); err != nil {
			return res, err
		}
		res.EpochsRun = epoch
		val, stop := math.NaN(), false
		var rows []float64
		switch {
		case s.ValidateRows != nil:
			rows = s.ValidateRows()
			val = Mean(rows)
		case s.Validate != nil:
			val = s.Validate()
		}
		switch {
		case s.Validate == nil && s.ValidateRows == nil:
			keep(epoch, loss, val)
		case val < bestVal:
			bestVal, bad = val, 0
			bestRows = append(bestRows[:0], rows...)
			keep(epoch, loss, val)
		default:
			bad++
			if stop = l.Patience > 0 && bad >= l.Patience; stop && s.MayStop != nil && !s.MayStop(epoch) {
				stop, bad = false, 0
			}
			if rows != nil && bestRows != nil && notWorse(rows, bestRows) {
				keep(epoch, loss, val)
			}
		}
		if l.Progress != nil {
			perEpoch := float64(time.Since(start)) / float64(epoch)
			l.Progress(Progress{
				Epoch: epoch, Epochs: l.Epochs, Restart: max(l.Restart, 1), Restarts: max(l.Restarts, 1),
				Loss: loss, ValLoss: val,
				RowsPerSec: float64(n) / max(stepTime.Seconds(), 1e-9),
				ETA:        time.Duration(perEpoch * float64(l.Epochs-epoch+l.LaterEpochs)),
			})
		}
		if stop {
			break
		}
	}
	if res.BestEpoch == 0 && res.EpochsRun > 0 { // every validation loss was NaN: the last weights
		keep(res.EpochsRun, math.NaN(), math.NaN())
	}
	res.LowestValLoss = math.NaN()
	if !math.IsInf(bestVal, 1) {
		res.LowestValLoss = bestVal
	}
	return res, nil
}

// Mean is the mean of v, NaN if v is empty (a split with no rows has no loss).
func Mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// notWorse reports whether the per-row losses v are not significantly above ref's: the mean of
// the differences v − ref is at most SelectZ times its standard error (at most 0 for a single row).
// NaNs make it false.
func notWorse(v, ref []float64) bool {
	n := len(v)
	if n != len(ref) || n == 0 {
		return false
	}
	md := 0.0
	for i := range v {
		md += v[i] - ref[i]
	}
	md /= float64(n)
	if n == 1 {
		return md <= 0
	}
	ss := 0.0
	for i := range v {
		d := v[i] - ref[i] - md
		ss += d * d
	}
	se := math.Sqrt(ss / float64(n-1) / float64(n))
	return md <= SelectZ*se
}
