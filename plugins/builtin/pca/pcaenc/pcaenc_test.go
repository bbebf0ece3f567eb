package pcaenc

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// lowRank returns n rows on an affine subspace spanned by len(sd) random
// axes, and the axes.
func lowRank(rng *rand.Rand, n, dim int, sd []float64, noise float64) ([][]float32, [][]float64) {
	mu := make([]float64, dim)
	for i := range mu {
		mu[i] = 3 * rng.Float64()
	}
	axes := make([][]float64, len(sd))
	for k := range axes {
		axes[k] = make([]float64, dim)
		for i := range axes[k] {
			axes[k][i] = rng.NormFloat64() / math.Sqrt(float64(dim))
		}
	}
	rows := make([][]float32, n)
	for r := range rows {
		x := append([]float64(nil), mu...)
		for k, s := range sd {
			a := s * rng.NormFloat64()
			for i := range x {
				x[i] += a * axes[k][i]
			}
		}
		rows[r] = make([]float32, dim)
		for i, v := range x {
			rows[r][i] = float32(v + noise*rng.NormFloat64())
		}
	}
	return rows, axes
}

func TestFitMatchesNaiveCovariance(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	rows, _ := lowRank(rng, 700, 12, []float64{4, 3, 2}, 0.3) // 700 rows: several blocks
	m, err := FitRows(Params{D: 4, L: 10}, rows)
	if err != nil {
		t.Fatal(err)
	}
	n, d := len(rows), 12
	mean := make([]float64, d)
	for _, r := range rows {
		for k, v := range r {
			mean[k] += float64(v) / float64(n)
		}
	}
	cov := mat.NewSymDense(d, nil)
	for i := range d {
		for j := i; j < d; j++ {
			s := 0.0
			for _, r := range rows {
				s += (float64(r[i]) - mean[i]) * (float64(r[j]) - mean[j])
			}
			cov.SetSym(i, j, s/float64(n-1))
		}
	}
	for k := range d {
		if math.Abs(m.Mean[k]-mean[k]) > 1e-9 {
			t.Fatalf("mean %d: %v, want %v", k, m.Mean[k], mean[k])
		}
	}
	var es mat.EigenSym
	es.Factorize(cov, true)
	vals := es.Values(nil)
	sort.Sort(sort.Reverse(sort.Float64Slice(vals)))
	for k := range 4 {
		if math.Abs(m.Variances[k]-vals[k]) > 1e-8*max(1, vals[k]) {
			t.Errorf("variance %d: %v, want %v", k, m.Variances[k], vals[k])
		}
		// Each component is an eigenvector: cov·w = λ w.
		w := mat.NewVecDense(d, m.Components[k])
		var cw mat.VecDense
		cw.MulVec(cov, w)
		for i := range d {
			if math.Abs(cw.AtVec(i)-vals[k]*w.AtVec(i)) > 1e-8 {
				t.Fatalf("component %d is not an eigenvector", k)
			}
		}
	}
}

func TestLowRankReconstructionAndOrthonormality(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	const dim = 60
	rows, axes := lowRank(rng, 2000, dim, []float64{6, 4, 3, 2}, 0)
	m, err := FitRows(Params{D: 4, L: 1e9}, rows)
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.Components {
		for j := range m.Components {
			dot := 0.0
			for k := range dim {
				dot += m.Components[i][k] * m.Components[j][k]
			}
			if want := map[bool]float64{true: 1, false: 0}[i == j]; math.Abs(dot-want) > 1e-10 {
				t.Errorf("w%d·w%d = %v", i, j, dot)
			}
		}
	}
	// The components span the true axes.
	for k, a := range axes {
		norm, proj := 0.0, 0.0
		for _, v := range a {
			norm += v * v
		}
		for _, w := range m.Components {
			d := 0.0
			for i := range a {
				d += a[i] * w[i]
			}
			proj += d * d
		}
		if r := proj / norm; math.Abs(r-1) > 1e-6 {
			t.Errorf("axis %d: %v of it in the span", k, r)
		}
	}
	z, err := m.Encode(rows[:500])
	if err != nil {
		t.Fatal(err)
	}
	x, err := m.Decode(z)
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for i := range x {
		for k := range x[i] {
			worst = max(worst, math.Abs(float64(x[i][k]-rows[i][k])))
		}
	}
	if worst > 1e-4 {
		t.Errorf("reconstruction error %v", worst)
	}
}

