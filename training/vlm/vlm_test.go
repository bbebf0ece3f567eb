package vlm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ldpsql/ldpsql/training/nn"
)

// lowRank returns n rows of dim features from a rank-k model: for
// "bernoulli", x = sigmoid(3·A·s) with s ~ N(0, I_k) (values in (0, 1));
// for "gaussian", x = A·s + 0.1·noise, standardised per feature.
func lowRank(seed uint64, n, dim, k int, likelihood string) [][]float32 {
	r := rand.New(rand.NewPCG(seed, 99))
	a := make([]float64, dim*k)
	for i := range a {
		a[i] = r.NormFloat64() / math.Sqrt(float64(k))
	}
	rows := make([][]float32, n)
	s := make([]float64, k)
	for i := range rows {
		for j := range s {
			s[j] = r.NormFloat64()
		}
		rows[i] = make([]float32, dim)
		for f := range dim {
			var v float64
			for j := range k {
				v += a[f*k+j] * s[j]
			}
			if likelihood == Bernoulli {
				rows[i][f] = float32(1 / (1 + math.Exp(-3*v)))
			} else {
				rows[i][f] = float32(v + 0.1*r.NormFloat64())
			}
		}
	}
	if likelihood == Gaussian {
		for f := range dim {
			var m, m2 float64
			for _, row := range rows {
				m += float64(row[f])
				m2 += float64(row[f]) * float64(row[f])
			}
			m /= float64(n)
			sd := math.Sqrt(m2/float64(n) - m*m)
			for _, row := range rows {
				row[f] = float32((float64(row[f]) - m) / sd)
			}
		}
	}
	return rows
}

// bernoulliBaseline is the loss of the best model that ignores the latent:
// each feature predicted by its mean p̄, Σ_f −(x log p̄ + (1−x) log(1−p̄)),
// averaged over rows.
func bernoulliBaseline(rows [][]float32) float64 {
	dim := len(rows[0])
	var loss float64
	for f := range dim {
		var p float64
		for _, r := range rows {
			p += float64(r[f])
		}
		p /= float64(len(rows))
		for _, r := range rows {
			x := float64(r[f])
			loss -= x*math.Log(p) + (1-x)*math.Log(1-p)
		}
	}
	return loss / float64(len(rows))
}

func smallConfig() Config {
	return Config{D: 4, L: 10, Hidden: []int{32, 16}, Likelihood: Bernoulli, Epochs: 10, BatchSize: 64, LR: 5e-3, Seed: 1}
}

// bernoulliFloor is the mean over rows of Σ_f H(x_f), the binary entropy of
// the targets: no model's Bernoulli −ELBO can go below it.
func bernoulliFloor(rows [][]float32) float64 {
	xlogx := func(x float64) float64 {
		if x <= 0 {
			return 0
		}
		return x * math.Log(x)
	}
	var h float64
	for _, r := range rows {
		for _, x := range r {
			h -= xlogx(float64(x)) + xlogx(1-float64(x))
		}
	}
	return h / float64(len(rows))
}

func trainOrFatal(t *testing.T, cfg Config, rows [][]float32) (*Model, []nn.Progress) {
	t.Helper()
	var ps []nn.Progress
	m, err := Train(context.Background(), cfg, rows, func(p nn.Progress) { ps = append(ps, p) })
	if err != nil {
		t.Fatal(err)
	}
	return m, ps
}

