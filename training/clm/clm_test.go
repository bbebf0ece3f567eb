package clm

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// Image views keep the shape and the value range; with no padding, flip or jitter a view is the image.
func TestImageViews(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	rows := make([][]float32, 10)
	for i := range rows {
		rows[i] = make([]float32, 8*6*2)
		for j := range rows[i] {
			rows[i][j] = r.Float32()
		}
	}
	c, err := Config{ImageShape: []int{8, 6, 2}}.Resolve(len(rows), 96)
	if err != nil {
		t.Fatal(err)
	}
	if c.Augment != AugmentImage || c.CropPad != 1 {
		t.Fatalf("resolved augment %q, crop_pad %d; want image, 1", c.Augment, c.CropPad)
	}
	a := newAugmenter(c, rows)
	dst := make([]float32, 96)
	changed := false
	for range 50 {
		a.view(r, rows[3], dst)
		for _, v := range dst {
			if v < 0 || v > 1 {
				t.Fatalf("a view has %v, outside the rows' range [0, 1]", v)
			}
		}
		changed = changed || !equal(dst, rows[3])
	}
	if !changed {
		t.Error("50 views were all the image itself")
	}
	no := false
	c.CropPad, c.Flip, c.Jitter = 0, &no, 0
	newAugmenter(c, rows).view(r, rows[3], dst)
	if !equal(dst, rows[3]) {
		t.Error("a view without padding, flip or jitter differs from the image")
	}
	// A flip only, with a padding of 0: each row of pixels reversed, channels kept together.
	yes := true
	c.Flip = &yes
	for range 20 {
		newAugmenter(c, rows).view(r, rows[3], dst)
		if equal(dst, rows[3]) {
			continue
		}
		for y := range 8 {
			for x := range 6 {
				for ch := range 2 {
					if dst[(y*6+x)*2+ch] != rows[3][(y*6+5-x)*2+ch] {
						t.Fatalf("flipped pixel (%d, %d, %d) wrong", y, x, ch)
					}
				}
			}
		}
		return
	}
	t.Error("20 views with flip probability 1/2 never flipped")
}

// Tabular views replace about mask_rate of the features with other rows' values; with neither
// masking nor noise a view is the row.
func TestTabularViews(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	rows := make([][]float32, 200)
	for i := range rows {
		rows[i] = []float32{float32(i), float32(1000 + i), float32(2000 + i)}
	}
	c, err := Config{MaskRate: 0.5, NoiseStd: 1e-9}.Resolve(len(rows), 3)
	if err != nil {
		t.Fatal(err)
	}
	a := newAugmenter(c, rows)
	dst := make([]float32, 3)
	replaced := 0
	for range 1000 {
		a.view(r, rows[7], dst)
		for j := range dst {
			if math.Abs(float64(dst[j]-rows[7][j])) > 1e-3 {
				replaced++
			}
		}
	}
	// 3,000 features at rate 0.5, a replacement hitting the same row 1/200 of the time: 1,492.5 ± 27.
	if replaced < 1380 || replaced > 1605 {
		t.Errorf("%d of 3000 features replaced, want about 1490", replaced)
	}
	c.MaskRate, c.NoiseStd = 0, 0
	newAugmenter(c, rows).view(r, rows[7], dst)
	if !equal(dst, rows[7]) {
		t.Errorf("view %v of row %v without masking or noise", dst, rows[7])
	}
}

func equal(a, b []float32) bool {
	return bytes.Equal(f32bytes(a), f32bytes(b))
}

func f32bytes(v []float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		u := math.Float32bits(x)
		b = append(b, byte(u), byte(u>>8), byte(u>>16), byte(u>>24))
	}
	return b
}

// clusters returns n rows of dim features around k centres (centres N(0, 3²), points N(centre, 1)).
func clusters(seed uint64, n, dim, k int) ([][]float32, []int) {
	r := rand.New(rand.NewPCG(seed, 9))
	centres := make([][]float64, k)
	for c := range centres {
		centres[c] = make([]float64, dim)
		for j := range dim {
			centres[c][j] = 3 * r.NormFloat64()
		}
	}
	rows, labels := make([][]float32, n), make([]int, n)
	for i := range rows {
		labels[i] = i % k
		rows[i] = make([]float32, dim)
		for j := range dim {
			rows[i][j] = float32(centres[labels[i]][j] + r.NormFloat64())
		}
	}
	return rows, labels
}

