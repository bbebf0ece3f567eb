package diagnostics

import (
	"context"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/ldpsql/ldpsql/mechanisms"
)

// lowRank returns n rows of dim features: k orthonormal directions (the first k coordinate axes after a
// fixed rotation-free embedding: e_0..e_{k-1}) with standard deviation sd, plus noise of standard
// deviation 0.1 on every feature, around a mean of 5.
func lowRank(n, dim, k int, sd float64, seed uint64) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	rows := make([][]float32, n)
	for i := range rows {
		r := make([]float32, dim)
		for j := range r {
			v := 5 + 0.1*rng.NormFloat64()
			if j < k {
				v += sd * rng.NormFloat64()
			}
			r[j] = float32(v)
		}
		rows[i] = r
	}
	return rows
}

// projection is an exact "PCA" of lowRank data: z = the first k features minus 5, decoded by putting
// them back and every other feature at 5. With a ball radius far above the latents' norms, nothing is
// clipped.
func projection(k int, dim int) Codec {
	return Codec{
		Encode: func(_ context.Context, rows [][]float32) ([][]float32, error) {
			out := make([][]float32, len(rows))
			for i, r := range rows {
				z := make([]float32, k)
				for j := range z {
					z[j] = r[j] - 5
				}
				out[i] = z
			}
			return out, nil
		},
		Decode: func(_ context.Context, latents [][]float32) ([][]float32, error) {
			out := make([][]float32, len(latents))
			for i, z := range latents {
				x := make([]float32, dim)
				for j := range x {
					x[j] = 5
				}
				for j, v := range z {
					x[j] += v
				}
				out[i] = x
			}
			return out, nil
		},
	}
}

func near(t *testing.T, what string, got, want, rel float64) {
	t.Helper()
	if math.Abs(got-want) > rel*math.Abs(want) {
		t.Errorf("%s = %.4g, want %.4g (±%.0f%%)", what, got, want, 100*rel)
	}
}

// A good encoder of data with 3 real directions of variance 100: all 3 dimensions active, nothing
// clipped, the clean reconstruction leaves only the small noise, and at eps = 30 (Laplace b = 2·60/30
// = 4, noise variance 32 per dimension) the privatised reconstruction error is (3·32 + 7·0.01)/10 per
// feature against the mean predictor's (3·100 + 10·0.01)/10.
func TestGoodEncoderIsNotFlagged(t *testing.T) {
	const n, dim, k = 2000, 10, 3
	rows := lowRank(n, dim, k, 10, 1)
	rep, err := Evaluate(context.Background(), rows, projection(k, dim), Config{Set: mechanisms.L1Ball{D: k, Radius: 60}, Eps: 30})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Collapsed || len(rep.Warnings) != 0 {
		t.Errorf("a good encoder is flagged: %v", rep.Warnings)
	}
	if rep.ActiveDims != 3 || rep.ActiveDimsAtEps != 3 {
		t.Errorf("active dims %d, at eps %d; want 3, 3 (variances %v)", rep.ActiveDims, rep.ActiveDimsAtEps, rep.LatentVariance)
	}
	for j, v := range rep.LatentVariance {
		near(t, "latent variance", v, 100, 0.1)
		if rep.NoiseVariance[j] != 32 {
			t.Errorf("noise variance %v, want 2(2l/eps)² = 32", rep.NoiseVariance[j])
		}
	}
	if rep.ClippedShare > 0.01 {
		t.Errorf("clipped share %v, want ~0 (radius 60, norms ~24)", rep.ClippedShare)
	}
	if rep.HoldoutRows != 400 || rep.DrawsPerRow != 10 || rep.Rows != n {
		t.Errorf("split: %d rows, %d held out, %d draws each; want 2000, 400, 10", rep.Rows, rep.HoldoutRows, rep.DrawsPerRow)
	}
	near(t, "mse_mean", *rep.MSEMean, (3*100+10*0.01)/10.0, 0.1)
	near(t, "mse_clean", *rep.MSEClean, 7*0.01/10.0, 0.15)
	near(t, "mse_private", *rep.MSEPrivate, (3*32+7*0.01)/10.0, 0.05)
	near(t, "private_vs_mean", *rep.PrivateVsMean, 9.6/30, 0.12)
	// The bound applies (Laplace, ℓ1 ball, d = 3 ≥ K/2 = 1): K = 2 gives 1 − e^{−ε/2}/2.
	if rep.AccuracyBound == nil || math.Abs(*rep.AccuracyBound-(1-math.Exp(-15)/2)) > 1e-9 {
		t.Errorf("accuracy bound %v (%s)", rep.AccuracyBound, rep.AccuracyBoundNote)
	}
	// The same seed gives the same numbers; another seed other noise.
	again, _ := Evaluate(context.Background(), rows, projection(k, dim), Config{Set: mechanisms.L1Ball{D: k, Radius: 60}, Eps: 30})
	if !reflect.DeepEqual(rep, again) {
		t.Error("two evaluations with the same seed differ")
	}
	other, _ := Evaluate(context.Background(), rows, projection(k, dim), Config{Set: mechanisms.L1Ball{D: k, Radius: 60}, Eps: 30, Seed: 2})
	if *other.MSEPrivate == *rep.MSEPrivate {
		t.Error("another seed gives the same privatised error")
	}
}