func TestTrainLossFalls(t *testing.T) {
	rows := lowRank(1, 2000, 20, 3, Bernoulli)
	base := bernoulliBaseline(rows)
	floor := bernoulliFloor(rows)
	m, ps := trainOrFatal(t, smallConfig(), rows)
	if len(ps) != 10 {
		t.Fatalf("%d progress reports, want 10", len(ps))
	}
	first, last := ps[0].Loss, ps[len(ps)-1].Loss
	t.Logf("floor %.3f, baseline %.3f, epoch 1 %.3f, epoch 10 %.3f, learnt b %.3f", floor, base, first, last, m.TrainScale())
	for i, p := range ps {
		if p.Epoch != i+1 || p.Epochs != 10 || !(p.RowsPerSec > 0) || p.ETA < 0 {
			t.Errorf("progress %d: %+v", i, p)
		}
	}
	// Threshold: the −ELBO (reconstruction + KL) must end at least 1 nat
	// per row below the latent-free baseline (the best Bernoulli model that
	// ignores z; about 1.9 nats below it in practice), below the first
	// epoch's loss, and (sanity) above the entropy floor.
	if !(last < base-1) || !(last < first) || !(last > floor) {
		t.Errorf("loss did not fall as expected: floor %.3f, baseline %.3f, first %.3f, last %.3f", floor, base, first, last)
	}
	if ps[len(ps)-1].ETA != 0 {
		t.Errorf("final ETA %v", ps[len(ps)-1].ETA)
	}
}

func TestTrainGaussianAndFixedScale(t *testing.T) {
	rows := lowRank(2, 2000, 20, 3, Gaussian)
	cfg := smallConfig()
	cfg.Likelihood = Gaussian
	cfg.EpsPretrain = 33 // b = 2·10/33 ≈ 0.606
	cfg.Epochs = 15
	m, ps := trainOrFatal(t, cfg, rows)
	// Latent-free baseline for standardised features under N(·, 1):
	// 20·(½ log 2π + ½) ≈ 28.38 nats.
	base := 20 * (0.5*math.Log(2*math.Pi) + 0.5)
	last := ps[len(ps)-1].Loss
	t.Logf("baseline %.3f, epoch 1 %.3f, last %.3f", base, ps[0].Loss, last)
	// Threshold: 2.5 nats below the baseline (about 3.8 in practice).
	if !(last < base-2.5) {
		t.Errorf("gaussian loss %.3f, want < %.3f", last, base-2.5)
	}
	if m.TrainScale() != float64(float32(20.0/33)) {
		t.Errorf("fixed training scale %v, want 20/33", m.TrainScale())
	}
	// Gaussian decoder means are unbounded reals; Bernoulli ones in [0,1].
	z, err := m.Encode(rows[:5])
	if err != nil {
		t.Fatal(err)
	}
	x, err := m.Decode(z)
	if err != nil {
		t.Fatal(err)
	}
	var mse float64
	for i := range x {
		for f := range x[i] {
			d := float64(x[i][f] - rows[i][f])
			mse += d * d
		}
	}
	mse /= 5 * 20
	if mse > 0.5 {
		t.Errorf("reconstruction MSE of standardised features %v, want < 0.5", mse)
	}
}

func TestLinearVariantTrains(t *testing.T) {
	rows := lowRank(3, 2000, 20, 3, Bernoulli)
	cfg := smallConfig()
	cfg.Linear = true
	cfg.Hidden = []int{99} // ignored for the linear variant
	m, ps := trainOrFatal(t, cfg, rows)
	if len(m.enc) != 1 || len(m.dec) != 1 || m.enc[0].In != 20 || m.enc[0].Out != 4 || m.dec[0].Out != 20 {
		t.Fatalf("linear model layers: enc %d, dec %d", len(m.enc), len(m.dec))
	}
	if c := m.Config(); !c.Linear || c.Hidden != nil {
		t.Errorf("config %+v", c)
	}
	first, last := ps[0].Loss, ps[len(ps)-1].Loss
	base := bernoulliBaseline(rows)
	t.Logf("linear: baseline %.3f, first %.3f, last %.3f", base, first, last)
	// The data are sigmoid(linear(s)): the linear VLM fits them too (about
	// 1.5 nats below the baseline in practice).
	if !(last < first) || !(last < base-0.75) {
		t.Errorf("linear VLM loss: baseline %.3f, first %.3f, last %.3f", base, first, last)
	}
	checkInBall(t, m, rows)
}

