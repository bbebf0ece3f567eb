package mechanisms

import (
	"math"
	"math/big"
	"testing"
)

// Floating-point leak tests (Mironov, "On significance of the least
// significant bits for differential privacy", CCS 2012).
//
// A textbook Laplace sampler releases fl(x + fl(b·ln U)) for a uniform
// float U. The noise values it can produce are a sparse, irregular subset
// of the floats, and the set of possible outputs for x is that subset
// shifted by x and rounded: a different subset for every x. An output that
// lies in the support for one input and not for the other identifies the
// input with certainty (infinite privacy loss), however large b is.
//
// Laplace samples on the grid gℤ instead: y = g·round(x/g) + g·Z. Every
// output is a multiple of g whatever x is (the support is gℤ, cut off only
// where |Z| > 2⁶³), and inputs that round to the same grid point, such as x
// and its float64 neighbours, have identical output distributions. The
// tests below check both claims exactly, and run the same exact-support
// attacker against both samplers.

// isMultiple reports whether y is an integer multiple of the power of two
// g, exactly: y·2^{−log₂ g} is computed without rounding by big.Float.
func isMultiple(y, g float64) bool {
	_, e := math.Frexp(g) // g = ½·2^e
	q := new(big.Float).SetFloat64(y)
	q.SetMantExp(q, -(e - 1))
	return q.IsInt()
}

// snapExact returns round(x/g) (ties away from zero, as math.Round), with
// x/g computed exactly.
func snapExact(x, g float64) *big.Int {
	_, e := math.Frexp(g)
	q := new(big.Float).SetPrec(2000).SetFloat64(x)
	q.SetMantExp(q, -(e - 1))
	half := big.NewFloat(0.5)
	if q.Sign() < 0 {
		q.Sub(q, half)
	} else {
		q.Add(q, half)
	}
	n, _ := q.Int(nil) // truncation toward zero of q ± ½
	return n
}

// neighbours returns x and inputs that differ from it in the low-order
// bits: its float64 neighbours, a few ulps away, and x + g/8 (below the
// grid's resolution).
func neighbours(x, g float64) []float64 {
	up, down := math.Nextafter(x, math.Inf(1)), math.Nextafter(x, math.Inf(-1))
	ulp := up - x
	return []float64{x, up, down, x + 3*ulp, x - 5*ulp, x + 1000*ulp, x + g/8, x - g/8}
}

// TestFPLeakLaplaceGridScalar: for the scalar Laplace over a range of
// (Δ, ε) and for inputs x and their low-bit perturbations (float64
// neighbours, a few ulps, ±g/8), every output is an exact multiple of g, and
// with the same random bits the output moves by exactly g·(the exact change
// in round(x/g)): zero for the perturbations that snap to the same grid
// point, which is almost all of them. So the outputs' distribution depends
// on x only through round(x/g), and their support is gℤ for every x.
//
// The inputs stay below 2⁵⁰·g in magnitude, where the sum g·(round(x/g) +
// Z) is exact for every Z the test can draw; above 2⁵³·g the sum is rounded
// to the float64 spacing (≥ g, a multiple of it), which is post-processing
// of the exact output, and only the multiple-of-g property is checked.
func TestFPLeakLaplaceGridScalar(t *testing.T) {
	src := NewSeededSource(40)
	for _, c := range []struct{ sens, eps float64 }{{1, 1}, {72, 0.5}, {1e-3, 3}, {1e6, 0.1}, {2, 64}} {
		l := mustLaplace(t, c.sens, c.eps, 1)
		g := l.Granularity()
		same, moved := 0, 0
		for i := range 400 {
			// x over a few scales around the sensitivity.
			x := (Float64(src)*2 - 1) * c.sens * math.Ldexp(1, IntN(src, 20)-10)
			exact := math.Abs(x) < 0x1p50*g
			if i%4 == 3 {
				x = math.Copysign(0x1p53*g*(1+Float64(src)), x) // the rounded regime
				exact = false
			}
			base := snapExact(x, g)
			seed := src.Uint64()
			y0, err := l.AddNoiseScalar(x, NewSeededSource(seed))
			if err != nil {
				t.Fatal(err)
			}
			for _, xi := range neighbours(x, g) {
				y, err := l.AddNoiseScalar(xi, NewSeededSource(seed))
				if err != nil {
					t.Fatal(err)
				}
				if !isMultiple(y, g) {
					t.Fatalf("Δ=%v ε=%v: output %v for input %v is not a multiple of g = %v", c.sens, c.eps, y, xi, g)
				}
				if !exact {
					continue
				}
				shift := new(big.Int).Sub(snapExact(xi, g), base)
				if shift.Sign() == 0 {
					same++
				} else {
					moved++
				}
				// y − y0 = g·shift exactly (both are multiples of g below
				// 2⁵³g, so the float64 difference is exact).
				want := new(big.Float).SetInt(shift)
				want.Mul(want, big.NewFloat(g))
				if got := new(big.Float).SetFloat64(y - y0); got.Cmp(want) != 0 {
					t.Fatalf("Δ=%v ε=%v: inputs %v and %v (grid points %v, %v) gave %v and %v with the same bits", c.sens, c.eps, x, xi, base, snapExact(xi, g), y0, y)
				}
			}
		}
		t.Logf("Δ=%v ε=%v: g = %v; %d perturbed inputs snapped to the same grid point (identical outputs), %d to a neighbouring one (outputs shifted by exactly g)", c.sens, c.eps, g, same, moved)
		// Only the ±g/8 perturbations (2 of 8 per input) can cross a grid
		// boundary, each with probability ¼.
		if moved > (same+moved)/8 {
			t.Errorf("%d of %d perturbations crossed a grid boundary", moved, same+moved)
		}
	}
}

