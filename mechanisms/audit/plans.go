package audit

import (
	"fmt"
	"math"
	"slices"

	"github.com/ldpsql/ldpsql/mechanisms"
)

// Resolution of the continuous partitions.
const (
	projectionBins = 64
	polarBins      = 128
)

// tinyNorm is the relative length of PrivUnit's second input: a norm of
// 2⁻³⁰·r_max rounds to ScalarDP level 0 with probability 1 − k·2⁻³⁰ while
// still pointing the opposite way.
const tinyNorm = 0x1p-30

// LabelRandomiser is a randomiser of labels in {0, …, K−1}, such as
// *mechanisms.KRR.
type LabelRandomiser interface {
	K() int
	Epsilon() float64
	EffectiveEpsilon() float64
	Randomise(y int, src mechanisms.Source) (int, error)
}

// KRR returns the audit plan for a label randomiser: labels 0 and 1 (every
// pair of labels is alike for k-RR), and every outcome its own cell, so the
// best event is the exact outcome {0}: p(0|0)/p(0|1) = e^ε.
func KRR(r LabelRandomiser) Mechanism {
	return Mechanism{
		Name:      fmt.Sprintf("krr (K = %d)", r.K()),
		Claimed:   r.Epsilon(),
		Effective: r.EffectiveEpsilon(),
		Release: func(x []float64, src mechanisms.Source) ([]float64, error) {
			y, err := r.Randomise(int(x[0]), src)
			return []float64{float64(y)}, err
		},
		Pairs: []Pair{{Name: "labels 0 vs 1", X: []float64{0}, Y: []float64{1}, Partitions: []Partition{Exact()}}},
	}
}

// NoiseAdder is an additive noise mechanism calibrated to an ℓ1
// sensitivity, such as *mechanisms.Laplace (which does not clip).
type NoiseAdder interface {
	Sensitivity() float64
	Dim() int
	Epsilon() float64
	EffectiveEpsilon() float64
	AddNoise(x []float64, src mechanisms.Source) ([]float64, error)
}

// Laplace returns the audit plan for an additive mechanism of sensitivity
// Δ: inputs 0 and Δ·e₁ (ℓ1 distance Δ, the largest the mechanism admits)
// and the clipped projection on the first coordinate, whose top atom
// {y₁ ≤ 0} has probability ½ at 0 and ½e^{−ε} at Δ·e₁.
func Laplace(l NoiseAdder) (Mechanism, error) {
	x := make([]float64, l.Dim())
	y := make([]float64, l.Dim())
	y[0] = l.Sensitivity()
	part, err := Projection(x, y, projectionBins)
	if err != nil {
		return Mechanism{}, err
	}
	return Mechanism{
		Name:      fmt.Sprintf("laplace (Δ = %g, d = %d)", l.Sensitivity(), l.Dim()),
		Claimed:   l.Epsilon(),
		Effective: l.EffectiveEpsilon(),
		Release:   l.AddNoise,
		Pairs:     []Pair{{Name: fmt.Sprintf("0 vs %g·e1", l.Sensitivity()), X: x, Y: y, Partitions: []Partition{part}}},
	}, nil
}