func checkInBall(t *testing.T, m *Model, rows [][]float32) [][]float32 {
	t.Helper()
	z, err := m.Encode(rows)
	if err != nil {
		t.Fatal(err)
	}
	l := m.Config().L
	for i, zi := range z {
		if len(zi) != m.Config().D {
			t.Fatalf("row %d: %d outputs", i, len(zi))
		}
		var s64 float64
		var s32, r32 float32
		for k, v := range zi {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("row %d: output %v", i, zi)
			}
			s64 += math.Abs(float64(v))
			s32 += float32(math.Abs(float64(v)))
			r32 += float32(math.Abs(float64(zi[len(zi)-1-k])))
		}
		if s64 > l || float64(s32) > l || float64(r32) > l {
			t.Fatalf("row %d: ‖z‖₁ = %v (float64), %v / %v (float32) > l = %v", i, s64, s32, r32, l)
		}
	}
	return z
}

// randomModel is a default-architecture model with random (untrained)
// weights: the ℓ1 bound must hold for any weights.
func randomModel(seed uint64, cfg Config, inputDim int) *Model {
	cfg = cfg.withDefaults()
	if cfg.Likelihood == "" {
		cfg.Likelihood = Bernoulli
	}
	m := newModel(cfg, inputDim)
	r := rand.New(rand.NewPCG(seed, 5))
	m.initWeights(r)
	for _, l := range m.layers() { // non-zero biases too
		for k := range l.B {
			l.B[k] = float32(r.NormFloat64())
		}
	}
	return m
}

func TestEncodeBoundAdversarial(t *testing.T) {
	const dim = 50
	m := randomModel(1, Config{Hidden: []int{40, 30}, L: 7.5}, dim)
	const big = math.MaxFloat32
	row := func(f func(i int) float32) []float32 {
		r := make([]float32, dim)
		for i := range r {
			r[i] = f(i)
		}
		return r
	}
	rng := rand.New(rand.NewPCG(2, 2))
	rows := [][]float32{
		row(func(int) float32 { return 0 }),
		row(func(int) float32 { return 1e30 }),
		row(func(int) float32 { return -1e30 }),
		row(func(int) float32 { return big }),
		row(func(int) float32 { return -big }),
		row(func(i int) float32 { return float32([]float64{big, -big}[i%2]) }),
		row(func(i int) float32 { return float32([]float64{big, -big, 1e30, -1, 0}[i%5]) }),
		row(func(i int) float32 {
			if i == 3 {
				return big
			}
			return 0
		}),
		row(func(int) float32 { return math.SmallestNonzeroFloat32 }),
		row(func(int) float32 { return 1e20 }),
		row(func(int) float32 { return float32(rng.NormFloat64() * 1e38) }),
		row(func(int) float32 { return float32(rng.NormFloat64()) }),
	}
	z := checkInBall(t, m, rows)
	// The float32 path and the overflow-safe path agree where both work.
	for _, i := range []int{9, 11} {
		a, s := forwardScaled(m.enc, rows[i])
		h := make([]float64, m.cfg.D)
		scaleForClip(a, s, m.cfg.L, h)
		want := make([]float32, m.cfg.D)
		nn.ClipL1To32(h, m.cfg.L, want)
		for k := range want {
			if d := math.Abs(float64(want[k] - z[i][k])); d > 1e-4*m.cfg.L {
				t.Errorf("row %d: float32 path %v, scaled path %v", i, z[i], want)
				break
			}
		}
	}
	// Far outside the ball the output has norm ≈ L and, for huge inputs,
	// does not depend on the scale (the biases become negligible).
	for _, i := range []int{1, 3} {
		var n float64
		for _, v := range z[i] {
			n += math.Abs(float64(v))
		}
		if n < m.cfg.L*(1-1e-5) {
			t.Errorf("row %d: ‖z‖₁ = %v, want ≈ L", i, n)
		}
	}
	for k := range z[1] {
		if math.Abs(float64(z[1][k]-z[3][k])) > 1e-5*m.cfg.L {
			t.Errorf("ν(h(1e30·1)) = %v, ν(h(MaxFloat32·1)) = %v: want the same direction", z[1], z[3])
			break
		}
	}
	// Weights so large that the float32 pass overflows for ordinary inputs.
	huge := randomModel(3, Config{Hidden: []int{20}, D: 3, L: 1}, 10)
	for _, l := range huge.layers() {
		for k := range l.W {
			l.W[k] *= 1e37
		}
	}
	checkInBall(t, huge, [][]float32{row(func(i int) float32 { return 1 })[:10], row(func(i int) float32 { return -big })[:10]})
	// Non-finite inputs are errors naming the place.
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		r := row(func(int) float32 { return 0.5 })
		r[7] = bad
		_, err := m.Encode([][]float32{rows[0], r})
		if err == nil || !strings.Contains(err.Error(), "row 1, value 7") {
			t.Errorf("Encode with %v: error %v", bad, err)
		}
	}
	if _, err := m.Encode([][]float32{make([]float32, dim-1)}); err == nil {
		t.Error("Encode accepted a short row")
	}
	if z, err := m.Encode(nil); err != nil || len(z) != 0 {
		t.Errorf("Encode(nil) = %v, %v", z, err)
	}
}

