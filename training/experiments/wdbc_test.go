//go:build experiments

package experiments

import (
	"math/rand/v2"

	"github.com/ldpsql/ldpsql/training/datasets"
)

// standardisedWDBC is WDBC with every feature standardised over all 569 rows, in a fixed random order
// (the split every experiment here takes: 200 auxiliary, 269 private, 100 test).
func standardisedWDBC() (rows [][]float32, labels []int) {
	w, _ := datasets.LoadWDBC()
	order := rand.New(rand.NewPCG(3, 3)).Perm(len(w.Labels))
	labels = make([]int, len(order))
	for i, p := range order {
		labels[i] = w.Labels[p]
	}
	return w.StandardisedRows(order), labels
}
