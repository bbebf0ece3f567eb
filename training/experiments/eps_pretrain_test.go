//go:build experiments

package experiments

import (
	"context"
	"math"
	"strconv"
	"testing"

	"github.com/ldpsql/ldpsql/plugins/builtin/pca/pcaenc"
	"github.com/ldpsql/ldpsql/training/datasets"
	"github.com/ldpsql/ldpsql/training/vlm"
)

// TestEpsPretrainRule: the data-collection protocol (protocolAcc) on VLM latents with the learnt training
// scale (no eps_pretrain: the default without eps_target) and with vlm.EpsPretrainFor(ε_x), against PCA
// (l chosen from the data), 3 seeds, at total ε 4 and 8, on standardised WDBC (200 aux / 269 private /
// 100 test) and Fashion-MNIST (2,000 aux / 3,000 private / 1,000 test). It decides whether eps_target
// sets eps_pretrain.
//
//	LDPSQL_DATA=/work/shared/data go test -tags experiments,openblas -run TestEpsPretrainRule -v -timeout 3h ./training/experiments
func TestEpsPretrainRule(t *testing.T) {
	rows, labels := standardisedWDBC()
	epsPretrain(t, "wdbc-std", rows[:200], rows[200:469], rows[469:], labels[200:469], labels[469:], 2)
	tr, _, err := datasets.LoadFashionMNIST("train")
	if err != nil {
		t.Skip(err)
	}
	te, _, _ := datasets.LoadFashionMNIST("test")
	epsPretrain(t, "fmnist", tr.Pixels[:2000], tr.Pixels[2000:5000], te.Pixels[:1000], tr.Labels[2000:5000], te.Labels[:1000], 10)
}

func epsPretrain(t *testing.T, name string, aux, priv, test [][]float32, yPriv, yTest []int, k int) {
	pm, err := pcaenc.FitRows(pcaenc.Params{D: 8}, aux)
	if err != nil {
		t.Fatal(err)
	}
	encode := func(enc func([][]float32) ([][]float32, error)) (za, zp, zt [][]float32) {
		var errs [3]error
		za, errs[0] = enc(aux)
		zp, errs[1] = enc(priv)
		zt, errs[2] = enc(test)
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		return za, zp, zt
	}
	pa, pp, pt := encode(pm.Encode)
	train := func(seed uint64, epsPre float64) *vlm.Model {
		cfg := vlm.DefaultConfig()
		cfg.Seed, cfg.EpsPretrain = seed, epsPre
		m, err := vlm.Train(context.Background(), cfg, aux, nil)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, eps := range []float64{4, 8} {
		var learnt, rule, pca []float64
		for seed := uint64(1); seed <= 3; seed++ {
			la, lp, lt := encode(train(seed, 0).Encode)
			learnt = append(learnt, protocolAcc(t, la, lp, lt, yPriv, yTest, k, vlm.DefaultConfig().L, eps, seed))
			ra, rp, rt := encode(train(seed, vlm.EpsPretrainFor(0.7*eps)).Encode)
			rule = append(rule, protocolAcc(t, ra, rp, rt, yPriv, yTest, k, vlm.DefaultConfig().L, eps, seed))
			pca = append(pca, protocolAcc(t, pa, pp, pt, yPriv, yTest, k, pm.L, eps, seed))
		}
		ms := func(x []float64) string { m, s := meanStd(x); return fmtPct(m, s) }
		t.Logf("%s ε %g: VLM learnt scale %s, VLM eps_pretrain %g %s, PCA (l %.3g) %s", name, eps, ms(learnt), vlm.EpsPretrainFor(0.7*eps), ms(rule), pm.L, ms(pca))
	}
}

// meanStd is the mean and sample standard deviation of x.
func meanStd(x []float64) (mean, std float64) {
	for _, v := range x {
		mean += v / float64(len(x))
	}
	for _, v := range x {
		std += (v - mean) * (v - mean) / float64(len(x)-1)
	}
	return mean, math.Sqrt(std)
}

func fmtPct(mean, std float64) string {
	return strconv.FormatFloat(100*mean, 'f', 1, 64) + " ± " + strconv.FormatFloat(100*std, 'f', 1, 64)
}
