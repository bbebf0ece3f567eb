package nn

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// Every epoch visits every row once in minibatches of at most BatchSize; a shuffled loop visits them
// in a seeded order that changes between epochs; Progress numbers the epochs and counts later starts
// in the ETA (the last epoch of this start still has the later starts' three to go).
func TestLoopVisitsEveryRowAndReports(t *testing.T) {
	const n, bs = 23, 5
	var orders [][]int
	var order []int
	var ps []Progress
	l := Loop{Epochs: 3, BatchSize: bs, Shuffle: rand.New(rand.NewPCG(1, 2)), Restart: 2, Restarts: 3, LaterEpochs: 3,
		Progress: func(p Progress) { ps = append(ps, p); orders = append(orders, order); order = nil }}
	res, err := l.Run(context.Background(), n, Steps{Step: func(b []int) (float64, error) {
		if len(b) > bs || len(b) == 0 {
			t.Errorf("a minibatch of %d rows", len(b))
		}
		order = append(order, b...)
		return 1, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	for e, o := range orders {
		s := slices.Sorted(slices.Values(o))
		for i, v := range s {
			if v != i {
				t.Fatalf("epoch %d visited %v", e+1, o)
			}
		}
	}
	if slices.Equal(orders[0], orders[1]) || slices.IsSorted(orders[0]) {
		t.Errorf("a shuffled loop visited %v then %v", orders[0], orders[1])
	}
	if res.EpochsRun != 3 || res.BestEpoch != 3 || res.TrainLoss != 1 || !math.IsNaN(res.ValLoss) {
		t.Errorf("result %+v, want 3 epochs run, the last kept", res)
	}
	last := ps[2]
	if last.Epoch != 3 || last.Epochs != 3 || last.Restart != 2 || last.Restarts != 3 || last.Loss != 1 || !math.IsNaN(last.ValLoss) ||
		last.OverallEpoch() != 6 || last.OverallEpochs() != 9 || !(last.RowsPerSec > 0) || !(last.ETA > 0) {
		t.Errorf("progress %+v", ps)
	}
}

// Early stopping keeps the best validation epoch and stops Patience epochs after it; NaN validation
// losses never improve, and when every one is NaN the last weights are kept.
func TestLoopEarlyStopping(t *testing.T) {
	val := []float64{5, 3, 4, 3, 3.5, 1}
	epoch := 0
	var kept []int
	res, err := Loop{Epochs: 10, BatchSize: 4, Patience: 3}.Run(context.Background(), 8, Steps{
		Step:     func([]int) (float64, error) { return float64(epoch), nil },
		Validate: func() float64 { epoch++; return val[epoch-1] },
		Keep:     func() { kept = append(kept, epoch) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.EpochsRun != 5 || res.BestEpoch != 2 || res.ValLoss != 3 || res.TrainLoss != 1 || !slices.Equal(kept, []int{1, 2}) {
		t.Errorf("result %+v, kept after epochs %v; want 5 run (patience 3 after epoch 2), epoch 2 kept", res, kept)
	}

	kept = nil
	epoch = 0
	res, _ = Loop{Epochs: 4, BatchSize: 8}.Run(context.Background(), 8, Steps{
		Step:     func([]int) (float64, error) { return 1, nil },
		Validate: func() float64 { epoch++; return math.NaN() },
		Keep:     func() { kept = append(kept, epoch) },
	})
	if res.EpochsRun != 4 || res.BestEpoch != 4 || !slices.Equal(kept, []int{4}) {
		t.Errorf("all-NaN validation: result %+v, kept %v; want the last epoch", res, kept)
	}
}

// MayStop is asked when patience runs out, with the epoch, and false grants another Patience epochs:
// a run that patience 2 would end after epoch 3 is refused then and ends after epoch 5, still keeping
// epoch 1.
func TestLoopMayStop(t *testing.T) {
	val := []float64{1, 2, 2, 2, 2, 2, 2}
	epoch := 0
	var asked, kept []int
	res, err := Loop{Epochs: 7, BatchSize: 4, Patience: 2}.Run(context.Background(), 4, Steps{
		Step:     func([]int) (float64, error) { return 0, nil },
		Validate: func() float64 { epoch++; return val[epoch-1] },
		Keep:     func() { kept = append(kept, epoch) },
		MayStop:  func(e int) bool { asked = append(asked, e); return e >= 4 },
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.EpochsRun != 5 || !slices.Equal(asked, []int{3, 5}) || res.BestEpoch != 1 || !slices.Equal(kept, []int{1}) {
		t.Errorf("result %+v, asked after epochs %v, kept %v; want 5 epochs run, asked after 3 and 5, epoch 1 kept", res, asked, kept)
	}
}

// With per-row validation losses the loop keeps the latest epoch not significantly worse than the
// lowest (paired, SelectZ standard errors): a noisy tie goes to the later epoch, a rise shared by every
// row does not, nor does a NaN; patience still counts from the lowest epoch.
func TestLoopKeepsMostTrainedAmongTies(t *testing.T) {
	rows := [][]float64{
		{1, 1, 1, 1},          // the lowest mean, 1
		{0.5, 1.5, 0.7, 1.4},  // +0.025 ± 0.26: kept
		{1.1, 1.1, 1.1, 1.1},  // +0.1 on every row: significant, not kept
		{2, 0, 1, 1.1},        // +0.025 ± 0.41: kept
		{1, 1, math.NaN(), 1}, // NaN: not kept
		{0, 0, 0, 0},          // not reached: patience 4 after epoch 1
	}
	epoch := 0
	var kept []int
	res, err := Loop{Epochs: 10, BatchSize: 4, Patience: 4}.Run(context.Background(), 4, Steps{
		Step:         func([]int) (float64, error) { return float64(epoch), nil },
		ValidateRows: func() []float64 { epoch++; return rows[epoch-1] },
		Keep:         func() { kept = append(kept, epoch) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.EpochsRun != 5 || res.BestEpoch != 4 || res.ValLoss != 1.025 || res.TrainLoss != 3 || !slices.Equal(kept, []int{1, 2, 4}) {
		t.Errorf("result %+v, kept after epochs %v; want 5 run, epochs 1, 2 and 4 kept", res, kept)
	}
}

// A non-finite loss is ErrDiverged naming the epoch; a step's error and cancellation end the loop
// (cancellation with ctx.Err() itself, before the next step).
func TestLoopErrors(t *testing.T) {
	steps := 0
	_, err := Loop{Epochs: 5, BatchSize: 2}.Run(context.Background(), 4, Steps{Step: func([]int) (float64, error) {
		steps++
		if steps == 3 {
			return math.Inf(1), nil
		}
		return 1, nil
	}})
	if !errors.Is(err, ErrDiverged) || err.Error() != "training diverged: loss +Inf in epoch 2 (try a smaller lr)" {
		t.Errorf("diverging loss: %v", err)
	}
	boom := errors.New("boom")
	if _, err := (Loop{Epochs: 1, BatchSize: 2}).Run(context.Background(), 4, Steps{Step: func([]int) (float64, error) { return 0, boom }}); !errors.Is(err, boom) {
		t.Errorf("a step's error: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	steps = 0
	_, err = Loop{Epochs: 5, BatchSize: 1}.Run(ctx, 10, Steps{Step: func([]int) (float64, error) {
		if steps++; steps == 4 {
			cancel()
		}
		return 1, nil
	}})
	if err != context.Canceled || steps != 4 {
		t.Errorf("cancelled after step 4: %v after %d steps", err, steps)
	}
	if _, err := (Loop{Epochs: 1}).Run(context.Background(), 4, Steps{}); err == nil {
		t.Error("a batch size of 0 was accepted")
	}
}