func TestEncodeInBallForAdversarialInputs(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	const dim = 20
	rows, _ := lowRank(rng, 300, dim, []float64{5, 1}, 0.1)
	for _, l := range []float64{1e-3, 0.7, 1, 10, 1e6} {
		m, err := FitRows(Params{D: 3, L: l}, rows)
		if err != nil {
			t.Fatal(err)
		}
		var adv [][]float32
		for range 2000 {
			x := make([]float32, dim)
			scale := math.Pow(10, 76*rng.Float64()-38)
			for i := range x {
				x[i] = float32(max(-math.MaxFloat32, min(math.MaxFloat32, scale*rng.NormFloat64())))
			}
			adv = append(adv, x)
		}
		z, err := m.Encode(adv)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range z {
			s := 0.0
			for _, c := range v {
				s += math.Abs(float64(c))
			}
			if !(s <= l) {
				t.Fatalf("l=%v row %d: ‖z‖₁ = %v", l, i, s)
			}
		}
	}
}

func TestClipL1(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	z := make([]float32, 8)
	for range 100000 {
		h := make([]float64, 8)
		for i := range h {
			h[i] = rng.NormFloat64() * math.Pow(10, 20*rng.Float64()-10)
		}
		l := math.Pow(10, 8*rng.Float64()-4)
		if err := ClipL1(h, l, z); err != nil {
			t.Fatal(err)
		}
		s, hs := 0.0, 0.0
		for i := range z {
			s += math.Abs(float64(z[i]))
			hs += math.Abs(h[i])
		}
		if s > l {
			t.Fatalf("‖ν(h)‖₁ = %v > %v", s, l)
		}
		if hs <= l*0.999 {
			for i := range z {
				if z[i] != float32(h[i]) {
					t.Fatalf("h inside the ball was changed: %v -> %v", h, z)
				}
			}
		}
	}
	if err := ClipL1([]float64{math.NaN(), 1}, 1, z[:2]); err == nil {
		t.Error("NaN accepted")
	}
	if err := ClipL1([]float64{math.Inf(1), 1}, 1, z[:2]); err == nil {
		t.Error("Inf accepted")
	}
}

func TestArtifactRoundTripAndErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	rows, _ := lowRank(rng, 100, 10, []float64{2, 1}, 0.1)
	m, err := FitRows(DefaultParams, rows)
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.Artifact()
	if err != nil {
		t.Fatal(err)
	}
	m2, err := Load(a)
	if err != nil {
		t.Fatal(err)
	}
	z1, _ := m.Encode(rows)
	z2, _ := m2.Encode(rows)
	for i := range z1 {
		for j := range z1[i] {
			if z1[i][j] != z2[i][j] {
				t.Fatal("a loaded model encodes differently")
			}
		}
	}
	var raw map[string]any
	json.Unmarshal(a, &raw)
	for _, c := range []struct {
		edit func(map[string]any)
		want string
	}{
		{func(r map[string]any) { r["format"] = "x" }, "format"},
		{func(r map[string]any) { r["d"] = 3 }, "components"},
		{func(r map[string]any) { r["l"] = -1 }, "l = -1"},
		{func(r map[string]any) { r["mean"] = []float64{1} }, "mean has 1"},
	} {
		r := map[string]any{}
		for k, v := range raw {
			r[k] = v
		}
		c.edit(r)
		b, _ := json.Marshal(r)
		if _, err := Load(b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.want, err)
		}
	}
	if _, err := Load([]byte("{")); err == nil {
		t.Error("bad JSON loaded")
	}
}

