package taskaware

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ldpsql/ldpsql/training/datasets"
)

// wdbcMinMax returns WDBC's 569 rows with every feature min-max scaled to [0, 1] over the whole data
// set (the paper's code does the same, spec II.5), keeping the first cols features (0: all 30).
func wdbcMinMax(t testing.TB, cols int) [][]float32 {
	t.Helper()
	w, err := datasets.LoadWDBC()
	if err != nil {
		t.Fatal(err)
	}
	n := len(w.Features[0])
	if cols == 0 {
		cols = n
	}
	lo, hi := make([]float64, n), make([]float64, n)
	for j := range n {
		lo[j], hi[j] = math.Inf(1), math.Inf(-1)
		for _, r := range w.Features {
			lo[j], hi[j] = min(lo[j], r[j]), max(hi[j], r[j])
		}
	}
	rows := make([][]float32, len(w.Features))
	for i, r := range w.Features {
		rows[i] = make([]float32, cols)
		for j := range cols {
			rows[i][j] = float32((r[j] - lo[j]) / (hi[j] - lo[j]))
		}
	}
	return rows
}

func ones(n int) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = 1
	}
	return w
}

func l1f(a, b []float32) float64 {
	s := 0.0
	for i := range a {
		s += math.Abs(float64(a[i]) - float64(b[i]))
	}
	return s
}

// The expected loss the model records (eq. 9 at its real noise) is what its Encode and Decode do on the
// auxiliary rows: with y = φ + w, E‖K(x̂ − x)‖² averages to the noise-free error of the rows plus
// σ_w²·‖K D‖²_F (D the decoder matrix; w has mean 0 and variance σ_w² per coordinate). This checks the
// x-space encoder, decoder and offset against the h-space formula, for weights and for a task matrix.
func TestFitLossIdentity(t *testing.T) {
	rows := wdbcMinMax(t, 0)
	n := len(rows[0])
	weights := ones(n)
	for j := 0; j < 10; j++ { // the mean features count twice
		weights[j] = 2
	}
	km := [][]float64{make([]float64, n), make([]float64, n)} // two outputs: the mean radius − texture, and the worst area
	km[0][0], km[0][1], km[1][23] = 1, -1, 3
	for _, tc := range []struct {
		name string
		p    Params
		k    [][]float64
	}{
		{"weights", Params{Weights: weights, Eps: 5, Z: 3}, nil},
		{"weights-z8", Params{Weights: weights, Eps: 20, Z: 8}, nil},
		{"task_matrix", Params{TaskMatrix: km, Eps: 5}, km},
		{"paper-r", Params{Weights: weights, Eps: 5, Z: 3, R: 2}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := FitRows(tc.p, rows)
			if err != nil {
				t.Fatal(err)
			}
			k := tc.k
			if k == nil {
				k = make([][]float64, n)
				for j := range k {
					k[j] = make([]float64, n)
					k[j][j] = tc.p.Weights[j]
				}
			}
			kx := func(v []float64) float64 { // ‖K v‖²
				s := 0.0
				for _, r := range k {
					d := 0.0
					for j, x := range r {
						d += x * v[j]
					}
					s += d * d
				}
				return s
			}
			enc, err := m.Encode(rows)
			if err != nil {
				t.Fatal(err)
			}
			dec, err := m.Decode(enc)
			if err != nil {
				t.Fatal(err)
			}
			clean := 0.0
			diff := make([]float64, n)
			for i := range rows {
				for j := range diff {
					diff[j] = float64(dec[i][j]) - float64(rows[i][j])
				}
				clean += kx(diff)
			}
			clean /= float64(len(rows))
			noise := 0.0
			for _, col := range m.Decoder {
				noise += kx(col)
			}
			got := clean + m.NoiseVar*noise
			if math.Abs(got-m.Loss) > 1e-4*m.Loss {
				t.Fatalf("Encode/Decode give E‖K(x̂ − x)‖² = %v (noise-free %v), the model records %v", got, clean, m.Loss)
			}
			if !(m.Loss < m.LossMean) || !(m.Loss <= m.LossTaskAgnostic) {
				t.Errorf("loss %v, mean predictor %v, task-agnostic %v", m.Loss, m.LossMean, m.LossTaskAgnostic)
			}
			if math.Abs(m.NoiseScale-m.Delta1/tc.p.Eps) > 1e-12*m.NoiseScale || math.Abs(m.NoiseVar-2*m.NoiseScale*m.NoiseScale) > 1e-12*m.NoiseVar ||
				m.Radius != m.Delta1/2 {
				t.Errorf("b = %v, σ_w² = %v, radius %v for Δ1 = %v at ε = %v", m.NoiseScale, m.NoiseVar, m.Radius, m.Delta1, tc.p.Eps)
			}
			t.Logf("Z = %d (cap %d, Z′ %d), c = %.4g, Δ1 = %.4g, b = %.4g; loss %.4f, mean predictor %.4f, task-agnostic %.4f; %s",
				m.Z, m.ZMax, m.ZPrime, m.C, m.Delta1, m.NoiseScale, m.Loss, m.LossMean, m.LossTaskAgnostic, m.Rule)
		})
	}
}