func TestClipL1To32(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 1))
	out := make([]float32, 8)
	for trial := range 20000 {
		h := make([]float64, 8)
		scale := math.Pow(10, float64(r.IntN(80)-40))
		for i := range h {
			h[i] = r.NormFloat64() * scale
		}
		if trial%3 == 0 { // put it right on the boundary
			var n float64
			for _, v := range h {
				n += math.Abs(v)
			}
			for i := range h {
				h[i] *= 10 / n
			}
		}
		nn.ClipL1To32(h, 10, out)
		var s float64
		for _, v := range out {
			s += math.Abs(float64(v))
		}
		if s > 10 {
			t.Fatalf("h = %v: ‖out‖₁ = %v > 10", h, s)
		}
		// Inside the ball the vector is kept (up to float32 rounding).
		var n float64
		for _, v := range h {
			n += math.Abs(v)
		}
		if n < 9.99 {
			for i := range h {
				if math.Abs(float64(out[i])-h[i]) > max(1.2e-7*math.Abs(h[i]), 0x1p-149) {
					t.Fatalf("inside the ball: h = %v, out = %v", h, out)
				}
			}
		} else if s < 10*(1-1e-5) {
			t.Fatalf("outside the ball: ‖out‖₁ = %v, want ≈ 10", s)
		}
	}
}

// sameEncoding is bit equality with gonum's BLAS, whose kernels compute every row of a product alike;
// OpenBLAS picks its kernels by the shape (a batch of one row is not computed as a row of 256), so there
// a row's encoding agrees across batch sizes to float32 rounding only.
func sameEncoding(a, b float32) bool {
	if !strings.HasPrefix(BLAS, "openblas") {
		return math.Float32bits(a) == math.Float32bits(b)
	}
	return math.Abs(float64(a-b)) <= 1e-5*(1+math.Abs(float64(b)))
}

func TestEncodeDeterministicAcrossBatches(t *testing.T) {
	rows := lowRank(4, 300, 20, 3, Bernoulli)
	m := randomModel(4, Config{Hidden: []int{32, 16}}, 20)
	all, err := m.Encode(rows)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1, 63, 150, 299} {
		one, err := m.Encode(rows[i : i+1])
		if err != nil {
			t.Fatal(err)
		}
		for k := range one[0] {
			if !sameEncoding(one[0][k], all[i][k]) {
				t.Fatalf("row %d alone %v, in a batch %v", i, one[0], all[i])
			}
		}
	}
}

