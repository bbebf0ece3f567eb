package nn

import "time"

// Progress is what a training run reports after every epoch (or, for an EM model, every iteration),
// and what a training job shows in ldp_jobs.
type Progress struct {
	// Epoch is the epoch just finished (1-based) of at most Epochs, in start Restart (1-based) of
	// Restarts (both 1 for a model trained from one start).
	Epoch, Epochs     int
	Restart, Restarts int
	// Loss is the mean training loss over the epoch's minibatches, per row, as the parameters moved
	// (a negative log-likelihood or −ELBO, in nats).
	Loss float64
	// ValLoss is the mean validation loss after the epoch, NaN without a validation split.
	ValLoss float64
	// RowsPerSec is the training rows per second of the epoch's steps (0 when not measured).
	RowsPerSec float64
	// ETA is the time the remaining epochs, of this start and of the starts still to come, would take
	// at the mean epoch time so far; early stopping may end sooner.
	ETA time.Duration
}

// OverallEpoch and OverallEpochs number the epoch across restarts: what a job's progress shows.
func (p Progress) OverallEpoch() int  { return max(p.Restart-1, 0)*p.Epochs + p.Epoch }
func (p Progress) OverallEpochs() int { return max(p.Restarts, 1) * p.Epochs }