// Monte Carlo with the real noise: Laplace of scale b on the encodings, decoded, averages to the
// recorded loss (the identity above, checked once more end to end with sampled noise).
func TestFitLossMonteCarlo(t *testing.T) {
	rows := wdbcMinMax(t, 0)
	n := len(rows[0])
	m, err := FitRows(Params{Weights: ones(n), Eps: 5, Z: 3}, rows)
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := m.Encode(rows)
	rng := rand.New(rand.NewPCG(5, 5))
	var sum, sumSq float64
	const draws = 40
	noisy := make([][]float32, len(enc))
	for range draws {
		for i, z := range enc {
			noisy[i] = make([]float32, len(z))
			for k, v := range z {
				l := m.NoiseScale * rng.ExpFloat64()
				if rng.IntN(2) == 0 {
					l = -l
				}
				noisy[i][k] = v + float32(l)
			}
		}
		dec, _ := m.Decode(noisy)
		for i := range rows {
			e := 0.0
			for j := range rows[i] {
				d := float64(dec[i][j]) - float64(rows[i][j])
				e += d * d
			}
			sum += e
			sumSq += e * e
		}
	}
	cnt := float64(draws * len(rows))
	mean := sum / cnt
	se := math.Sqrt((sumSq/cnt - mean*mean) / cnt)
	if math.Abs(mean-m.Loss) > 4*se {
		t.Fatalf("Monte Carlo loss %v ± %v, recorded %v", mean, se, m.Loss)
	}
	t.Logf("Monte Carlo %.4f ± %.4f, recorded %.4f", mean, se, m.Loss)
}

