package idenc

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/ldpsql/ldpsql/mechanisms"
)

type rowSlice struct{ b [][][]float32 }

func (r *rowSlice) Next() ([][]float32, error) {
	if len(r.b) == 0 {
		return nil, io.EOF
	}
	b := r.b[0]
	r.b = r.b[1:]
	return b, nil
}

func TestFitLoadEncode(t *testing.T) {
	p := NewPlugin()
	if d := p.Describe(); d.Ready() || !d.CanFit || !d.HasDecoder || d.Name != Name {
		t.Fatalf("unfitted: %+v", d)
	}
	if _, err := p.Encode([][]float32{{1}}); err == nil {
		t.Error("encoded without a model")
	}
	aux := &rowSlice{[][][]float32{{{1, -5, 0}, {3, -2, 0}}, {}, {{2, -9, 0}}}}
	art, err := p.Fit(json.RawMessage(`{}`), 3, aux)
	if err != nil {
		t.Fatal(err)
	}
	if p.Describe().Ready() {
		t.Error("Fit changed the loaded model")
	}
	if err := p.Load(art); err != nil {
		t.Fatal(err)
	}
	d := p.Describe()
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	// The third feature is constant over the auxiliary rows: its side is constantWidth wide.
	want := [][]float64{{1, -9, 0}, {3, -2, float64(float32(constantWidth))}}
	for k := range 3 {
		if d.OutputSet.Lo[k] != want[0][k] || d.OutputSet.Hi[k] != want[1][k] {
			t.Fatalf("box %v %v", d.OutputSet.Lo, d.OutputSet.Hi)
		}
	}
	z, err := p.Encode([][]float32{{0, 0, 0}, {2, -3, 0}, {100, float32(math.Inf(-1)), 5}})
	if err != nil {
		t.Fatal(err)
	}
	exp := [][]float32{{1, -2, 0}, {2, -3, 0}, {3, -9, constantWidth}}
	for i := range exp {
		for k := range exp[i] {
			if z[i][k] != exp[i][k] {
				t.Fatalf("row %d: %v, want %v", i, z[i], exp[i])
			}
		}
		if !d.OutputSet.Contains(z[i]) {
			t.Errorf("row %d outside the box", i)
		}
	}
	if _, err := p.Encode([][]float32{{float32(math.NaN()), 0, 0}}); err == nil || !strings.Contains(err.Error(), "NaN") {
		t.Errorf("NaN: %v", err)
	}
	x, _ := p.Decode([][]float32{{7, 8, 9}})
	if x[0][2] != 9 {
		t.Errorf("decode %v", x)
	}
}

func TestFitAndLoadErrors(t *testing.T) {
	p := NewPlugin()
	if _, err := p.Fit(json.RawMessage(`{"d": 1}`), 1, &rowSlice{}); err == nil {
		t.Error("parameters accepted")
	}
	if _, err := p.Fit(nil, 1, &rowSlice{}); err == nil || !strings.Contains(err.Error(), "no rows") {
		t.Errorf("no rows: %v", err)
	}
	if _, err := p.Fit(nil, 2, &rowSlice{[][][]float32{{{1, float32(math.Inf(1))}}}}); err == nil {
		t.Error("Inf accepted in auxiliary data")
	}
	if _, err := p.Fit(nil, 2, &rowSlice{[][][]float32{{{1}}}}); err == nil {
		t.Error("short row accepted")
	}
	boom := errors.New("boom")
	if _, err := Fit(2, func() ([][]float32, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("source error: %v", err)
	}
	for _, bad := range []string{`{`, `{"format":"x","lo":[0],"hi":[1]}`, `{"format":"ldpsql-identity/1","lo":[0],"hi":[]}`,
		`{"format":"ldpsql-identity/1","lo":[2],"hi":[1]}`, `{"format":"ldpsql-identity/1","lo":[],"hi":[]}`} {
		if err := p.Load([]byte(bad)); err == nil {
			t.Errorf("%s loaded", bad)
		}
	}
}

// A feature constant over the auxiliary data still gives a valid box (Lo < Hi), with a negligible side.
func TestFitConstantFeature(t *testing.T) {
	rows := [][]float32{{0, 1}, {0, 2}, {0, 3}}
	done := false
	m, err := Fit(2, func() ([][]float32, error) {
		if done {
			return nil, io.EOF
		}
		done = true
		return rows, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !(m.Lo[0] < m.Hi[0]) || m.Hi[0]-m.Lo[0] > 1e-3 || m.Lo[1] != 1 || m.Hi[1] != 3 {
		t.Fatalf("box %v .. %v", m.Lo, m.Hi)
	}
	if _, err := mechanisms.NewVectorLaplace(mechanisms.Box{Lo: []float64{float64(m.Lo[0]), 1}, Hi: []float64{float64(m.Hi[0]), 3}}, 1); err != nil {
		t.Fatalf("the fitted box is not a valid Laplace set: %v", err)
	}
}