func TestDecode(t *testing.T) {
	m := randomModel(5, Config{Hidden: []int{32, 16}, D: 4}, 20)
	lat := [][]float32{{0, 0, 0, 0}, {1, -2, 3, -4}, {1e30, -1e30, 3e38, 0}, {-3e38, -3e38, 3e38, 3e38}}
	x, err := m.Decode(lat)
	if err != nil {
		t.Fatal(err)
	}
	if len(x) != len(lat) {
		t.Fatalf("%d rows, want %d", len(x), len(lat))
	}
	for i, r := range x {
		if len(r) != 20 {
			t.Fatalf("row %d has %d values, want 20", i, len(r))
		}
		for _, v := range r {
			if !(v >= 0 && v <= 1) {
				t.Fatalf("bernoulli mean %v outside [0, 1] (row %d)", v, i)
			}
		}
	}
	g := randomModel(5, Config{Hidden: []int{32, 16}, D: 4, Likelihood: Gaussian}, 20)
	xg, err := g.Decode(lat)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range xg {
		for _, v := range r {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("gaussian mean %v (row %d)", v, i)
			}
		}
	}
	if _, err := m.Decode([][]float32{{1, 2, 3}}); err == nil {
		t.Error("Decode accepted a latent of the wrong length")
	}
	if _, err := m.Decode([][]float32{{1, float32(math.NaN()), 3, 4}}); err == nil {
		t.Error("Decode accepted NaN")
	}
}

func TestSameSeedBitIdentical(t *testing.T) {
	rows := lowRank(5, 500, 20, 3, Bernoulli)
	cfg := smallConfig()
	cfg.Epochs = 3
	cfg.Seed = 42
	a, _ := trainOrFatal(t, cfg, rows)
	b, _ := trainOrFatal(t, cfg, rows)
	ab, _ := a.MarshalBinary()
	bb, _ := b.MarshalBinary()
	if !bytes.Equal(ab, bb) {
		t.Fatal("same seed, different weights")
	}
	cfg.Seed = 43
	c, _ := trainOrFatal(t, cfg, rows)
	cb, _ := c.MarshalBinary()
	if bytes.Equal(ab, cb) {
		t.Fatal("different seeds, same weights")
	}
}

