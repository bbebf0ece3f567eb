package mechanisms

import (
	"math"
	"slices"
)

// OutputSet is the set an encoder (an untrusted plugin) declares its outputs
// to lie in. The host does not trust the declaration: it re-clips every
// output into the set (Clip) immediately before a [VectorRandomiser] adds
// noise, and the randomiser's privacy guarantee is calibrated to the set's
// geometry (its ℓ1 diameter for Laplace, its bounding cube for Duchi, its
// maximal ℓ2 norm for PrivUnit), so it holds whatever the encoder emits.
//
// This package implements OutputSet by [L1Ball] and [Box]; [NewRandomiser]
// accepts only those two (it needs their geometry, which an arbitrary
// implementation could misstate).
type OutputSet interface {
	// Dim returns the dimension d of the vectors in the set.
	Dim() int
	// Clip returns a fresh vector inside the set: h itself (copied) if
	// Contains(h), otherwise a projection of h onto the set. h is not
	// modified. It returns an error wrapping ErrInvalidArgument if the set
	// is invalid, if len(h) ≠ Dim(), or if h has a NaN or ±Inf element
	// (the error names its index). The result always satisfies Contains.
	Clip(h []float64) ([]float64, error)
	// Contains reports whether h has length Dim(), is finite and lies in
	// the set (for an invalid set it reports false). Contains(h) holds
	// exactly when Clip(h) returns h unchanged.
	Contains(h []float64) bool
	// Validate returns an error wrapping ErrInvalidArgument unless the set
	// is well formed: dimension ≥ 1, and finite, positive extents.
	Validate() error
}

// L1Ball is the ℓ1 ball {h ∈ ℝᴰ : ‖h‖₁ ≤ Radius}, the output set of the
// thesis' ν₁ activation (Eq 5.2). Two points of the ball are at ℓ1 distance
// at most 2·Radius, the sensitivity the Laplace mechanism uses.
//
// Clip is [ClipL1]: h·min(1, Radius/‖h‖₁), computed so that the float64 sum
// of |hᵢ| in any order is ≤ Radius. Contains uses the same rigorous test,
// so a vector whose ℓ1 norm is within about D·2⁻⁵⁰ (relative) of Radius may
// be reported as outside and shrunk by that much.
type L1Ball struct {
	D      int     // dimension, ≥ 1
	Radius float64 // l, positive and finite
}

// Dim returns D.
func (b L1Ball) Dim() int { return b.D }

// Validate checks D ≥ 1 and 0 < Radius < +Inf.
func (b L1Ball) Validate() error {
	const who = "L1Ball"
	if b.D < 1 {
		return invalid("%s: dimension D = %d must be at least 1", who, b.D)
	}
	if math.IsNaN(b.Radius) || math.IsInf(b.Radius, 0) || !(b.Radius > 0) {
		return invalid("%s: radius = %v must be positive and finite", who, b.Radius)
	}
	return nil
}

// Clip returns h rescaled into the ball (see [ClipL1]).
func (b L1Ball) Clip(h []float64) ([]float64, error) {
	const who = "L1Ball.Clip"
	if err := b.Validate(); err != nil {
		return nil, err
	}
	if len(h) != b.D {
		return nil, invalid("%s: len(h) = %d, set dimension is %d", who, len(h), b.D)
	}
	if err := checkFinite(who, "h", h); err != nil {
		return nil, err
	}
	return ClipL1(h, b.Radius)
}

// Contains reports whether h is a finite D-vector whose ℓ1 norm is certainly
// ≤ Radius (see [L1Ball]).
func (b L1Ball) Contains(h []float64) bool {
	if b.Validate() != nil || len(h) != b.D || checkFinite("", "", h) != nil {
		return false
	}
	return l1WithinRadius(h, b.Radius)
}

// Box is the axis-aligned box {h : Lo[i] ≤ h[i] ≤ Hi[i] for every i}, the
// output set of an encoder with per-coordinate ranges (and the raw-feature
// domain of the thesis' Laplace baseline, §7.1). Clip is [ClipBox].
//
// Lo and Hi must have the same length d ≥ 1, be finite, and satisfy
// Lo[i] < Hi[i] with a finite width Hi[i] − Lo[i].
type Box struct {
	Lo, Hi []float64
}

// Dim returns len(Lo).
func (b Box) Dim() int { return len(b.Lo) }

// Validate checks the bounds (see [Box]).
func (b Box) Validate() error {
	const who = "Box"
	if len(b.Lo) == 0 {
		return invalid("%s: empty bounds (dimension 0)", who)
	}
	if len(b.Hi) != len(b.Lo) {
		return invalid("%s: len(Lo) = %d, len(Hi) = %d differ", who, len(b.Lo), len(b.Hi))
	}
	if err := checkFinite(who, "Lo", b.Lo); err != nil {
		return err
	}
	if err := checkFinite(who, "Hi", b.Hi); err != nil {
		return err
	}
	for i := range b.Lo {
		if !(b.Lo[i] < b.Hi[i]) {
			return invalid("%s: need Lo[%d] < Hi[%d], got Lo = %v, Hi = %v", who, i, i, b.Lo[i], b.Hi[i])
		}
		if math.IsInf(b.Hi[i]-b.Lo[i], 0) {
			return invalid("%s: width Hi[%d] − Lo[%d] = %v − (%v) overflows", who, i, i, b.Hi[i], b.Lo[i])
		}
	}
	return nil
}