func TestParamsAndFitErrors(t *testing.T) {
	p, err := ParseParams(nil)
	if err != nil || p != DefaultParams {
		t.Errorf("defaults: %v %v", p, err)
	}
	p, err = ParseParams(json.RawMessage(`{"l": 2.5}`))
	if err != nil || p.D != 8 || p.L != 2.5 {
		t.Errorf("partial: %v %v", p, err)
	}
	for _, bad := range []string{`{"d": 0}`, `{"l": 0}`, `{"l": -1}`, `{"x": 1}`, `[1]`} {
		if _, err := ParseParams(json.RawMessage(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	rows := [][]float32{{1, 2}, {3, 4}, {5, 7}}
	if _, err := FitRows(Params{D: 3, L: 1}, rows); err == nil {
		t.Error("d > dim accepted")
	}
	if _, err := FitRows(Params{D: 1, L: 1}, rows[:1]); err == nil {
		t.Error("one row accepted")
	}
	if _, err := FitRows(Params{D: 1, L: 1}, [][]float32{{1, 2}, {float32(math.NaN()), 1}}); err == nil {
		t.Error("NaN accepted")
	}
	if _, err := FitRows(Params{D: 1, L: 1}, [][]float32{{1, 2}, {1}}); err == nil {
		t.Error("ragged rows accepted")
	}
}

func BenchmarkEncode(b *testing.B) {
	rng := rand.New(rand.NewPCG(6, 6))
	rows, _ := lowRank(rng, 4096, 784, []float64{5, 4, 3, 2, 1}, 0.1)
	m, err := FitRows(Params{D: 8, L: 10}, rows[:1000])
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		m.Encode(rows)
	}
	b.ReportMetric(float64(len(rows)*b.N)/b.Elapsed().Seconds(), "rows/s")
}

// Without l, Fit takes the AutoLQuantile quantile of the fitted rows' encoding norms: checked against
// a direct computation on random data sets of several sizes, dimensions and scales, and the rule
// follows the data's scale exactly (rows × c give l × c), which a fixed default cannot.
func TestAutoLFollowsTheData(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for trial := range 12 {
		n, dim, d := 20+r.IntN(3000), 2+r.IntN(30), 1
		d += r.IntN(dim)
		scale := math.Pow(10, float64(r.IntN(7)-3)) // 1e-3 … 1e3
		rows := make([][]float32, n)
		for i := range rows {
			rows[i] = make([]float32, dim)
			for j := range rows[i] {
				rows[i][j] = float32(scale * (r.NormFloat64()*float64(j+1) + 3))
			}
		}
		m, err := FitRows(Params{D: d}, rows)
		if err != nil {
			t.Fatal(err)
		}
		wide, err := FitRows(Params{D: d, L: 1e30}, rows) // the same model, no clipping
		if err != nil {
			t.Fatal(err)
		}
		z, err := wide.Encode(rows)
		if err != nil {
			t.Fatal(err)
		}
		norms := make([]float64, n)
		for i, v := range z {
			for _, x := range v {
				norms[i] += math.Abs(float64(x))
			}
		}
		slices.Sort(norms)
		want := norms[int(AutoLQuantile*float64(n-1))]
		if math.Abs(m.L-want) > 1e-4*want || !strings.Contains(m.LRule, "0.05 quantile") {
			t.Errorf("trial %d (n %d, dim %d, d %d, scale %g): l = %v (%s), want %v", trial, n, dim, d, scale, m.L, m.LRule, want)
		}
		clipped, _ := m.Encode(rows)
		share := 0
		for i, v := range z {
			if !slices.Equal(v, clipped[i]) {
				share++
			}
		}
		if f := float64(share) / float64(n); f < 0.9 {
			t.Errorf("trial %d: %.2f of the rows clipped, want about 0.95", trial, f)
		}
		scaled := make([][]float32, n)
		for i, v := range rows {
			scaled[i] = make([]float32, dim)
			for j, x := range v {
				scaled[i][j] = 10 * x
			}
		}
		m10, err := FitRows(Params{D: d}, scaled)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(m10.L-10*m.L) > 1e-3*m10.L {
			t.Errorf("trial %d: rows × 10 give l = %v, want 10 × %v", trial, m10.L, m.L)
		}
	}
	// An explicit l is kept, and the params name the rule when it is left out.
	m, err := FitRows(Params{D: 1, L: 2.5}, [][]float32{{1, 2}, {3, 5}, {4, 4}})
	if err != nil || m.L != 2.5 || m.LRule != "" {
		t.Errorf("explicit l: %v, %q, %v", m.L, m.LRule, err)
	}
}

// A stream longer than AutoLSample rows chooses l from a sample of AutoLSample of them, the same sample
// on every run (the fit's parallel sums may differ in the last bits).
func TestAutoLSamplesLongStreams(t *testing.T) {
	n := AutoLSample + 5000
	rows := make([][]float32, n)
	r := rand.New(rand.NewPCG(3, 3))
	for i := range rows {
		rows[i] = []float32{float32(r.NormFloat64()), float32(2 * r.NormFloat64()), float32(r.NormFloat64())}
	}
	fitStream := func() *Model {
		i := 0
		buf := make([][]float32, 1000)
		for k := range buf {
			buf[k] = make([]float32, 3)
		}
		m, err := Fit(Params{D: 2}, 3, func() ([][]float32, error) {
			if i >= n {
				return nil, io.EOF
			}
			k := 0
			for ; k < len(buf) && i < n; k, i = k+1, i+1 {
				copy(buf[k], rows[i]) // the stream reuses its buffers
			}
			return buf[:k], nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	a, b := fitStream(), fitStream()
	if math.Abs(a.L-b.L) > 1e-9*a.L || !strings.Contains(a.LRule, fmt.Sprintf("%d rows' encodings (of %d fitted)", AutoLSample, n)) {
		t.Errorf("l %v and %v (%s)", a.L, b.L, a.LRule)
	}
	// Roughly the whole stream's quantile: a sample of 10,000 puts the 5th percentile within ±0.5
	// percentile points with overwhelming probability.
	z, _ := FitRows(Params{D: 2, L: 1e30}, rows)
	enc, _ := z.Encode(rows)
	below := 0
	for _, v := range enc {
		if math.Abs(float64(v[0]))+math.Abs(float64(v[1])) < a.L {
			below++
		}
	}
	if f := float64(below) / float64(n); f < 0.04 || f > 0.06 {
		t.Errorf("%.4f of all rows lie inside l, want about 0.05", f)
	}
}