// A CLM trained on clustered rows with tabular views and training noise separates the clusters in its
// clean latent (nearest centroid of the training latents, on new rows), keeps every latent in the ℓ1
// ball, learns (the final NT-Xent loss well below the chance level log(2B − 1)), and its artifact
// encodes the same after a round trip and is refused when tampered with.
func TestCLMSeparatesClusters(t *testing.T) {
	rows, labels := clusters(1, 600, 20, 4)
	c := Config{D: 8, L: 5, EpsPretrain: 20, Epochs: 15, BatchSize: 64}
	m, err := Train(context.Background(), c, rows[:400], nil)
	if err != nil {
		t.Fatal(err)
	}
	// Chance is log 127 ≈ 4.84; rows of one cluster look alike, so about 32 of the 127 candidates are
	// hard to tell from the partner and the loss cannot go much below log 32 ≈ 3.5.
	if chance := math.Log(2*64 - 1); !(m.TrainLoss < chance-0.5) {
		t.Errorf("final NT-Xent loss %.3f, chance level %.3f: it did not learn", m.TrainLoss, chance)
	}
	ztr, err := m.Encode(rows[:400])
	if err != nil {
		t.Fatal(err)
	}
	zte, err := m.Encode(rows[400:])
	if err != nil {
		t.Fatal(err)
	}
	centroids := make([][]float64, 4)
	counts := make([]int, 4)
	for c := range centroids {
		centroids[c] = make([]float64, 8)
	}
	for i, z := range ztr {
		counts[labels[i]]++
		for j, v := range z {
			centroids[labels[i]][j] += float64(v)
		}
	}
	right := 0
	for i, z := range zte {
		best, bestD := -1, math.Inf(1)
		for c := range centroids {
			d := 0.0
			for j, v := range z {
				e := float64(v) - centroids[c][j]/float64(counts[c])
				d += e * e
			}
			if d < bestD {
				best, bestD = c, d
			}
		}
		if best == labels[400+i] {
			right++
		}
		s := 0.0
		for _, v := range z {
			s += math.Abs(float64(v))
		}
		if s > 5 {
			t.Fatalf("latent %d has ℓ1 norm %v > l = 5", i, s)
		}
	}
	if acc := float64(right) / 200; acc < 0.95 {
		t.Errorf("nearest-centroid accuracy on the clean latents %.3f, want ≥ 0.95", acc)
	}

	art, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Load(art)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := back.Encode(rows[400:])
	for i := range again {
		if !equal(again[i], zte[i]) {
			t.Fatalf("row %d encodes to %v after a round trip, %v before", i, again[i], zte[i])
		}
	}
	bad := bytes.Clone(art)
	bad[len(bad)/2] ^= 1
	if _, err := Load(bad); !errors.Is(err, ErrArtifact) {
		t.Errorf("a tampered artifact loaded: %v", err)
	}
}

// Bad input is a clear error.
func TestTrainRefusesBadInput(t *testing.T) {
	rows, _ := clusters(2, 20, 4, 2)
	rows[5][2] = float32(math.NaN())
	if _, err := Train(context.Background(), Config{}, rows, nil); err == nil || !bytes.Contains([]byte(err.Error()), []byte("row 6, feature 3")) {
		t.Errorf("NaN feature: %v", err)
	}
	rows, _ = clusters(2, 20, 4, 2)
	if _, err := Train(context.Background(), Config{ImageShape: []int{3, 3}}, rows, nil); err == nil || !bytes.Contains([]byte(err.Error()), []byte("image_shape")) {
		t.Errorf("an image shape of 9 values for 4 features: %v", err)
	}
	if _, err := ParseConfig([]byte(`{"tau": 0}`)); err == nil {
		t.Error("tau 0 accepted")
	}
	if _, err := ParseConfig([]byte(`{"augment": "audio"}`)); err == nil {
		t.Error(`augment "audio" accepted`)
	}
}

func TestEpsPretrainForFollowsTableB1(t *testing.T) {
	for _, c := range []struct{ eps, want float64 }{{10, 0}, {8, 0}, {6, 70}, {4, 30}, {2, 20}, {1, 20}} {
		if got := EpsPretrainFor(0.7 * c.eps); got != c.want {
			t.Errorf("total ε %g: eps_pretrain %g, Table B.1 says %g", c.eps, got, c.want)
		}
	}
}