// Clip clamps each coordinate into [Lo[i], Hi[i]] (see [ClipBox]).
func (b Box) Clip(h []float64) ([]float64, error) {
	const who = "Box.Clip"
	if err := b.Validate(); err != nil {
		return nil, err
	}
	if len(h) != len(b.Lo) {
		return nil, invalid("%s: len(h) = %d, set dimension is %d", who, len(h), len(b.Lo))
	}
	if err := checkFinite(who, "h", h); err != nil {
		return nil, err
	}
	return ClipBox(h, b.Lo, b.Hi)
}

// Contains reports whether h is a finite vector of the right length with
// Lo[i] ≤ h[i] ≤ Hi[i] for every i.
func (b Box) Contains(h []float64) bool {
	if b.Validate() != nil || len(h) != len(b.Lo) {
		return false
	}
	for i, v := range h {
		if !(b.Lo[i] <= v && v <= b.Hi[i]) { // false for NaN
			return false
		}
	}
	return true
}

// copyOutputSet returns a validated private copy of s, which must be an
// L1Ball or a Box (or a non-nil pointer to one): randomisers keep their own
// copy so that a caller mutating Box slices later cannot change the set the
// noise was calibrated to.
func copyOutputSet(who string, s OutputSet) (OutputSet, error) {
	var c OutputSet
	switch v := s.(type) {
	case nil:
		return nil, invalid("%s: output set is nil", who)
	case L1Ball:
		c = v
	case *L1Ball:
		if v == nil {
			return nil, invalid("%s: output set is a nil *L1Ball", who)
		}
		c = *v
	case Box:
		c = Box{Lo: slices.Clone(v.Lo), Hi: slices.Clone(v.Hi)}
	case *Box:
		if v == nil {
			return nil, invalid("%s: output set is a nil *Box", who)
		}
		c = Box{Lo: slices.Clone(v.Lo), Hi: slices.Clone(v.Hi)}
	default:
		return nil, invalid("%s: unsupported output set type %T (supported: L1Ball, Box)", who, s)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// cloneOutputSet returns a copy of a set made by copyOutputSet, for Set().
func cloneOutputSet(s OutputSet) OutputSet {
	if b, ok := s.(Box); ok {
		return Box{Lo: slices.Clone(b.Lo), Hi: slices.Clone(b.Hi)}
	}
	return s
}

// affineFrame maps a set's coordinates to the working coordinates of a
// randomiser and back: z = (x − mid)/half, x = mid + half·z, coordinatewise.
// For a Box, mid and half are the centre and half-width, so the box becomes
// the cube [−1, 1]ᵈ. For an L1Ball of radius l, mid = 0 and half = scale
// (1 to work in the ball itself, l to map the ball into the cube).
type affineFrame struct {
	mid, half []float64
}

func newBoxFrame(b Box) affineFrame {
	d := len(b.Lo)
	f := affineFrame{mid: make([]float64, d), half: make([]float64, d)}
	for i := range d {
		// Hi − Lo is finite (Validate), so neither step overflows.
		f.half[i] = (b.Hi[i] - b.Lo[i]) / 2
		f.mid[i] = b.Lo[i] + f.half[i]
	}
	return f
}

func newScaleFrame(d int, scale float64) affineFrame {
	f := affineFrame{mid: make([]float64, d), half: make([]float64, d)}
	for i := range d {
		f.half[i] = scale
	}
	return f
}

// toWork returns (x − mid)/half, clamped to [−bound, bound] (bound ≥ 1 is
// the largest |z| the set allows, up to rounding).
func (f affineFrame) toWork(x []float64, bound float64) []float64 {
	z := make([]float64, len(x))
	for i, v := range x {
		z[i] = math.Min(math.Max((v-f.mid[i])/f.half[i], -bound), bound)
	}
	return z
}

// fromWork overwrites z with mid + half·z.
func (f affineFrame) fromWork(z []float64) {
	for i, v := range z {
		z[i] = f.mid[i] + f.half[i]*v
	}
}

// maxOutput returns max over i of |mid[i]| + half[i]·zmax, the largest
// magnitude fromWork can produce from |z| ≤ zmax (+Inf on overflow).
func (f affineFrame) maxOutput(zmax float64) float64 {
	var m float64
	for i := range f.mid {
		m = math.Max(m, math.Abs(f.mid[i])+f.half[i]*zmax)
	}
	return m
}