// The same good encoder at eps = 1 (noise variance 2·120² per dimension): the privatised reconstruction
// is far worse than the mean, which is a note, neither collapse nor a warning; no dimension survives the
// noise.
func TestPrivateWorseThanMeanWarns(t *testing.T) {
	rows := lowRank(1000, 10, 3, 10, 1)
	rep, err := Evaluate(context.Background(), rows, projection(3, 10), Config{Set: mechanisms.L1Ball{D: 3, Radius: 60}, Eps: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Collapsed {
		t.Errorf("flagged as collapsed: %v", rep.Warnings)
	}
	if len(rep.Warnings) != 0 || len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "hardly better than the mean") {
		t.Errorf("warnings %q, notes %q; want no warning and the privatised-reconstruction note", rep.Warnings, rep.Notes)
	}
	if rep.ActiveDims != 3 || rep.ActiveDimsAtEps != 0 {
		t.Errorf("active %d, at eps %d; want 3, 0", rep.ActiveDims, rep.ActiveDimsAtEps)
	}
	near(t, "mse_private", *rep.MSEPrivate, (3*2*120*120+7*0.01)/10.0, 0.05)
}

// A collapsed encoder: every row encodes to (nearly) the same point, and the decoder returns the data's
// mean. No dimension is active, and the clean reconstruction is no better than the mean.
func TestConstantEncoderIsFlagged(t *testing.T) {
	rows := lowRank(1000, 10, 3, 10, 1)
	codec := Codec{
		Encode: func(_ context.Context, rows [][]float32) ([][]float32, error) {
			out := make([][]float32, len(rows))
			for i := range out {
				out[i] = []float32{0.5, -0.25, 0, 0}
			}
			return out, nil
		},
		Decode: func(_ context.Context, latents [][]float32) ([][]float32, error) {
			return projection(0, 10).Decode(context.Background(), make([][]float32, len(latents))) // 5 everywhere
		},
	}
	rep, err := Evaluate(context.Background(), rows, codec, Config{Set: mechanisms.L1Ball{D: 4, Radius: 10}, Eps: 4})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Collapsed || rep.ActiveDims != 0 || rep.ActiveDimsAtEps != 0 {
		t.Fatalf("constant encoder: collapsed %v, active %d, at eps %d", rep.Collapsed, rep.ActiveDims, rep.ActiveDimsAtEps)
	}
	joined := strings.Join(append(rep.Warnings, rep.Notes...), "\n")
	for _, want := range []string{"only 0 of 4", "clean reconstruction", "privatised reconstruction"} {
		if !strings.Contains(joined, want) {
			t.Errorf("warnings lack %q:\n%s", want, joined)
		}
	}
	near(t, "norm_q50", rep.NormQ50, 0.075, 1e-6)
}

// A one-dimensional latent in d = 4: one active dimension of four is collapse, though the
// reconstruction is fine.
func TestOneDimensionalLatentIsFlagged(t *testing.T) {
	rows := lowRank(1000, 10, 3, 10, 1)
	inner := projection(3, 10)
	codec := Codec{
		Encode: func(ctx context.Context, rows [][]float32) ([][]float32, error) {
			z, _ := inner.Encode(ctx, rows)
			for i := range z {
				z[i] = []float32{z[i][0], 1e-4 * z[i][1], 0, 0}
			}
			return z, nil
		},
		Decode: func(ctx context.Context, latents [][]float32) ([][]float32, error) {
			return inner.Decode(ctx, latents)
		},
	}
	rep, err := Evaluate(context.Background(), rows, codec, Config{Set: mechanisms.L1Ball{D: 4, Radius: 60}, Eps: 30})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Collapsed || rep.ActiveDims != 1 || !strings.Contains(rep.Warnings[0], "only 1 of 4") {
		t.Errorf("one-dimensional latent: collapsed %v, active %d, warnings %q", rep.Collapsed, rep.ActiveDims, rep.Warnings)
	}
}

// Clipping and positions in an ℓ1 ball: half the rows encode to norm 2l (clipped to the boundary), the
// other half to norm l/2.
func TestClippedShareAndNorms(t *testing.T) {
	rows := make([][]float32, 1000)
	for i := range rows {
		rows[i] = []float32{float32(i % 2)}
	}
	codec := Codec{Encode: func(_ context.Context, rows [][]float32) ([][]float32, error) {
		out := make([][]float32, len(rows))
		for i, r := range rows {
			if r[0] == 1 {
				out[i] = []float32{6, -2} // norm 8 = 2l
			} else {
				out[i] = []float32{1, 1} // norm 2 = l/2
			}
		}
		return out, nil
	}}
	rep, err := Evaluate(context.Background(), rows, codec, Config{Set: mechanisms.L1Ball{D: 2, Radius: 4}, Eps: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.ClippedShare != 0.5 || rep.NormQ10 != 0.5 || math.Abs(rep.NormQ90-1) > 1e-12 {
		t.Errorf("clipped %v, q10 %v, q90 %v; want 0.5, 0.5, 1", rep.ClippedShare, rep.NormQ10, rep.NormQ90)
	}
	if rep.MSEPrivate != nil || !strings.Contains(rep.ReconstructionNote, "no decoder") {
		t.Errorf("no decoder: mse_private %v, note %q", rep.MSEPrivate, rep.ReconstructionNote)
	}
}

// The identity on a box: the mean predictor's error is the variance of a uniform feature, w²/12, the
// clean reconstruction is exact, the noise is Laplace of scale d·w/eps on each coordinate, and the
// release is clamped into the box before decoding. The accuracy bound does not apply to a box.
func TestIdentityOnABox(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	rows := make([][]float32, 5000)
	for i := range rows {
		rows[i] = []float32{float32(rng.Float64()), float32(2 * rng.Float64())}
	}
	id := func(_ context.Context, rows [][]float32) ([][]float32, error) { return rows, nil }
	box := mechanisms.Box{Lo: []float64{0, 0}, Hi: []float64{1, 2}}
	rep, err := Evaluate(context.Background(), rows, Codec{Encode: id, Decode: id}, Config{Set: box, Eps: 64})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "mse_mean", *rep.MSEMean, (1.0/12+4.0/12)/2, 0.05)
	if *rep.MSEClean != 0 {
		t.Errorf("identity clean error %v, want 0", *rep.MSEClean)
	}
	// b_j = 2·w_j/64, noise variance 2b²; the error is the noise, a little less where a release near
	// an edge is clamped back into the box.
	b0, b1 := 2*1.0/64, 2*2.0/64
	near(t, "noise variance 0", rep.NoiseVariance[0], 2*b0*b0, 1e-9)
	near(t, "noise variance 1", rep.NoiseVariance[1], 2*b1*b1, 1e-9)
	if noise := (2*b0*b0 + 2*b1*b1) / 2; *rep.MSEPrivate > noise || *rep.MSEPrivate < 0.85*noise {
		t.Errorf("mse_private %.4g, want a little under the noise variance %.4g", *rep.MSEPrivate, noise)
	}
	if rep.AccuracyBound != nil || !strings.Contains(rep.AccuracyBoundNote, "box") {
		t.Errorf("bound on a box: %v %q", rep.AccuracyBound, rep.AccuracyBoundNote)
	}
	near(t, "norm_q50", rep.NormQ50, 0.5, 0.05) // mean |u| of two uniform positions
	// At eps = 0.1 the clamped release is at worst as far as the farther bound: error ≤ w², and it must
	// beat the unclamped Laplace error by far (variance 2(2w/0.1)² per coordinate).
	low, err := Evaluate(context.Background(), rows, Codec{Encode: id, Decode: id}, Config{Set: box, Eps: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if *low.MSEPrivate > (1.0+4.0)/2 {
		t.Errorf("clamped release error %v exceeds the box's squared width", *low.MSEPrivate)
	}
}

func TestAccuracyBoundAssumptions(t *testing.T) {
	rows := lowRank(100, 10, 3, 10, 1)
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Set: mechanisms.L1Ball{D: 3, Radius: 60}, Eps: 4, K: 10}, "d = 3 < K/2 = 5"},
		{Config{Set: mechanisms.L1Ball{D: 3, Radius: 60}, Eps: 4, K: 3}, "even K"},
		{Config{Set: mechanisms.L1Ball{D: 3, Radius: 60}, Eps: 4, Randomiser: "duchi"}, "Laplace randomiser"},
	} {
		rep, err := Evaluate(context.Background(), rows, projection(3, 10), c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if rep.AccuracyBound != nil || !strings.Contains(rep.AccuracyBoundNote, c.want) {
			t.Errorf("%+v: bound %v, note %q; want NULL because %q", c.cfg, rep.AccuracyBound, rep.AccuracyBoundNote, c.want)
		}
	}
}

// Non-finite or wrong-length encodings are released (and evaluated) from the set's centre.
func TestFaultyEncodings(t *testing.T) {
	rows := lowRank(100, 4, 2, 1, 1)
	codec := Codec{Encode: func(_ context.Context, rows [][]float32) ([][]float32, error) {
		out := make([][]float32, len(rows))
		for i := range out {
			switch i % 4 {
			case 0:
				out[i] = []float32{float32(math.NaN()), 0}
			case 1:
				out[i] = []float32{1}
			default:
				out[i] = []float32{1, 1}
			}
		}
		return out, nil
	}}
	rep, err := Evaluate(context.Background(), rows, codec, Config{Set: mechanisms.L1Ball{D: 2, Radius: 4}, Eps: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.NonFinite != 50 || rep.NormQ10 != 0 {
		t.Errorf("non-finite %d (want 50), q10 %v (want 0: the centre)", rep.NonFinite, rep.NormQ10)
	}
}

func TestReservoirIsSeededAndUniform(t *testing.T) {
	sample := func(seed uint64) [][]float32 {
		r := NewReservoir(100, seed)
		for i := range 10000 {
			r.Add([]float32{float32(i)})
		}
		if r.Seen() != 10000 {
			t.Fatalf("seen %d", r.Seen())
		}
		return r.Rows()
	}
	a, b := sample(5), sample(5)
	if !reflect.DeepEqual(a, b) || len(a) != 100 {
		t.Fatalf("same seed, different samples (or %d rows)", len(a))
	}
	var mean float64
	for _, r := range a {
		mean += float64(r[0]) / 100
	}
	// Uniform over 0..9999: mean 5000, standard error 2887/√100 ≈ 289; 4 of them.
	if math.Abs(mean-5000) > 1200 {
		t.Errorf("sample mean %v: not uniform over the stream", mean)
	}
	if reflect.DeepEqual(a, sample(6)) {
		t.Error("another seed gives the same sample")
	}
}

func TestTooFewRows(t *testing.T) {
	_, err := Evaluate(context.Background(), lowRank(1, 4, 2, 1, 1), projection(2, 4), Config{Set: mechanisms.L1Ball{D: 2, Radius: 4}, Eps: 1})
	if err == nil || !strings.Contains(err.Error(), "need at least 2") {
		t.Errorf("one row: %v", err)
	}
}
