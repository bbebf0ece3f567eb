//go:build experiments

package experiments

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ldpsql/ldpsql/plugins/builtin/pca/pcaenc"
	"github.com/ldpsql/ldpsql/training/classifier"
	"github.com/ldpsql/ldpsql/training/datasets"
	"github.com/ldpsql/ldpsql/training/vlm"
)

func cleanAcc(t *testing.T, ztr [][]float32, ytr []int, zte [][]float32, yte []int, k int, seed uint64) float64 {
	cfg := classifier.DefaultConfig()
	cfg.Seed = seed
	nv := len(ztr) / 10
	R := classifier.KRRMatrix(math.Inf(1), k)
	m, err := classifier.TrainForward(context.Background(), cfg, classifier.ForwardData{X: ztr[nv:], Labels: ytr[nv:], R: R}, classifier.ForwardData{X: ztr[:nv], Labels: ytr[:nv]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := m.PredictBatch(zte)
	ok := 0
	for i := range p {
		if p[i] == yte[i] {
			ok++
		}
	}
	return float64(ok) / float64(len(p))
}

func compare(t *testing.T, name string, tr, te [][]float32, ytr, yte []int, k int) {
	pm, _ := pcaenc.FitRows(pcaenc.Params{D: 8}, tr)
	ptr, _ := pm.Encode(tr)
	pte, _ := pm.Encode(te)
	type variant struct {
		name   string
		epochs int   // 0: Config.Resolve's rule
		hidden []int // nil: Config.Resolve's rule
	}
	for _, v := range []variant{{"old fixed defaults", 20, []int{400, 150, 50}}, {"epochs rule only", 0, []int{400, 150, 50}}, {"both rules", 0, nil}} {
		var accs []float64
		for seed := uint64(1); seed <= 3; seed++ {
			cfg := vlm.DefaultConfig()
			cfg.Seed, cfg.Epochs, cfg.Hidden = seed, v.epochs, v.hidden
			vm, err := vlm.Train(context.Background(), cfg, tr, nil)
			if err != nil {
				t.Fatal(err)
			}
			vtr, _ := vm.Encode(tr)
			vte, _ := vm.Encode(te)
			accs = append(accs, cleanAcc(t, vtr, ytr, vte, yte, k, seed))
		}
		t.Logf("%s %s (epochs %d): vlm %.3f %.3f %.3f; pca %.3f", name, v.name, v.epochs, accs[0], accs[1], accs[2], cleanAcc(t, ptr, ytr, pte, yte, k, 1))
	}
}

// TestVLMDefaults: clean classifier accuracy on 8-d latents of PCA (l chosen from the data) and of VLMs
// trained with the old fixed defaults (20 epochs, {400, 150, 50}) and with Config.Resolve's rules, 3
// seeds, on raw WDBC (400 train / 169 test) and 1,000 Fashion-MNIST images (2,000 test).
func TestVLMDefaults(t *testing.T) {
	w, _ := datasets.LoadWDBC()
	n := len(w.Features)
	perm := rand.New(rand.NewPCG(3, 3)).Perm(n)
	rows := make([][]float32, n)
	ys := make([]int, n)
	for i, p := range perm {
		rows[i] = make([]float32, len(w.Features[p]))
		for j, v := range w.Features[p] {
			rows[i][j] = float32(v)
		}
		ys[i] = w.Labels[p]
	}
	compare(t, "wdbc-raw", rows[:400], rows[400:], ys[:400], ys[400:], 2)
	tr, _, err := datasets.LoadFashionMNIST("train")
	if err != nil {
		t.Skip(err)
	}
	te, _, _ := datasets.LoadFashionMNIST("test")
	compare(t, "fmnist-1000", tr.Pixels[:1000], te.Pixels[:2000], tr.Labels[:1000], te.Labels[:2000], 10)
}
