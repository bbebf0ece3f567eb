package sdk

import (
	"errors"
	"testing"
)

func TestModelSlot(t *testing.T) {
	var s ModelSlot[int]
	if _, err := s.Get(); !errors.Is(err, ErrNoModel) || s.Peek() != nil {
		t.Fatalf("empty slot: %v", err)
	}
	bad := errors.New("bad artifact")
	if err := s.Load([]byte("x"), func([]byte) (*int, error) { return nil, bad }); err != bad || s.Peek() != nil {
		t.Fatalf("failed load changed the slot: %v", err)
	}
	seven := 7
	if err := s.Load(nil, func([]byte) (*int, error) { return &seven, nil }); err != nil {
		t.Fatal(err)
	}
	if m, err := s.Get(); err != nil || *m != 7 {
		t.Fatalf("%v %v", m, err)
	}
}

// doubler is a model for TestModelEncoder: Encode doubles, Decode halves.
type doubler struct{ dim int }

func (d *doubler) Encode(rows [][]float32) ([][]float32, error) {
	out := make([][]float32, len(rows))
	for i, r := range rows {
		for _, v := range r {
			out[i] = append(out[i], 2*v)
		}
	}
	return out, nil
}

func (d *doubler) Decode(z [][]float32) ([][]float32, error) {
	out := make([][]float32, len(z))
	for i, r := range z {
		for _, v := range r {
			out[i] = append(out[i], v/2)
		}
	}
	return out, nil
}

// A ModelEncoder refuses to encode or decode before Load and declares no set; after Load it serves the
// model and describes it with Shape, keeping Info's name and flags; a failed Load keeps the old model.
func TestModelEncoder(t *testing.T) {
	p := &ModelEncoder[doubler, *doubler]{
		Info: Description{Name: "dbl", Version: "1", CanFit: true},
		Parse: func(b []byte) (*doubler, error) {
			if len(b) == 0 {
				return nil, errors.New("empty artifact")
			}
			return &doubler{dim: len(b)}, nil
		},
		Shape: func(m *doubler) (int, int, OutputSet) { return m.dim, m.dim, L1Ball(float64(m.dim)) },
	}
	if d := p.Describe(); d.Ready() || d.Name != "dbl" || !d.HasDecoder || !d.CanFit {
		t.Fatalf("before Load: %+v", d)
	}
	if _, err := p.Encode([][]float32{{1}}); !errors.Is(err, ErrNoModel) {
		t.Fatalf("Encode before Load: %v", err)
	}
	if _, err := p.Decode([][]float32{{1}}); !errors.Is(err, ErrNoModel) {
		t.Fatalf("Decode before Load: %v", err)
	}
	if err := p.Load([]byte("ab")); err != nil {
		t.Fatal(err)
	}
	if err := p.Load(nil); err == nil || p.Loaded().dim != 2 {
		t.Fatalf("a failed Load: %v, model %+v", err, p.Loaded())
	}
	d := p.Describe()
	if d.InputDim != 2 || d.OutputDim != 2 || d.OutputSet.Kind != L1BallSet || d.OutputSet.Radius != 2 {
		t.Fatalf("after Load: %+v", d)
	}
	z, _ := p.Encode([][]float32{{1, 3}})
	x, _ := p.Decode(z)
	if z[0][1] != 6 || x[0][1] != 3 {
		t.Fatalf("encode %v, decode %v", z, x)
	}
}
