package nn

import (
	"math"
	"testing"

	"github.com/ldpsql/ldpsql/training/dp"
)

// NewDPSGD fills the record from the accountant (spent ε ≤ the target, δ = 1/rows by default); Privatise
// adds N(0, (σ·Clip)²) and divides by the batch: on a zero sum of 200,000 coordinates (split over
// tensors so that several workers draw) the mean is 0 and the variance (σ·Clip/Batch)², each within 5
// standard errors; a seeded run repeats.
func TestDPSGDNoise(t *testing.T) {
	seed := &[32]byte{9}
	d, err := NewDPSGD(dp.Target{Epsilon: 2}, 10_000, 100, 500, 3, seed)
	if err != nil {
		t.Fatal(err)
	}
	r := d.Record
	if r.Delta != 1e-4 || r.SamplingRate != 0.01 || r.Steps != 500 || !(r.Spent <= 2 && r.Spent > 1.95) || d.ChunkRows() != 120 {
		t.Fatalf("record %+v, chunk %d", r, d.ChunkRows())
	}
	grads := [][]float32{make([]float32, 150_000), make([]float32, 50_000)}
	d.Privatise(grads)
	var sum, sq float64
	n := 0.0
	for _, g := range grads {
		for _, v := range g {
			sum += float64(v)
			sq += float64(v) * float64(v)
			n++
		}
	}
	want := math.Pow(r.NoiseMultiplier*3/100, 2)
	if mean := sum / n; math.Abs(mean) > 5*math.Sqrt(want/n) {
		t.Errorf("noise mean %v", mean)
	}
	if v := sq / n; math.Abs(v-want) > 5*want*math.Sqrt(2/n) {
		t.Errorf("noise variance %v, want %v", v, want)
	}
	again, _ := NewDPSGD(dp.Target{Epsilon: 2}, 10_000, 100, 500, 3, seed)
	g2 := [][]float32{make([]float32, 150_000), make([]float32, 50_000)}
	again.Privatise(g2)
	if g2[1][7] != grads[1][7] || len(again.Sample(nil)) != len(d.Sample(nil)) {
		t.Error("a seeded run did not repeat")
	}
}
