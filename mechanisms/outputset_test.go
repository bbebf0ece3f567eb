package mechanisms

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestOutputSetValidate(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, c := range []struct {
		s    OutputSet
		want string // "" means valid
	}{
		{L1Ball{D: 3, Radius: 1}, ""},
		{L1Ball{D: 1, Radius: 1e300}, ""},
		{L1Ball{D: 0, Radius: 1}, "dimension"},
		{L1Ball{D: 2, Radius: 0}, "radius"},
		{L1Ball{D: 2, Radius: -1}, "radius"},
		{L1Ball{D: 2, Radius: nan}, "radius"},
		{L1Ball{D: 2, Radius: inf}, "radius"},
		{Box{Lo: []float64{0, -1}, Hi: []float64{1, 1}}, ""},
		{Box{}, "dimension 0"},
		{Box{Lo: []float64{0}, Hi: []float64{1, 2}}, "differ"},
		{Box{Lo: []float64{0, nan}, Hi: []float64{1, 2}}, "Lo[1] = NaN"},
		{Box{Lo: []float64{0, 0}, Hi: []float64{1, inf}}, "Hi[1] = +Inf"},
		{Box{Lo: []float64{0, 2}, Hi: []float64{1, 2}}, "Lo[1] < Hi[1]"},
		{Box{Lo: []float64{-math.MaxFloat64}, Hi: []float64{math.MaxFloat64}}, "overflows"},
	} {
		err := c.s.Validate()
		if c.want == "" {
			if err != nil {
				t.Errorf("%#v.Validate() = %v, want nil", c.s, err)
			}
			continue
		}
		if err == nil || !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%#v.Validate() = %v, want an error mentioning %q", c.s, err, c.want)
		}
	}
}

func TestOutputSetClipContains(t *testing.T) {
	ball := L1Ball{D: 3, Radius: 2}
	box := Box{Lo: []float64{-1, 0, 10}, Hi: []float64{1, 0.5, 20}}
	for _, c := range []struct {
		s    OutputSet
		h    []float64
		want []float64 // nil: only check membership
	}{
		{ball, []float64{0.5, -0.5, 0.5}, []float64{0.5, -0.5, 0.5}},
		{ball, []float64{4, 0, -4}, []float64{1, 0, -1}},
		{ball, []float64{0, 0, 0}, []float64{0, 0, 0}},
		{ball, []float64{1e300, -1e300, math.MaxFloat64}, nil},
		{ball, []float64{2, 0, 0}, nil}, // on the boundary: may be shrunk by 2⁻⁴⁸
		{box, []float64{0, 0.25, 15}, []float64{0, 0.25, 15}},
		{box, []float64{-7, 9, 1e300}, []float64{-1, 0.5, 20}},
		{box, []float64{-math.MaxFloat64, -1e-300, 10}, []float64{-1, 0, 10}},
	} {
		got, err := c.s.Clip(c.h)
		if err != nil {
			t.Fatalf("%#v.Clip(%v): %v", c.s, c.h, err)
		}
		if !c.s.Contains(got) {
			t.Errorf("%#v.Clip(%v) = %v is not contained in the set", c.s, c.h, got)
		}
		if c.want != nil && !slices.EqualFunc(got, c.want, func(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Abs(b) }) {
			t.Errorf("%#v.Clip(%v) = %v, want %v", c.s, c.h, got, c.want)
		}
		// Contains(h) ⇔ Clip(h) = h; Clip is idempotent.
		if c.s.Contains(c.h) != slices.Equal(got, c.h) {
			t.Errorf("%#v: Contains(%v) = %v but Clip returned %v", c.s, c.h, c.s.Contains(c.h), got)
		}
		again, _ := c.s.Clip(got)
		if !slices.Equal(again, got) {
			t.Errorf("%#v: Clip not idempotent: %v then %v", c.s, got, again)
		}
	}
	// Errors name the offending index; Contains is false for the same inputs.
	for _, s := range []OutputSet{ball, box} {
		for _, c := range []struct {
			h    []float64
			want string
		}{
			{[]float64{0, math.NaN(), 0}, "h[1] = NaN"},
			{[]float64{0, 0, math.Inf(-1)}, "h[2] = -Inf"},
			{[]float64{0, 0}, "len(h) = 2"},
			{nil, "len(h) = 0"},
		} {
			if _, err := s.Clip(c.h); err == nil || !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%#v.Clip(%v) error = %v, want one mentioning %q", s, c.h, err, c.want)
			}
			if s.Contains(c.h) {
				t.Errorf("%#v.Contains(%v) = true", s, c.h)
			}
		}
		if s.Dim() != 3 {
			t.Errorf("%#v.Dim() = %d, want 3", s, s.Dim())
		}
	}
	// An invalid set clips nothing and contains nothing.
	bad := Box{Lo: []float64{1}, Hi: []float64{0}}
	if _, err := bad.Clip([]float64{0.5}); err == nil {
		t.Error("invalid Box clipped without error")
	}
	if bad.Contains([]float64{0.5}) || (L1Ball{D: 1, Radius: -1}).Contains([]float64{0}) {
		t.Error("invalid set contains a point")
	}
}

// TestRandomiserKeepsItsOwnSet: mutating the Box given to NewRandomiser, or
// the one returned by Set(), does not change the mechanism's set.
func TestRandomiserKeepsItsOwnSet(t *testing.T) {
	for _, name := range RandomiserNames() {
		box := Box{Lo: []float64{0, 0}, Hi: []float64{1, 1}}
		r, err := NewRandomiser(name, &box, 1)
		if err != nil {
			t.Fatal(err)
		}
		box.Lo[0], box.Hi[1] = -100, 100
		s := r.Set().(Box)
		if !slices.Equal(s.Lo, []float64{0, 0}) || !slices.Equal(s.Hi, []float64{1, 1}) {
			t.Errorf("%s: Set() = %v after mutating the caller's Box", name, s)
		}
		s.Lo[0] = -5
		if r.Set().(Box).Lo[0] != 0 {
			t.Errorf("%s: Set() returned the internal slices", name)
		}
	}
}