// Vector returns the audit plan for a vector randomiser, by its Name and
// the geometry of its Set:
//
//   - "laplace": opposite vertices ±l·e₁ of an L1Ball (ℓ1 distance 2l, the
//     sensitivity), or opposite corners Lo, Hi of a Box (every coordinate
//     at its own maximal distance); clipped projection between them.
//   - "duchi": opposite corners of a Box, and two corners that differ in
//     one coordinate (where a wrong tie rule shows); ±l·e₁ for an L1Ball
//     (where Duchi's loss is below ε for d > 1: the other coordinates of
//     v stay random); exact outputs (2ᵈ sign patterns).
//   - "privunit": an input of the largest norm r_max and one of norm
//     2⁻³⁰·r_max pointing the opposite way (ScalarDP's levels k and 0, and
//     opposite caps: together the full ε); norm levels × cosine.
//   - any other name: as "laplace".
func Vector(r mechanisms.VectorRandomiser) (Mechanism, error) {
	set := r.Set()
	var pairs []Pair
	switch s := set.(type) {
	case mechanisms.L1Ball:
		x := make([]float64, s.D)
		y := make([]float64, s.D)
		x[0] = s.Radius
		if r.Name() == mechanisms.RandomiserPrivUnit {
			y[0] = -s.Radius * tinyNorm
			pairs = append(pairs, Pair{Name: fmt.Sprintf("%g·e1 vs -%g·e1", s.Radius, s.Radius*tinyNorm), X: x, Y: y})
		} else {
			y[0] = -s.Radius
			pairs = append(pairs, Pair{Name: fmt.Sprintf("±%g·e1", s.Radius), X: x, Y: y})
		}
	case mechanisms.Box:
		lo, hi := slices.Clone(s.Lo), slices.Clone(s.Hi)
		switch r.Name() {
		case mechanisms.RandomiserPrivUnit:
			y := make([]float64, len(lo))
			for i := range y {
				half := hi[i]/2 - lo[i]/2
				y[i] = (lo[i] + half) - half*tinyNorm
			}
			pairs = append(pairs, Pair{Name: "corner Hi vs centre - 2^-30·(Hi - centre)", X: hi, Y: y})
		case mechanisms.RandomiserDuchi:
			pairs = append(pairs, Pair{Name: "corners Lo vs Hi", X: lo, Y: hi})
			if len(lo) > 1 {
				adj := slices.Clone(lo)
				adj[0] = hi[0]
				pairs = append(pairs, Pair{Name: "corners Lo vs Lo with Hi[0]", X: lo, Y: adj})
			}
		default:
			pairs = append(pairs, Pair{Name: "corners Lo vs Hi", X: lo, Y: hi})
		}
	default:
		return Mechanism{}, fmt.Errorf("audit: unsupported output set %T", set)
	}
	for i := range pairs {
		parts, err := partitionsFor(r, pairs[i].X, pairs[i].Y)
		if err != nil {
			return Mechanism{}, err
		}
		pairs[i].Partitions = parts
	}
	return Mechanism{
		Name:      fmt.Sprintf("%s on %s", r.Name(), describeSet(set)),
		Claimed:   r.Epsilon(),
		Effective: r.EffectiveEpsilon(),
		Release:   r.Randomise,
		Pairs:     pairs,
	}, nil
}

// partitionsFor returns the partitions to audit r at the (clipped) points
// a and b of its set.
func partitionsFor(r mechanisms.VectorRandomiser, a, b []float64) ([]Partition, error) {
	if _, rr := mechanisms.ParseRRName(r.Name()); rr || r.Name() == mechanisms.RandomiserDuchi {
		// Finitely many outputs (bin centres, corners): each is its own event.
		return []Partition{Exact()}, nil
	}
	switch r.Name() {
	case mechanisms.RandomiserPrivUnit:
		centre, scale := frame(r.Set())
		u := make([]float64, len(a))
		for i := range u {
			u[i] = (a[i] - b[i]) / scale[i]
		}
		p, err := Polar(centre, scale, u, polarBins)
		return []Partition{p}, err
	}
	p, err := Projection(a, b, projectionBins)
	return []Partition{p}, err
}

// frame returns the centre and per-coordinate scale of a set: 0 and 1 for
// an L1Ball, the midpoint and half-widths for a Box.
func frame(set mechanisms.OutputSet) (centre, scale []float64) {
	d := set.Dim()
	centre, scale = make([]float64, d), make([]float64, d)
	if b, ok := set.(mechanisms.Box); ok {
		for i := range d {
			scale[i] = b.Hi[i]/2 - b.Lo[i]/2
			centre[i] = b.Lo[i] + scale[i]
		}
		return centre, scale
	}
	for i := range scale {
		scale[i] = 1
	}
	return centre, scale
}

func describeSet(set mechanisms.OutputSet) string {
	switch s := set.(type) {
	case mechanisms.L1Ball:
		return fmt.Sprintf("L1Ball(d=%d, l=%g)", s.D, s.Radius)
	case mechanisms.Box:
		return fmt.Sprintf("Box(d=%d)", len(s.Lo))
	}
	return fmt.Sprintf("%T", set)
}

// distance returns the ℓ1 distance between a and b in units of the set's
// extent per coordinate (2l for an L1Ball, the width for a Box): 1 for
// opposite vertices of a ball, d for opposite corners of a box.
func distance(set mechanisms.OutputSet, a, b []float64) float64 {
	_, scale := frame(set)
	var s float64
	for i := range a {
		s += math.Abs(a[i]/2-b[i]/2) / scale[i]
	}
	if l, ok := set.(mechanisms.L1Ball); ok {
		s /= l.Radius
	}
	return s
}