// The declared ℓ1 radius is Δ1/2 of the encoder over the box, and that holds against adversarial
// inputs: on 8 WDBC features every one of the 256 box vertices encodes inside the ball and the largest
// pairwise ℓ1 distance is Δ1 (brute force); on all 30, the extreme pair the model reports is Δ1 apart,
// random vertices and inputs far outside the box (clipped into it) never exceed it. At ε = 60, so that
// the encoder has several rows (at ε = 5 it has one).
func TestEncodeDelta1Adversarial(t *testing.T) {
	for _, cols := range []int{8, 30} {
		rows := wdbcMinMax(t, cols)
		m, err := FitRows(Params{Weights: ones(cols), Eps: 60, Z: 4}, rows)
		if err != nil {
			t.Fatal(err)
		}
		if m.Z < 3 {
			t.Fatalf("%d features: Z = %d; the test wants an encoder of several rows", cols, m.Z)
		}
		var cands [][]float32
		if cols <= 12 {
			for v := 0; v < 1<<cols; v++ {
				x := make([]float32, cols)
				for j := range x {
					x[j] = float32(m.Lo[j])
					if v>>j&1 == 1 {
						x[j] = float32(m.Hi[j])
					}
				}
				cands = append(cands, x)
			}
		} else {
			rng := rand.New(rand.NewPCG(9, uint64(cols)))
			for range 4000 {
				x := make([]float32, cols)
				for j := range x {
					x[j] = float32(m.Lo[j])
					if rng.IntN(2) == 1 {
						x[j] = float32(m.Hi[j])
					}
					if rng.IntN(10) == 0 { // far outside: clipped to the vertex
						x[j] = float32(1e6 * (2*float64(rng.IntN(2)) - 1))
					}
				}
				cands = append(cands, x)
			}
		}
		ex, ey := m.ExtremeVertices[0], m.ExtremeVertices[1]
		if x, y := m.Extremes(); fmt.Sprint(x, y) != fmt.Sprint(ex, ey) {
			t.Fatalf("%d features: the recorded extreme vertices %v, %v; Extremes %v, %v", cols, ex, ey, x, y)
		}
		x32, y32 := make([]float32, cols), make([]float32, cols)
		for j := range ex {
			x32[j], y32[j] = float32(ex[j]), float32(ey[j])
		}
		cands = append(cands, x32, y32)
		enc, err := m.Encode(cands)
		if err != nil {
			t.Fatal(err)
		}
		zero := make([]float32, m.Z)
		best := 0.0
		for i := range enc {
			if l1f(enc[i], zero) > m.Radius {
				t.Fatalf("%d features: vertex %d encodes to ℓ1 norm %v > radius %v", cols, i, l1f(enc[i], zero), m.Radius)
			}
			if cols <= 12 {
				for k := i + 1; k < len(enc); k++ {
					best = max(best, l1f(enc[i], enc[k]))
				}
			}
		}
		pair := l1f(enc[len(enc)-2], enc[len(enc)-1])
		if math.Abs(pair-m.Delta1) > 1e-5*m.Delta1 {
			t.Errorf("%d features: the extreme pair is %v apart, Δ1 = %v", cols, pair, m.Delta1)
		}
		if cols <= 12 && math.Abs(best-m.Delta1) > 1e-5*m.Delta1 {
			t.Errorf("%d features: brute force over the vertices gives %v, Δ1 = %v", cols, best, m.Delta1)
		}
		t.Logf("%d features: Z = %d, Δ1 = %.6g, extreme pair %.6g, largest over all vertex pairs %.6g (8 features only)", cols, m.Z, m.Delta1, pair, best)
	}
}

// Encode and Decode are deterministic functions of the artifact and the input: the same rows encode to
// the same bits twice, and after the artifact is reloaded; the fit itself is reproducible.
func TestEncodeDeterministic(t *testing.T) {
	rows := wdbcMinMax(t, 0)
	p := Params{Weights: ones(30), Eps: 5, Z: 3}
	m, err := FitRows(p, rows)
	if err != nil {
		t.Fatal(err)
	}
	art, _ := m.Artifact()
	m2, err := FitRows(p, rows)
	if err != nil {
		t.Fatal(err)
	}
	art2, _ := m2.Artifact()
	if !bytes.Equal(art, art2) {
		t.Fatal("two fits on the same rows differ")
	}
	loaded, err := Load(art)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := m.Encode(rows)
	b, _ := m.Encode(rows)
	c, _ := loaded.Encode(rows)
	for i := range a {
		for k := range a[i] {
			if math.Float32bits(a[i][k]) != math.Float32bits(b[i][k]) || math.Float32bits(a[i][k]) != math.Float32bits(c[i][k]) {
				t.Fatalf("row %d: %v, %v, after Load %v", i, a[i], b[i], c[i])
			}
		}
	}
	da, _ := m.Decode(a)
	dc, _ := loaded.Decode(a)
	for i := range da {
		for j := range da[i] {
			if math.Float32bits(da[i][j]) != math.Float32bits(dc[i][j]) {
				t.Fatalf("decode row %d differs after Load", i)
			}
		}
	}
	// A tampered artifact whose radius is not Δ1/2 is refused.
	bad := bytes.Replace(art, []byte(`"radius":`), []byte(`"radius":1e3,"x_radius":`), 1)
	if _, err := Load(bad); err == nil {
		t.Fatal("an artifact with a wrong radius loaded")
	}
}