// TestFPLeakVectorLaplaceGrid: the same for VectorLaplace on an ℓ1 ball (one
// grid for the whole vector) and on a box of unequal widths (one grid per
// width): every coordinate of every release is a multiple of its grid
// step, and perturbing every coordinate of the input in its low bits leaves
// the release unchanged for the same random bits.
func TestFPLeakVectorLaplaceGrid(t *testing.T) {
	src := NewSeededSource(41)
	ball := L1Ball{D: 6, Radius: 3}
	box := Box{Lo: []float64{0, -1, 100, -1e-3, 0, 0}, Hi: []float64{1, 1, 350, 1e-3, 0.5, 1}}
	for _, set := range []OutputSet{ball, box} {
		v, err := NewVectorLaplace(set, 1)
		if err != nil {
			t.Fatal(err)
		}
		grid := make([]float64, set.Dim())
		for i := range grid {
			if v.whole != nil {
				grid[i] = v.whole.Granularity()
			} else {
				grid[i] = v.perCoord[i].Granularity()
			}
		}
		identical := 0
		for range 200 {
			// A point well inside the set (so that the perturbations are
			// not clipped), then every coordinate perturbed by k ulps.
			x := make([]float64, set.Dim())
			for i := range x {
				switch s := set.(type) {
				case L1Ball:
					x[i] = (Float64(src) - 0.5) * s.Radius / float64(s.D)
				case Box:
					x[i] = s.Lo[i] + (0.25+Float64(src)/2)*(s.Hi[i]-s.Lo[i])
				}
			}
			seed := src.Uint64()
			y0, err := v.Randomise(x, NewSeededSource(seed))
			if err != nil {
				t.Fatal(err)
			}
			for k := 1; k <= 8; k++ {
				xp := make([]float64, len(x))
				sameGrid := true
				for i := range x {
					xp[i] = x[i]
					for range k {
						xp[i] = math.Nextafter(xp[i], math.Inf(1-2*(k%2)))
					}
					sameGrid = sameGrid && snapExact(xp[i], grid[i]).Cmp(snapExact(x[i], grid[i])) == 0
				}
				y, err := v.Randomise(xp, NewSeededSource(seed))
				if err != nil {
					t.Fatal(err)
				}
				for i := range y {
					if !isMultiple(y[i], grid[i]) {
						t.Fatalf("%T: coordinate %d of a release, %v, is not a multiple of g = %v", set, i, y[i], grid[i])
					}
				}
				if sameGrid {
					for i := range y {
						if y[i] != y0[i] {
							t.Fatalf("%T: inputs %v and %v snap to the same grid points but gave %v and %v with the same bits", set, x, xp, y0, y)
						}
					}
					identical++
				}
			}
		}
		t.Logf("%T: grid steps %v; %d of 1600 low-bit perturbations gave identical releases", set, grid, identical)
		if identical < 1500 {
			t.Errorf("%T: only %d of 1600 perturbations snapped to the same grid points", set, identical)
		}
	}
}