func TestArtifactRoundTrip(t *testing.T) {
	rows := lowRank(6, 300, 20, 3, Bernoulli)
	cfg := smallConfig()
	cfg.Epochs = 1
	cfg.EpsPretrain = 33
	m, _ := trainOrFatal(t, cfg, rows)
	art, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	m2, err := UnmarshalModel(art)
	if err != nil {
		t.Fatal(err)
	}
	if m2.InputDim() != 20 || m2.TrainScale() != m.TrainScale() {
		t.Errorf("input dim %d, b %v", m2.InputDim(), m2.TrainScale())
	}
	c1, c2 := m.Config(), m2.Config()
	if c1.D != c2.D || c1.L != c2.L || c1.EpsPretrain != c2.EpsPretrain || c1.Seed != c2.Seed || len(c1.Hidden) != len(c2.Hidden) || c1.Likelihood != c2.Likelihood {
		t.Errorf("config %+v, want %+v", c2, c1)
	}
	z1, _ := m.Encode(rows)
	z2, _ := m2.Encode(rows)
	x1, _ := m.Decode(z1)
	x2, _ := m2.Decode(z1)
	for i := range z1 {
		for k := range z1[i] {
			if z1[i][k] != z2[i][k] {
				t.Fatalf("encode differs after the round trip")
			}
		}
		for k := range x1[i] {
			if x1[i][k] != x2[i][k] {
				t.Fatalf("decode differs after the round trip")
			}
		}
	}
	art2, _ := m2.MarshalBinary()
	if !bytes.Equal(art, art2) {
		t.Error("re-marshalled artifact differs")
	}

	// Every corrupted byte is caught (magic, version, header, weights,
	// checksum), as are truncation and extension.
	hl := int(binary.LittleEndian.Uint32(art[12:]))
	for _, pos := range []int{0, 8, 12, 16, 16 + hl/2, 16 + hl, len(art) - 40, len(art) - 1} {
		bad := bytes.Clone(art)
		bad[pos] ^= 0x20
		if _, err := UnmarshalModel(bad); !errors.Is(err, ErrBadArtifact) {
			t.Errorf("byte %d flipped: err %v", pos, err)
		}
	}
	for _, bad := range [][]byte{nil, art[:10], art[:len(art)-1], append(bytes.Clone(art), 0)} {
		if _, err := UnmarshalModel(bad); !errors.Is(err, ErrBadArtifact) {
			t.Errorf("%d bytes: err %v", len(bad), err)
		}
	}
	// Consistently checksummed but invalid contents are rejected too.
	ver := bytes.Clone(art)
	binary.LittleEndian.PutUint32(ver[8:], 3)
	nan := bytes.Clone(art)
	binary.LittleEndian.PutUint32(nan[16+hl+4:], math.Float32bits(float32(math.NaN())))
	hdr := bytes.Clone(art)
	i := bytes.Index(hdr, []byte(`"input_dim":20`))
	copy(hdr[i:], `"input_dim":21`)
	for name, b := range map[string][]byte{"version 3": ver, "NaN weight": nan, "input_dim 21": hdr} {
		if _, err := UnmarshalModel(resum(b)); !errors.Is(err, ErrBadArtifact) {
			t.Errorf("%s: err %v", name, err)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

func TestTrainCancellation(t *testing.T) {
	rows := lowRank(7, 5000, 100, 3, Bernoulli)
	cfg := Config{D: 8, Hidden: []int{200, 100}, Epochs: 1000, Seed: 1}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Train(ctx, cfg, rows, nil)
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	t0 := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
		t.Logf("stopped %v after cancel", time.Since(t0))
		if d := time.Since(t0); d > time.Second {
			t.Errorf("Train took %v to stop", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Train did not stop after cancel")
	}
	// An already cancelled context returns at once.
	if _, err := Train(ctx, cfg, rows, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: err %v", err)
	}
}

func TestTrainRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	cfg := smallConfig()
	cfg.Epochs = 1
	cases := map[string][][]float32{
		"no rows":          nil,
		"empty rows":       {{}, {}},
		"ragged":           {{0.1, 0.2}, {0.3}},
		"NaN":              {{0.1, float32(math.NaN())}},
		"outside [0,1]":    {{0.1, 1.5}},
		"negative for ber": {{-0.1, 0.5}},
	}
	for name, rows := range cases {
		if _, err := Train(ctx, cfg, rows, nil); err == nil {
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	bad := cfg
	bad.L = -1
	if _, err := Train(ctx, bad, [][]float32{{0.5}}, nil); err == nil || !strings.Contains(err.Error(), "l = -1") {
		t.Errorf("l = -1: %v", err)
	}
	// Gaussian accepts any finite values.
	g := cfg
	g.Likelihood = Gaussian
	if _, err := Train(ctx, g, [][]float32{{-3, 5}, {2, 1e3}}, nil); err != nil {
		t.Errorf("gaussian: %v", err)
	}
}

func TestSmallShapes(t *testing.T) {
	rows := [][]float32{{0.1, 0.2, 0.3}, {0.5, 0.5, 0.9}, {1, 0, 0}}
	for _, cfg := range []Config{
		{D: 1, Hidden: []int{1}, Epochs: 2, BatchSize: 1},
		{D: 1, Linear: true, Epochs: 2, BatchSize: 2},
		{D: 2, Hidden: []int{4}, Epochs: 2, BatchSize: 64},
		{D: 1, Hidden: []int{4}, Epochs: 2, BatchSize: 2, EpsPretrain: 5},
	} {
		m, err := Train(context.Background(), cfg, rows, nil)
		if err != nil {
			t.Fatalf("%+v: %v", cfg, err)
		}
		checkInBall(t, m, rows)
	}
	if _, err := Train(context.Background(), Config{D: 3, Hidden: []int{4}, Epochs: 2}, [][]float32{{0.25}}, nil); err != nil {
		t.Fatalf("one row of one feature: %v", err)
	}
}

func TestParseConfig(t *testing.T) {
	for _, raw := range []string{"", "null", "{}", "  "} {
		c, err := ParseConfig([]byte(raw))
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		d := DefaultConfig()
		if c.D != d.D || c.L != d.L || c.EpsPretrain != 0 || len(c.Hidden) != 0 || c.Likelihood != "" ||
			c.Epochs != 0 || c.BatchSize != 64 || c.LR != 5e-4 || c.Linear || c.Seed != 0 {
			t.Errorf("%q: %+v", raw, c)
		}
	}
	c, err := ParseConfig([]byte(`{"d": 5, "l": 7.5, "eps_pretrain": 13, "hidden": [500, 500], "likelihood": "gaussian",
		"epochs": 3, "batch_size": 128, "lr": 1e-4, "seed": 18446744073709551615}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.D != 5 || c.L != 7.5 || c.EpsPretrain != 13 || len(c.Hidden) != 2 || c.Likelihood != Gaussian || c.Epochs != 3 ||
		c.BatchSize != 128 || c.LR != 1e-4 || c.Seed != math.MaxUint64 {
		t.Errorf("%+v", c)
	}
	if c, err := ParseConfig([]byte(`{"linear": true}`)); err != nil || !c.Linear || c.Hidden != nil {
		t.Errorf("linear: %+v, %v", c, err)
	}
	bad := map[string]string{
		`{"dd": 3}`:                       `unknown field "dd"`,
		`{"d": 0}`:                        "d = 0",
		`{"d": -2}`:                       "d = -2",
		`{"d": 1.5}`:                      "d: got JSON number 1.5",
		`{"l": -1}`:                       "l = -1",
		`{"l": 0}`:                        "l = 0",
		`{"eps_pretrain": -3}`:            "eps_pretrain = -3",
		`{"hidden": []}`:                  "hidden = []",
		`{"hidden": [400, 0]}`:            "hidden[1] = 0",
		`{"hidden": "big"}`:               "hidden: got JSON string",
		`{"likelihood": "poisson"}`:       `likelihood = "poisson"`,
		`{"likelihood": ""}`:              `likelihood = ""`,
		`{"linear": true, "hidden": [3]}`: "hidden must be empty",
		`{"epochs": -1}`:                  "epochs = -1",
		`{"batch_size": 0}`:               "batch_size = 0",
		`{"lr": 2}`:                       "lr = 2",
		`{"seed": -1}`:                    "seed: got JSON number -1",
		`{"d": 8} {"d": 9}`:               "trailing data",
		`{"d": 8`:                         "truncated",
		`[1, 2]`:                          "want a JSON object",
	}
	for raw, want := range bad {
		_, err := ParseConfig([]byte(raw))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to mention %q", raw, err, want)
		}
	}
}

// The likelihood left out is chosen from the rows, and a Gaussian VLM standardises its inputs itself:
// trained on rows × 1000 + 5 it encodes exactly as when trained on the rows (the standardised inputs are
// the same), and decodes on the rows' own scale. Its artifact keeps the standardisation.
func TestGaussianStandardisesItsInputs(t *testing.T) {
	if got := chooseLikelihood([][]float32{{0, 0.5}, {1, 0.25}}); got != Bernoulli {
		t.Errorf("pixels: %s", got)
	}
	if got := chooseLikelihood([][]float32{{0, 0.5}, {1, 1.25}}); got != Gaussian {
		t.Errorf("a value above 1: %s", got)
	}
	r := rand.New(rand.NewPCG(4, 4))
	rows := make([][]float32, 300)
	big := make([][]float32, len(rows))
	for i := range rows {
		rows[i] = make([]float32, 6)
		big[i] = make([]float32, 6)
		for j := range rows[i] {
			rows[i][j] = float32(r.NormFloat64()*float64(j+1) - 2)
			big[i][j] = 1000*rows[i][j] + 5
		}
	}
	cfg := smallConfig()
	cfg.Likelihood, cfg.Epochs = "", 3
	m, err := Train(context.Background(), cfg, rows, nil)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := Train(context.Background(), cfg, big, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Config().Likelihood != Gaussian || mb.Config().Likelihood != Gaussian {
		t.Fatalf("likelihoods %s, %s; want gaussian for tabular rows", m.Config().Likelihood, mb.Config().Likelihood)
	}
	z, _ := m.Encode(rows[:20])
	zb, _ := mb.Encode(big[:20])
	for i := range z {
		for k := range z[i] {
			if math.Abs(float64(z[i][k]-zb[i][k])) > 1e-3*(1+math.Abs(float64(z[i][k]))) {
				t.Fatalf("row %d: latent %v on the rows, %v on rows × 1000 + 5", i, z[i], zb[i])
			}
		}
	}
	x, _ := m.Decode(z)
	xb, _ := mb.Decode(zb)
	for i := range x {
		for j := range x[i] {
			if want := 1000*float64(x[i][j]) + 5; math.Abs(float64(xb[i][j])-want) > 1e-2*(1+math.Abs(want)) {
				t.Fatalf("row %d feature %d: decoded %v, want 1000 × %v + 5", i, j, xb[i][j], x[i][j])
			}
		}
	}
	art, err := mb.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalModel(art)
	if err != nil {
		t.Fatal(err)
	}
	zr, _ := back.Encode(big[:20])
	if fmt.Sprint(zr) != fmt.Sprint(zb) {
		t.Error("the artifact does not keep the standardisation")
	}
	// A version 1 artifact (no standardisation) still loads.
	mv1 := randomModel(3, smallConfig(), 6)
	a1, _ := mv1.MarshalBinary()
	binary.LittleEndian.PutUint32(a1[8:], 1)
	if _, err := UnmarshalModel(resum(a1)); err != nil {
		t.Errorf("version 1 artifact: %v", err)
	}
}

// resum recomputes an artifact's SHA-256 trailer after an edit.
func resum(b []byte) []byte {
	body := b[:len(b)-32]
	s := sha256.Sum256(body)
	return append(bytes.Clone(body), s[:]...)
}

// Resolve: the thesis's 20 epochs and {400, 150, 50} on Fashion-MNIST's 45,000 images, longer and
// narrower on small tables, and explicit values kept.
func TestResolveScalesWithTheData(t *testing.T) {
	c := DefaultConfig().withDefaults()
	if r := c.Resolve(45000, 784); r.Epochs != 20 || !slices.Equal(r.Hidden, []int{400, 150, 50}) {
		t.Errorf("Fashion-MNIST: %d epochs, hidden %v", r.Epochs, r.Hidden)
	}
	if r := c.Resolve(400, 30); r.Epochs != 429 || !slices.Equal(r.Hidden, []int{120, 60, 30}) {
		t.Errorf("WDBC: %d epochs, hidden %v", r.Epochs, r.Hidden)
	}
	for _, n := range []int{1, 10, 64, 65, 1000, 10000, 1 << 20} {
		r := c.Resolve(n, 5)
		steps := (n + 63) / 64
		if r.Epochs < AutoMinEpochs || r.Epochs > AutoMaxEpochs || (r.Epochs < AutoMaxEpochs && r.Epochs*steps < AutoMinSteps) {
			t.Errorf("n %d: %d epochs of %d steps", n, r.Epochs, steps)
		}
		if err := r.validate(); err != nil {
			t.Errorf("n %d: %v", n, err)
		}
	}
	c.Epochs, c.Hidden = 7, []int{9}
	if r := c.Resolve(400, 30); r.Epochs != 7 || !slices.Equal(r.Hidden, []int{9}) {
		t.Errorf("explicit values changed: %+v", r)
	}
	lin := Config{Linear: true}.withDefaults().Resolve(400, 30)
	if lin.Hidden != nil {
		t.Errorf("linear VLM got hidden layers %v", lin.Hidden)
	}
}
