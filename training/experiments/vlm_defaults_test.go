//go:build experiments

package experiments

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/plugins/builtin/pca/pcaenc"
	"github.com/ldpsql/ldpsql/training/classifier"
	"github.com/ldpsql/ldpsql/training/datasets"
	"github.com/ldpsql/ldpsql/training/diagnostics"
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
	return m.Accuracy(zte, yte)
}

// diagnose runs the DBA's privacy-free diagnostics (package diagnostics, what ldp_evaluate_mechanism and
// every training job run) on the training rows at ε_x = 0.7 · 8 and returns whether they flag collapse
// and how many of the d latent dimensions are active.
func diagnose(t *testing.T, rows [][]float32, l float64, encode, decode func([][]float32) ([][]float32, error)) (bool, int) {
	codec := diagnostics.Codec{
		Encode: func(_ context.Context, x [][]float32) ([][]float32, error) { return encode(x) },
		Decode: func(_ context.Context, z [][]float32) ([][]float32, error) { return decode(z) },
	}
	rep, err := diagnostics.Evaluate(context.Background(), rows, codec, diagnostics.Config{Set: mechanisms.L1Ball{D: 8, Radius: l}, Eps: 5.6})
	if err != nil {
		t.Fatal(err)
	}
	return rep.Collapsed, rep.ActiveDims
}

// compare logs, per encoder, the clean-latent classifier accuracy over 3 seeds (mean ± sample std) and
// the diagnostics' verdict for each trained model, as one markdown row each.
func compare(t *testing.T, name string, tr, te [][]float32, ytr, yte []int, k int) {
	pm, err := pcaenc.FitRows(pcaenc.Params{D: 8}, tr)
	if err != nil {
		t.Fatal(err)
	}
	ptr, _ := pm.Encode(tr)
	pte, _ := pm.Encode(te)
	var paccs []float64
	for seed := uint64(1); seed <= 3; seed++ {
		paccs = append(paccs, cleanAcc(t, ptr, ytr, pte, yte, k, seed))
	}
	pcol, pact := diagnose(t, tr, pm.L, pm.Encode, pm.Decode)
	pm0, ps0 := meanStd(paccs)
	t.Logf("| %s | PCA (l %.3g from the data) | %.1f ± %.1f | %v | %d |", name, pm.L, 100*pm0, 100*ps0, pcol, pact)
	type variant struct {
		name   string
		epochs int   // 0: Config.Resolve's rule
		hidden []int // nil: Config.Resolve's rule
	}
	for _, v := range []variant{{"VLM, the old fixed defaults (20 epochs, 400/150/50)", 20, []int{400, 150, 50}}, {"VLM, today's defaults (Config.Resolve)", 0, nil}} {
		var accs []float64
		var flags []string
		for seed := uint64(1); seed <= 3; seed++ {
			cfg := vlm.DefaultConfig()
			cfg.Seed, cfg.Epochs, cfg.Hidden = seed, v.epochs, v.hidden
			vm, err := vlm.Train(context.Background(), cfg, tr, nil)
			if err != nil {
				t.Fatal(err)
			}
			vtr, _ := vm.Encode(tr)
			vte, _ := vm.Encode(te)
			acc := cleanAcc(t, vtr, ytr, vte, yte, k, seed)
			accs = append(accs, acc)
			col, act := diagnose(t, tr, cfg.L, vm.Encode, vm.Decode)
			flags = append(flags, fmt.Sprintf("%.1f %v %d", 100*acc, col, act))
		}
		m, s := meanStd(accs)
		t.Logf("| %s | %s | %.1f ± %.1f | per seed (accuracy, collapsed, active dims): %s |", name, v.name, 100*m, 100*s, strings.Join(flags, "; "))
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