// naiveLaplace is the textbook sampler Mironov attacks: x + s·b·ln(U), U =
// (k+1)·2⁻⁵³ uniform on (0, 1] and s a random sign, in float64.
func naiveLaplace(x, b float64, k uint64, neg bool) float64 {
	n := b * math.Log(float64(k+1)*0x1p-53) // ≤ 0, non-decreasing in k
	if neg {
		return x - n
	}
	return x + n
}

// naiveInSupport reports whether y = naiveLaplace(x, b, k, s) for some k
// and sign: for each sign the output is monotone in k, so a binary search
// finds the k where it reaches y, and a few neighbours are checked in case
// math.Log is not perfectly monotone.
func naiveInSupport(x, b, y float64) bool {
	const top = 1 << 53
	for _, neg := range []bool{false, true} {
		lo, hi := uint64(0), uint64(top-1)
		for lo < hi { // smallest k with f(k) ≥ y (≤ y for neg: f decreases)
			m := lo + (hi-lo)/2
			f := naiveLaplace(x, b, m, neg)
			if (!neg && f >= y) || (neg && f <= y) {
				hi = m
			} else {
				lo = m + 1
			}
		}
		for k := max(lo, 4) - 4; k < lo+4 && k < top; k++ {
			if naiveLaplace(x, b, k, neg) == y {
				return true
			}
		}
	}
	return false
}

// attack plays the distinguishing game n times: the input is x0 or x1 (in
// turn), the attacker sees one release and answers with the input whose
// support contains it when exactly one does. It returns how many answers
// were decisive and how many of those were right.
func attack(n int, x0, x1 float64, release func(x float64) float64, inSupport func(x, y float64) bool) (decisive, right int) {
	for i := range n {
		truth := i % 2
		y := release([]float64{x0, x1}[truth])
		in0, in1 := inSupport(x0, y), inSupport(x1, y)
		if in0 != in1 {
			decisive++
			if in1 == (truth == 1) {
				right++
			}
		}
	}
	return decisive, right
}

// TestFPLeakAttack: the exact-support attacker against the naive sampler
// and against Laplace, for neighbouring inputs (0 vs 1 with Δ = 1, as in
// Mironov's paper) and for inputs that differ in their last bits only.
// Against the naive sampler it is decisive (and always right) on a large
// share of releases, each an infinite privacy loss; against Laplace it is
// never decisive, because both supports are gℤ.
func TestFPLeakAttack(t *testing.T) {
	const n = 4000
	x := 0.3
	pairs := [][2]float64{{0, 1}, {x, math.Nextafter(x, 1)}, {x, x + 0x1p-30}, {1e6 + 0.25, math.Nextafter(1e6+0.25, 2e6)}}
	for _, eps := range []float64{0.5, 1, 4} {
		l := mustLaplace(t, 1, eps, 1)
		g := l.Granularity()
		b := l.Scale()
		for i, p := range pairs {
			src := NewSeededSource(uint64(50 + i))
			naive := func(x float64) float64 { w := src.Uint64(); return naiveLaplace(x, b, w>>11, w&1 == 1) }
			nd, nr := attack(n, p[0], p[1], naive, func(x, y float64) bool { return naiveInSupport(x, b, y) })
			ours := func(x float64) float64 {
				y, err := l.AddNoiseScalar(x, src)
				if err != nil {
					t.Fatal(err)
				}
				return y
			}
			// Laplace's support for x: the multiples of g (every one has
			// positive probability, whatever round(x/g) is).
			od, _ := attack(n, p[0], p[1], ours, func(_, y float64) bool { return isMultiple(y, g) })
			// The attacker guesses when it is not certain, so it wins with
			// probability ½ + (certain share)/2. Against an ε-DP release
			// (Δ = 1) of inputs |x − x'| apart no attacker wins with
			// probability above 1/(1 + e^{−ε|x−x'|}): ≈ ½ for the
			// low-bit pairs.
			bound := 1 / (1 + math.Exp(-eps*math.Abs(p[1]-p[0])))
			t.Logf("ε=%v, inputs %v vs %v: naive sampler: attacker certain on %.1f%% of releases (right on all %d), wins with probability %.3f (ε-DP allows %.3f); Laplace: certain on %d", eps, p[0], p[1], 100*float64(nd)/n, nr, 0.5+float64(nd)/(2*n), bound, od)
			if nr != nd {
				t.Errorf("the exact-support attacker was wrong on the naive sampler: %d of %d", nd-nr, nd)
			}
			// At |x| = 10⁶ the output's float spacing (1.2·10⁻¹⁰) is much
			// coarser than the naive noise values' (b·2⁻⁵³), every nearby
			// float is reachable, and the attack finds nothing: Mironov's
			// attack needs outputs finer than the noise lattice.
			if nd < n/10 && p[0] < 1e6 {
				t.Errorf("ε=%v, %v vs %v: the attacker was certain on only %d of %d naive releases", eps, p[0], p[1], nd, n)
			}
			if od != 0 {
				t.Errorf("ε=%v, %v vs %v: the attacker was certain on %d Laplace releases", eps, p[0], p[1], od)
			}
		}
	}
}

