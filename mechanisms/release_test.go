package mechanisms

import (
	"math"
	"testing"
)

// A finite encoding is released as Randomise releases it; a NaN, an infinity or a wrong length is
// released from the set's centre (ok false) with the same noise draw, for a ball and for a box.
func TestReleaseEncoding(t *testing.T) {
	box := Box{Lo: []float64{0, 10}, Hi: []float64{2, 30}}
	for _, set := range []OutputSet{L1Ball{D: 2, Radius: 3}, box} {
		rnd, err := NewRandomiser(RandomiserLaplace, set, 1)
		if err != nil {
			t.Fatal(err)
		}
		x := make([]float64, 2)
		got, ok, err := ReleaseEncoding(rnd, []float32{0.5, 12}, x, NewSeededSource(1))
		want, _ := rnd.Randomise([]float64{0.5, 12}, NewSeededSource(1))
		if err != nil || !ok || got[0] != want[0] || got[1] != want[1] {
			t.Fatalf("%T finite: %v %v %v, want %v", set, got, ok, err, want)
		}
		centre := make([]float64, 2)
		Centre(set, centre)
		if _, isBox := set.(Box); isBox && (centre[0] != 1 || centre[1] != 20) || !isBox && (centre[0] != 0 || centre[1] != 0) {
			t.Fatalf("%T centre %v", set, centre)
		}
		fromCentre, _ := rnd.Randomise(centre, NewSeededSource(2))
		for _, z := range [][]float32{{float32(math.NaN()), 1}, {float32(math.Inf(1)), 0}, {1}, {1, 2, 3}} {
			got, ok, err := ReleaseEncoding(rnd, z, x, NewSeededSource(2))
			if err != nil || ok || got[0] != fromCentre[0] || got[1] != fromCentre[1] {
				t.Fatalf("%T %v: %v %v %v, want the centre's release %v", set, z, got, ok, err, fromCentre)
			}
		}
	}
}
