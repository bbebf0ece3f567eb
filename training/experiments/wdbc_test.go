//go:build experiments

package experiments

import (
	"math"
	"math/rand/v2"

	"github.com/ldpsql/ldpsql/training/datasets"
)

// standardisedWDBC is WDBC with every feature standardised over all 569 rows, in a fixed random order
// (the split every experiment here takes: 200 auxiliary, 269 private, 100 test).
func standardisedWDBC() (rows [][]float32, labels []int) {
	w, _ := datasets.LoadWDBC()
	n, d := len(w.Features), len(w.Features[0])
	mu, sd := make([]float64, d), make([]float64, d)
	for _, f := range w.Features {
		for j, v := range f {
			mu[j] += v / float64(n)
		}
	}
	for _, f := range w.Features {
		for j, v := range f {
			sd[j] += (v - mu[j]) * (v - mu[j]) / float64(n)
		}
	}
	rows = make([][]float32, n)
	labels = make([]int, n)
	for i, p := range rand.New(rand.NewPCG(3, 3)).Perm(n) {
		rows[i] = make([]float32, d)
		for j, v := range w.Features[p] {
			rows[i][j] = float32((v - mu[j]) / math.Sqrt(sd[j]))
		}
		labels[i] = w.Labels[p]
	}
	return rows, labels
}