// TestFPLeakEffectiveEpsilon reports, for a table of (Δ, ε) and
// dimensions, the ε the discretised mechanism guarantees
// (EffectiveEpsilon = λ·(⌊Δ/g⌋ + d)) against the nominal ε, and checks
// EffectiveEpsilon ≤ ε, and that λ·(⌊Δ/g⌋ + d) ≤ ε holds in exact
// arithmetic; likewise VectorLaplace's composed ε on boxes.
func TestFPLeakEffectiveEpsilon(t *testing.T) {
	t.Logf("%-8s %-6s %-4s %-12s %-22s %-10s", "Δ", "ε", "d", "g", "EffectiveEpsilon", "1 − eff/ε")
	for _, sens := range []float64{1e-3, 1, 2, 72, 1e6} {
		for _, eps := range []float64{0.01, 0.1, 0.5, 1, 2, 4, 8, 64} {
			for _, d := range []int{1, 8} {
				l := mustLaplace(t, sens, eps, d)
				eff := l.EffectiveEpsilon()
				t.Logf("%-8g %-6g %-4d %-12g %-22.17g %.3g", sens, eps, d, l.Granularity(), eff, 1-eff/eps)
				if !(eff <= eps) {
					t.Errorf("Δ=%v ε=%v d=%d: EffectiveEpsilon %v > ε", sens, eps, d, eff)
				}
				steps := new(big.Float).SetPrec(2000).SetFloat64(math.Floor(sens / l.Granularity()))
				steps.Add(steps, big.NewFloat(float64(d)))
				exact := steps.Mul(steps, new(big.Float).SetFloat64(l.lambda))
				if exact.Cmp(big.NewFloat(eps)) > 0 {
					t.Errorf("Δ=%v ε=%v d=%d: λ(⌊Δ/g⌋ + d) = %v > ε exactly", sens, eps, d, exact)
				}
			}
		}
	}
	for _, eps := range []float64{0.1, 1, 8} {
		for _, d := range []int{1, 4, 784} {
			lo, hi := make([]float64, d), make([]float64, d)
			for i := range hi {
				hi[i] = float64(1 + i%3)
			}
			v, err := NewVectorLaplace(Box{Lo: lo, Hi: hi}, eps)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("box d=%-4d ε=%-4g: EffectiveEpsilon %.17g (1 − eff/ε = %.3g)", d, eps, v.EffectiveEpsilon(), 1-v.EffectiveEpsilon()/eps)
			if !(v.EffectiveEpsilon() <= eps) {
				t.Errorf("box d=%d ε=%v: EffectiveEpsilon %v > ε", d, eps, v.EffectiveEpsilon())
			}
		}
	}
}
