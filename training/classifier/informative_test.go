package classifier

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// labelPrior recovers class frequencies from labels released by K-RR.
func TestLabelPrior(t *testing.T) {
	const k, n, eps = 4, 40_000, 1.0
	want := []float64{0.55, 0.25, 0.15, 0.05}
	r := rand.New(rand.NewPCG(1, 2))
	labels := make([]int, n)
	for i := range labels {
		u, y := r.Float64(), 0
		for y < k-1 && u >= want[y] {
			u -= want[y]
			y++
		}
		labels[i] = krr(r, y, k, eps)
	}
	got := labelPrior(labels, flatChannel(KRRMatrix(eps, k)), k)
	// The standard error of each estimate is below 0.01 here (f's binomial error times R⁻¹'s
	// largest entry, about 3): 0.04 is four of them.
	for y := range want {
		if math.Abs(got[y]-want[y]) > 0.04 {
			t.Fatalf("π̂ = %v, want %v", got, want)
		}
	}
}

// A classifier trained on releases that carry no information about the label (latent noise far
// larger than the class structure) is flagged; one trained on informative releases is not.
func TestUninformativeClassifierIsFlagged(t *testing.T) {
	if testing.Short() {
		t.Skip("trains four classifiers")
	}
	k, d := 10, 8
	for _, c := range []struct {
		name       string
		epsX, epsY float64
		scale      float64
		flagged    bool
	}{
		{"no information", 1.4, 0.6, 1.0, true},
		{"informative", 40, 8, 1.5, false},
	} {
		for seed := uint64(1); seed <= 2; seed++ {
			spec := synthSpec{K: k, D: d, M: 2000, N: 2000, NVal: 400, T: 10, Means: randomMeans(seed+10, k, d, c.scale), Sigma: 0.3,
				L: 7.5, EpsX: c.epsX, EpsY: c.epsY, Seed: seed}
			data := spec.make()
			cfg := DefaultConfig()
			cfg.Seed, cfg.Epochs = seed, 30
			m, err := TrainMarginal(context.Background(), cfg, data.train, data.val, nil)
			if err != nil {
				t.Fatal(err)
			}
			w := m.Stats().Warning
			if flagged := w != ""; flagged != c.flagged {
				t.Errorf("%s, seed %d: warning %q, want flagged %v", c.name, seed, w, c.flagged)
			}
			if c.flagged && !strings.Contains(w, "no better than predicting the class frequencies") {
				t.Errorf("%s, seed %d: warning %q", c.name, seed, w)
			}
		}
	}
}