// A feature constant in the auxiliary rows has a box of width 0: it adds nothing to Δ1 and is encoded
// as its constant whatever the input; an all-constant task is an error.
func TestFitConstantFeature(t *testing.T) {
	rows := wdbcMinMax(t, 4)
	for _, r := range rows {
		r[2] = 0.5
	}
	m, err := FitRows(Params{Weights: ones(4), Eps: 3}, rows)
	if err != nil {
		t.Fatal(err)
	}
	x := append([]float32(nil), rows[0]...)
	y := append([]float32(nil), rows[0]...)
	y[2] = 1e6
	e, _ := m.Encode([][]float32{x, y})
	if l1f(e[0], e[1]) != 0 {
		t.Errorf("the constant feature changes the encoding: %v vs %v", e[0], e[1])
	}
	if _, err := FitRows(Params{Weights: []float64{0, 0, 1, 0}, Eps: 3}, rows); err == nil || !strings.Contains(err.Error(), "constant") {
		t.Errorf("a task on the constant feature only: %v", err)
	}
}

func TestParseParams(t *testing.T) {
	good, err := ParseParams([]byte(`{"weights": [1, 2, 0], "eps": 5, "z": 3}`))
	if err != nil || good.Eps != 5 || good.Z != 3 || len(good.Weights) != 3 {
		t.Fatalf("%+v %v", good, err)
	}
	if p, err := ParseParams([]byte(`{"task_matrix": [[1, 0], [0, 2]], "eps": 1}`)); err != nil || p.Z != 0 {
		t.Fatalf("%+v %v", p, err)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"eps": 5}`, `give the task: "weights"`},
		{`{"weights": [1], "task_matrix": [[1]], "eps": 5}`, `not both`},
		{`{"weights": [1, 2]}`, `eps is required`},
		{`{"weights": [1, 2], "eps": -1}`, `eps = -1: want a number in (0, 64]`},
		{`{"weights": [1, 2], "eps": 100}`, `eps = 100`},
		{`{"weights": [1, 2], "eps": 5, "z": 0}`, `z = 0: want a positive value`},
		{`{"weights": [1, 2], "eps": 5, "z": 17}`, `z = 17: want 0 ≤ z ≤ 16`},
		{`{"weights": [0, 0], "eps": 5}`, `weights are all 0`},
		{`{"weights": [], "eps": 5}`, `weights is empty`},
		{`{"weights": "x", "eps": 5}`, `weights: got JSON string, want an array of numbers`},
		{`{"task_matrix": [[1, 2], [3]], "eps": 5}`, `task_matrix row 1 has 1 values`},
		{`{"task_matrix": [], "eps": 5}`, `task_matrix is empty`},
		{`{"task_matrix": [[0]], "eps": 5}`, `task_matrix is all zeros`},
		{`{"weights": [1], "eps": 5, "r": -2}`, `r = -2`},
		{`{"weights": [1], "eps": 5, "d": 2}`, `unknown key "d" (known: weights, task_matrix, eps, z, r)`},
	} {
		_, err := ParseParams([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "task_aware_linear params: ") {
			t.Errorf("%s: %v, want %q", tc.in, err, tc.want)
		}
	}
	// The checks that need the input dimension.
	rows := [][]float32{{0, 1, 2}, {1, 0, 3}, {2, 2, 2}}
	for _, tc := range []struct {
		p    Params
		want string
	}{
		{Params{Weights: []float64{1, 1}, Eps: 1}, "weights has 2 values, the features have 3"},
		{Params{TaskMatrix: [][]float64{{1, 1}}, Eps: 1}, "task_matrix has 2 columns, the features have 3"},
		{Params{Weights: []float64{1, 1, 1}, Eps: 1, Z: 4}, "z = 4 exceeds the input dimension 3"},
	} {
		if _, err := FitRows(tc.p, rows); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.p, err, tc.want)
		}
	}
	if _, err := FitRows(Params{Weights: []float64{1, 1, 1}, Eps: 1}, rows[:1]); err == nil || !strings.Contains(err.Error(), "need at least 2") {
		t.Errorf("one row: %v", err)
	}
}
