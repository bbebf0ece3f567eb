package classifier

import (
	"math"
	"slices"

	"github.com/ldpsql/ldpsql/training/nn"
)

// Objectives recorded in TrainStats.Objective.
const (
	ObjectiveMarginal = "marginal"
	ObjectiveForward  = "forward"
)

// Model is a trained classifier: input standardisation, the MLP, and what
// training recorded. It is safe for concurrent use.
type Model struct {
	nt    *net
	std   nn.Standardiser
	stats TrainStats
}

// InputDim is the dimension of the rows Predict accepts.
func (m *Model) InputDim() int { return m.nt.inDim() }

// Classes is K.
func (m *Model) Classes() int { return m.nt.classes() }

// Hidden returns the hidden layer sizes (empty for logistic regression).
func (m *Model) Hidden() []int { return slices.Clone(m.nt.sizes[1 : len(m.nt.sizes)-1]) }

// Stats describes the training run that produced the model.
func (m *Model) Stats() TrainStats { return m.stats }

// usable reports whether x has the input dimension and only finite values.
func (m *Model) usable(x []float32) bool {
	if len(x) != m.InputDim() {
		return false
	}
	for _, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return false
		}
	}
	return true
}

// Probabilities returns softmax_ψ(x) (K values summing to 1), or nil when x
// has the wrong length or a non-finite value.
func (m *Model) Probabilities(x []float32) []float64 {
	if !m.usable(x) {
		return nil
	}
	lg := m.logits([][]float32{x})
	k := m.Classes()
	logp, p := make([]float64, k), make([]float64, k)
	colSoftmax64(lg, 1, 0, logp, p)
	return p
}

// Predict returns the most probable class of x (the lowest index among
// ties), or −1 when x has the wrong length or a non-finite value.
func (m *Model) Predict(x []float32) int {
	if !m.usable(x) {
		return -1
	}
	return argmaxCol(m.logits([][]float32{x}), 1, 0, m.Classes())
}

func argmaxCol(lg []float32, cols, c, k int) int {
	best, bv := 0, lg[c]
	for y := 1; y < k; y++ {
		if v := lg[y*cols+c]; v > bv {
			best, bv = y, v
		}
	}
	return best
}

// predictBlock is the number of rows per block of PredictBatch.
const predictBlock = 256

// logits runs the MLP on rows (all usable, at most predictBlock) and
// returns the K × len(rows) logits block.
func (m *Model) logits(rows [][]float32) []float32 {
	cols := len(rows)
	x := make([]float32, m.InputDim()*cols)
	block(m.std, x, rows, nil, 0, cols)
	ab := m.nt.newActs(cols)
	m.nt.forward(x, cols, ab)
	return ab.logits()
}

// Accuracy is the share of rows of x whose predicted class is y's (a row PredictBatch cannot classify,
// −1, counts as wrong); NaN for no rows.
func (m *Model) Accuracy(x [][]float32, y []int) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	ok := 0
	for i, p := range m.PredictBatch(x) {
		if p == y[i] {
			ok++
		}
	}
	return float64(ok) / float64(len(x))
}

// PredictBatch is Predict for every row, in parallel over blocks of rows;
// the result of a row does not depend on the other rows.
func (m *Model) PredictBatch(x [][]float32) []int {
	out := make([]int, len(x))
	nblk := (len(x) + predictBlock - 1) / predictBlock
	k := m.Classes()
	nn.ParallelTasks(nn.Workers(), nblk, func(_, bi int) {
		lo := bi * predictBlock
		hi := min(len(x), lo+predictBlock)
		rows := make([][]float32, 0, hi-lo)
		pos := make([]int, 0, hi-lo)
		for i := lo; i < hi; i++ {
			if m.usable(x[i]) {
				rows = append(rows, x[i])
				pos = append(pos, i)
			} else {
				out[i] = -1
			}
		}
		if len(rows) == 0 {
			return
		}
		lg := m.logits(rows)
		for c, i := range pos {
			out[i] = argmaxCol(lg, len(rows), c, k)
		}
	})
	return out
}
