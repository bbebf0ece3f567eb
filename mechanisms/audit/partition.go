package audit

import (
	"fmt"
	"math"
)

// Exact returns the partition whose cells are the individual outputs (an
// FNV-1a hash of the bits of every coordinate), for mechanisms with finitely
// many outputs: k-RR labels, Duchi's sign patterns.
func Exact() Partition {
	return Partition{Name: "exact outputs", Cell: func(y []float64) uint64 {
		h := uint64(14695981039346656037)
		for _, v := range y {
			b := math.Float64bits(v)
			if v == 0 {
				b = 0 // −0 and +0 are the same output
			}
			for range 8 {
				h ^= b & 0xff
				h *= 1099511628211
				b >>= 8
			}
		}
		if h == RefusedCell {
			h--
		}
		return h
	}}
}

// Projection returns the partition of outputs by their clipped position
// between x and y:
//
//	s(o) = Σᵢ clamp((oᵢ − mᵢ)/hᵢ, −1, 1),   mᵢ = (xᵢ + yᵢ)/2, hᵢ = (xᵢ − yᵢ)/2,
//
// over the D coordinates where x and y differ, so s = D "beyond x" on every
// such coordinate and −D beyond y. For the Laplace mechanism s is exactly
// the privacy-loss statistic ln p(o|x)/p(o|y) up to the factor ε/D, so its
// super-level sets are the most powerful events. The cells are the two
// atoms s = ±D (every coordinate clamped) and bins equal bins of (−D, D).
// x and y must have the same length and differ somewhere.
func Projection(x, y []float64, bins int) (Partition, error) {
	if len(x) != len(y) || bins < 1 {
		return Partition{}, fmt.Errorf("audit: Projection needs inputs of equal length and bins >= 1")
	}
	var idx []int
	var mid, half []float64
	for i := range x {
		if x[i]/2-y[i]/2 != 0 {
			idx = append(idx, i)
			mid = append(mid, x[i]/2+y[i]/2)
			half = append(half, x[i]/2-y[i]/2)
		}
	}
	if len(idx) == 0 {
		return Partition{}, fmt.Errorf("audit: Projection needs two different inputs")
	}
	d := float64(len(idx))
	return Partition{Name: fmt.Sprintf("clipped projection (D = %d, %d bins)", len(idx), bins), Cell: func(o []float64) uint64 {
		var s float64
		allX, allY := true, true
		for j, i := range idx {
			t := (o[i] - mid[j]) / half[j]
			switch {
			case t >= 1:
				t, allY = 1, false
			case t <= -1:
				t, allX = -1, false
			case math.IsNaN(t):
				return uint64(bins) + 2 // its own cell
			default:
				allX, allY = false, false
			}
			s += t
		}
		switch {
		case allX:
			return uint64(bins) + 1
		case allY:
			return 0
		}
		b := int(math.Floor((s + d) / (2 * d) * float64(bins)))
		return uint64(min(max(b, 0), bins-1)) + 1
	}}, nil
}

// Polar returns the partition of outputs o by the length of z = (o −
// centre)/scale (coordinatewise), quantised to a relative 2⁻²⁰ so that a
// mechanism with finitely many output norms (PrivUnit's ScalarDP levels)
// has one cell per norm, times bins equal bins of the cosine ⟨z, u⟩/‖z‖ for
// the direction u (normalised here). z = 0 has its own cell.
func Polar(centre, scale, u []float64, bins int) (Partition, error) {
	if len(centre) != len(u) || len(scale) != len(u) || bins < 1 || bins > 1<<15 {
		return Partition{}, fmt.Errorf("audit: Polar needs centre, scale and u of equal length and 1 <= bins <= 32768")
	}
	var nu float64
	for _, v := range u {
		nu += v * v
	}
	nu = math.Sqrt(nu)
	if !(nu > 0) || math.IsInf(nu, 0) {
		return Partition{}, fmt.Errorf("audit: Polar needs a finite non-zero direction")
	}
	dir := make([]float64, len(u))
	for i, v := range u {
		dir[i] = v / nu
	}
	return Partition{Name: fmt.Sprintf("norm levels × cosine (%d bins)", bins), Cell: func(o []float64) uint64 {
		var r2, dot float64
		for i, v := range o {
			z := (v - centre[i]) / scale[i]
			r2 += z * z
			dot += z * dir[i]
		}
		if !(r2 > 0) || math.IsInf(r2, 0) {
			return 1 << 63
		}
		r := math.Sqrt(r2)
		level := int64(math.Round(math.Log(r) * 0x1p20))
		b := int(math.Floor((dot/r + 1) / 2 * float64(bins)))
		b = min(max(b, 0), bins-1)
		return uint64(level)<<16 ^ uint64(b) // |level| < 2³⁰ for finite r, b < 2¹⁵: never RefusedCell
	}}, nil
}
