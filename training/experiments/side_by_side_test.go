//go:build experiments

package experiments

import (
	"context"
	"math"
	"testing"

	"github.com/ldpsql/ldpsql/plugins/builtin/pca/pcaenc"
	"github.com/ldpsql/ldpsql/training/taskaware"
	"github.com/ldpsql/ldpsql/training/vlm"
)

// TestSideBySide: task-aware (Algorithm 1, linear and mlp encoders, Z = 3), VLM (eps_pretrain from
// eps_target), PCA (d = 8, l from the data) and the identity box with Laplace, all through the
// data-collection protocol (protocolAcc: the marginal classifier trained on the privatised rows, scored
// on the clean test rows), on standardised WDBC (200 labelled aux / 269 private / 100 test, the split of
// TestEpsPretrainRule), total ε ∈ {4, 8, 20} with λ = 0.7, 3 seeds. The task-aware encoders are trained
// at ε_x = 0.7ε for 500 epochs (of the paper's 2000) and use the aux rows' labels; the others do not.
//
//	LDPSQL_DATA=/work/shared/data go test -tags experiments,openblas -run TestSideBySide -v -timeout 3h ./training/experiments
func TestSideBySide(t *testing.T) {
	rows, labels := standardisedWDBC()
	d := len(rows[0])
	aux, priv, test := rows[:200], rows[200:469], rows[469:]
	yAux, yPriv, yTest := labels[:200], labels[200:469], labels[469:]
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
	// The identity box, centred: inside the ℓ1 ball of radius Σ widths / 2, whose Laplace scale
	// 2·radius/ε_x is the box randomiser's.
	lo, hi := make([]float64, d), make([]float64, d)
	for j := range d {
		lo[j], hi[j] = math.Inf(1), math.Inf(-1)
		for _, r := range aux {
			lo[j], hi[j] = min(lo[j], float64(r[j])), max(hi[j], float64(r[j]))
		}
	}
	boxRadius := 0.0
	for j := range d {
		boxRadius += (hi[j] - lo[j]) / 2
	}
	identity := func(rs [][]float32) ([][]float32, error) {
		out := make([][]float32, len(rs))
		for i, r := range rs {
			out[i] = make([]float32, d)
			for j, v := range r {
				out[i][j] = float32(min(hi[j], max(lo[j], float64(v))) - (lo[j]+hi[j])/2)
			}
		}
		return out, nil
	}
	pm, err := pcaenc.FitRows(pcaenc.Params{D: 8}, aux)
	if err != nil {
		t.Fatal(err)
	}
	yAuxF := make([]float64, len(yAux))
	for i, y := range yAux {
		yAuxF[i] = float64(y)
	}
	ms := func(x []float64) string { m, s := meanStd(x); return fmtPct(m, s) }
	for _, eps := range []float64{4, 8, 20} {
		res := map[string][]float64{}
		for seed := uint64(1); seed <= 3; seed++ {
			for _, enc := range []string{taskaware.EncoderLinear, taskaware.EncoderMLP} {
				c := taskaware.DefaultTrainConfig()
				c.Label, c.Eps, c.Encoder, c.Epochs, c.Seed = "y", 0.7*eps, enc, 500, seed
				m, err := taskaware.Train(context.Background(), c, aux, yAuxF, nil)
				if err != nil {
					t.Fatal(err)
				}
				za, zp, zt := encode(m.Encode)
				res["task-aware "+enc] = append(res["task-aware "+enc], protocolAcc(t, za, zp, zt, yPriv, yTest, 2, m.Radius, eps, seed))
			}
			cfg := vlm.DefaultConfig()
			cfg.Seed, cfg.EpsPretrain = seed, vlm.EpsPretrainFor(0.7*eps)
			vm, err := vlm.Train(context.Background(), cfg, aux, nil)
			if err != nil {
				t.Fatal(err)
			}
			za, zp, zt := encode(vm.Encode)
			res["VLM"] = append(res["VLM"], protocolAcc(t, za, zp, zt, yPriv, yTest, 2, cfg.L, eps, seed))
			za, zp, zt = encode(pm.Encode)
			res["PCA"] = append(res["PCA"], protocolAcc(t, za, zp, zt, yPriv, yTest, 2, pm.L, eps, seed))
			za, zp, zt = encode(identity)
			res["identity + Laplace"] = append(res["identity + Laplace"], protocolAcc(t, za, zp, zt, yPriv, yTest, 2, boxRadius, eps, seed))
		}
		t.Logf("ε %g: task-aware linear %s | task-aware mlp %s | VLM %s | PCA %s | identity + Laplace %s", eps,
			ms(res["task-aware linear"]), ms(res["task-aware mlp"]), ms(res["VLM"]), ms(res["PCA"]), ms(res["identity + Laplace"]))
	}
}
