package dp

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Poisson sampling includes every row with probability q, independently of the others: over 40,000
// draws each row's inclusion count is within 5 standard deviations of 40,000·q, and so are the pairs
// (0, 1) and (n−2, n−1) jointly (q² each).
func TestPoissonSample(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	const n, draws, q = 50, 40000, 0.1
	count := make([]float64, n)
	pairs := [2]float64{}
	var dst []int
	for range draws {
		dst = PoissonSample(r, n, q, dst[:0])
		in := map[int]bool{}
		for i, v := range dst {
			if i > 0 && v <= dst[i-1] {
				t.Fatalf("rows out of order: %v", dst)
			}
			count[v]++
			in[v] = true
		}
		if in[0] && in[1] {
			pairs[0]++
		}
		if in[n-2] && in[n-1] {
			pairs[1]++
		}
	}
	for i, c := range count {
		if sd := math.Sqrt(draws * q * (1 - q)); math.Abs(c-draws*q) > 5*sd {
			t.Errorf("row %d included %v times, want %v ± %.0f", i, c, draws*q, sd)
		}
	}
	for _, c := range pairs {
		if sd := math.Sqrt(draws * q * q * (1 - q*q)); math.Abs(c-draws*q*q) > 5*sd {
			t.Errorf("a pair included together %v times, want %v", c, draws*q*q)
		}
	}
	if got := PoissonSample(r, 7, 1, nil); len(got) != 7 {
		t.Errorf("q = 1: %v", got)
	}
}
