//go:build experiments

package experiments

import (
	"context"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/ldpsql/ldpsql/plugins/builtin/pca/pcaenc"
	"github.com/ldpsql/ldpsql/training/classifier"
	"github.com/ldpsql/ldpsql/training/datasets"
)

func l1(v []float32) float64 {
	s := 0.0
	for _, x := range v {
		s += math.Abs(float64(x))
	}
	return s
}

func clip(v []float32, l float64) []float32 {
	out := append([]float32(nil), v...)
	if n := l1(v); n > l {
		for i := range out {
			out[i] = float32(float64(out[i]) * l / n)
		}
	}
	return out
}

func lap(r *rand.Rand, b float64) float64 {
	u := r.Float64() - 0.5
	return -b * math.Copysign(1, u) * math.Log(1-2*math.Abs(u))
}

func run(t *testing.T, name string, aux, priv, test [][]float32, yPriv, yTest []int, k int) {
	m, err := pcaenc.FitRows(pcaenc.Params{D: 8, L: 1e9}, aux)
	if err != nil {
		t.Fatal(err)
	}
	za, _ := m.Encode(aux)
	zp, _ := m.Encode(priv)
	zt, _ := m.Encode(test)
	norms := make([]float64, len(za))
	for i, z := range za {
		norms[i] = l1(z)
	}
	sort.Float64s(norms)
	q := func(p float64) float64 { return norms[int(p*float64(len(norms)-1))] }
	for _, eps := range []float64{4, 8} {
		for _, lv := range []struct {
			n string
			l float64
		}{{"q00", q(0) * 0.5}, {"q05", q(0.05)}, {"q10", q(0.1)}, {"q25", q(0.25)}, {"q50", q(0.5)}, {"q90", q(0.9)}, {"q99", q(0.99)}, {"l10", 10}} {
			var accs []float64
			for seed := uint64(1); seed <= 2; seed++ {
				accs = append(accs, protocolAcc(t, za, zp, zt, yPriv, yTest, k, lv.l, eps, seed))
			}
			t.Logf("%s eps %g %s (l=%.3g): acc %.3f %.3f", name, eps, lv.n, lv.l, accs[0], accs[1])
		}
	}
}

// TestPCALQuantile: clean test accuracy of the marginal classifier on PCA (d = 8) latents clipped at
// several quantiles of the encodings' l1 norms, privatised at eps = 4 and 8 (lambda 0.7), 2 seeds. It
// chose pcaenc.AutoLQuantile.
func TestPCALQuantile(t *testing.T) {
	rows, labels := standardisedWDBC()
	run(t, "wdbc-std", rows[:200], rows[200:469], rows[469:], labels[200:469], labels[469:], 2)
	tr, _, err := datasets.LoadFashionMNIST("train")
	if err != nil {
		t.Skip(err)
	}
	te, _, _ := datasets.LoadFashionMNIST("test")
	run(t, "fmnist", tr.Pixels[:2000], tr.Pixels[2000:5000], te.Pixels[:1000], tr.Labels[2000:5000], te.Labels[:1000], 10)
}

// protocolAcc is the data-collection protocol on latents: aux (za), private (zp) and test (zt) encodings
// clipped to the l1 ball of radius l; the private ones privatised at eps with lambda 0.7 (Laplace 2l/eps_x
// on the latent, k-RR at eps_y on the label); the marginal classifier (one restart) trained on them and
// scored on the clean test latents.
func protocolAcc(t *testing.T, za, zp, zt [][]float32, yPriv, yTest []int, k int, l, eps float64, seed uint64) float64 {
	ex, ey := 0.7*eps, 0.3*eps
	r := rand.New(rand.NewPCG(seed, 7))
	b := 2 * l / ex
	auxC := make([][]float32, len(za))
	for i := range za {
		auxC[i] = clip(za[i], l)
	}
	noisy := make([][]float32, len(zp))
	ys := make([]int, len(zp))
	keep := math.Exp(ey) / (math.Exp(ey) + float64(k-1))
	for i := range zp {
		c := clip(zp[i], l)
		for j := range c {
			c[j] += float32(lap(r, b))
		}
		noisy[i] = c
		ys[i] = yPriv[i]
		if r.Float64() >= keep {
			o := r.IntN(k - 1)
			if o >= ys[i] {
				o++
			}
			ys[i] = o
		}
	}
	nv := len(noisy) / 10
	R := classifier.KRRMatrix(ey, k)
	cfg := classifier.DefaultConfig()
	cfg.Seed = seed
	cfg.Restarts = 1
	mod, err := classifier.TrainMarginal(context.Background(), cfg,
		classifier.MarginalData{Aux: auxC, Noisy: noisy[nv:], Labels: ys[nv:], Scale: b, R: R},
		classifier.MarginalData{Noisy: noisy[:nv], Labels: ys[:nv]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	testC := make([][]float32, len(zt))
	for i := range zt {
		testC[i] = clip(zt[i], l)
	}
	return mod.Accuracy(testC, yTest)
}
