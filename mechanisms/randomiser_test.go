package mechanisms

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"
	"testing"
)

func mustRandomiser(t testing.TB, name string, set OutputSet, eps float64) VectorRandomiser {
	t.Helper()
	r, err := NewRandomiser(name, set, eps)
	if err != nil {
		t.Fatalf("NewRandomiser(%q, %#v, %v): %v", name, set, eps, err)
	}
	return r
}

func TestNewRandomiserErrors(t *testing.T) {
	ball := L1Ball{D: 4, Radius: 1}
	if _, err := NewRandomiser("gaussian", ball, 1); err == nil || !errors.Is(err, ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "laplace, duchi, privunit") {
		t.Errorf("unknown name: error = %v, want one listing the valid names", err)
	}
	if _, err := NewRandomiser("Laplace", ball, 1); err == nil {
		t.Error("names are case-sensitive; \"Laplace\" was accepted")
	}
	type otherSet struct{ L1Ball }
	for _, name := range RandomiserNames() {
		for _, c := range []struct {
			set  OutputSet
			eps  float64
			want string
		}{
			{nil, 1, "nil"},
			{(*L1Ball)(nil), 1, "nil"},
			{(*Box)(nil), 1, "nil"},
			{otherSet{ball}, 1, "unsupported output set"},
			{L1Ball{D: 0, Radius: 1}, 1, "dimension"},
			{Box{Lo: []float64{1}, Hi: []float64{0}}, 1, "Lo[0] < Hi[0]"},
			{ball, 0, "epsilon"},
			{ball, math.NaN(), "NaN"},
			{ball, math.Inf(1), "+Inf"},
			{ball, 65, "MaxEpsilon"},
		} {
			if _, err := NewRandomiser(name, c.set, c.eps); err == nil || !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("NewRandomiser(%q, %#v, %v) error = %v, want one mentioning %q", name, c.set, c.eps, err, c.want)
			}
		}
		r := mustRandomiser(t, name, &ball, 2)
		if r.Name() != name || r.Epsilon() != 2 || !(r.EffectiveEpsilon() > 0 && r.EffectiveEpsilon() <= 2) || r.Set() != OutputSet(ball) {
			t.Errorf("%s: Name %q, Epsilon %v, EffectiveEpsilon %v, Set %#v", name, r.Name(), r.Epsilon(), r.EffectiveEpsilon(), r.Set())
		}
	}
	// Mechanism-specific limits.
	if _, err := NewRandomiser("privunit", L1Ball{D: 1, Radius: 1}, 1); err == nil || !strings.Contains(err.Error(), "d >= 2") {
		t.Errorf("privunit d = 1: error = %v", err)
	}
	if _, err := NewRandomiser("privunit", ball, 0x1p-31); err == nil || !strings.Contains(err.Error(), "2^-30") {
		t.Errorf("privunit tiny epsilon: error = %v", err)
	}
	if _, err := NewRandomiser("laplace", Box{Lo: make([]float64, 4), Hi: []float64{1, 1, 1, 1}}, 3*MinEpsilon); err == nil || !strings.Contains(err.Error(), "per-feature") {
		t.Errorf("laplace Box with epsilon/d < MinEpsilon: error = %v", err)
	}
	huge := Box{Lo: []float64{1e307, 0}, Hi: []float64{1.7e308, 1}}
	for _, name := range []string{"duchi", "privunit"} {
		if _, err := NewRandomiser(name, huge, 1); err == nil || !strings.Contains(err.Error(), "overflow") {
			t.Errorf("%s on a Box whose releases overflow: error = %v", name, err)
		}
	}
}

// adversarialSets are the sets of the robustness tests: a ball, a box with
// a far-off, wide range, and a box at a huge offset.
var adversarialSets = []OutputSet{
	L1Ball{D: 4, Radius: 2},
	Box{Lo: []float64{0, -1, -1e6, 5}, Hi: []float64{1, 1, 1e6, 5.5}},
	Box{Lo: []float64{1e300, -1e300, 0, 0}, Hi: []float64{1.0000001e300, -0.9999999e300, 1e-290, 1}},
}

// TestRandomiseAdversarialInputs: for every randomiser and set, finite
// inputs of the right length never fail, however extreme, and give finite
// releases; the release equals that of the clipped input (same seed), so
// the input was clipped before noise; NaN, ±Inf and wrong lengths are
// rejected with an error naming the problem.
func TestRandomiseAdversarialInputs(t *testing.T) {
	maxF, tiny := math.MaxFloat64, math.SmallestNonzeroFloat64
	inputs := [][]float64{
		{0, 0, 0, 0},
		{1e300, 1e300, 1e300, 1e300},
		{-maxF, maxF, -maxF, maxF},
		{tiny, -tiny, 0, tiny},
		{1e10, -3, 7e20, -1e-20},
		{0.5, 0.5, 0.5, 0.5},
		{-1, 2, 3, -4},
	}
	for _, name := range RandomiserNames() {
		for si, set := range adversarialSets {
			r := mustRandomiser(t, name, set, 1.5)
			for ii, x := range inputs {
				orig := slices.Clone(x)
				y, err := r.Randomise(x, NewSeededSource(uint64(100*si+ii)))
				if err != nil {
					t.Errorf("%s set %d input %v: %v", name, si, x, err)
					continue
				}
				if !slices.Equal(x, orig) {
					t.Errorf("%s set %d: Randomise modified its input", name, si)
				}
				if len(y) != 4 || checkFinite("", "", y) != nil {
					t.Errorf("%s set %d input %v: release %v is not a finite 4-vector", name, si, x, y)
				}
				c, err := set.Clip(x)
				if err != nil {
					t.Fatal(err)
				}
				yc, _ := r.Randomise(c, NewSeededSource(uint64(100*si+ii)))
				if !slices.Equal(y, yc) {
					t.Errorf("%s set %d input %v: release %v differs from the clipped input's %v", name, si, x, y, yc)
				}
			}
			for _, c := range []struct {
				x    []float64
				want string
			}{
				{[]float64{0, 0, math.NaN(), 0}, "[2] = NaN"},
				{[]float64{math.Inf(1), 0, 0, 0}, "[0] = +Inf"},
				{[]float64{0, 0, 0}, "len(h) = 3"},
				{[]float64{0, 0, 0, 0, 0}, "len(h) = 5"},
				{nil, "len(h) = 0"},
			} {
				if _, err := r.Randomise(c.x, NewSeededSource(1)); err == nil || !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
					t.Errorf("%s set %d: Randomise(%v) error = %v, want one mentioning %q", name, si, c.x, err, c.want)
				}
			}
		}
	}
}

// TestRR checks the randomised-response helper behind Duchi and PrivUnit:
// the realised loss ln((1−F)·others/F) is at most ε, verified with exact
// rational arithmetic against expm1(ε) (relative error < 2⁻⁵²; margin
// 2⁻⁵⁰), and within 2⁻³⁸ relative of ε (the 2⁻⁴⁰ margin plus rounding)
// up to the quantisation by F's float64 grid (checked for ε ≥ 2⁻³⁰); the contrast is
// positive; and the sampler's output frequencies match the pmf (χ², p <
// 10⁻⁶ fails).
func TestRR(t *testing.T) {
	for _, eps := range []float64{MinEpsilon, 0x1p-40, 0x1p-30, 1e-6, 0.01, 0.5, 1, 2, 10, 30, 64} {
		for _, others := range []int{1, 2, 9, 64} {
			r, err := newRR("test", eps, others)
			if err != nil {
				if others > 1 && eps < 0x1p-40 {
					continue // not representable: too fine a ratio for F's grid
				}
				t.Fatalf("newRR(%v, %d): %v", eps, others, err)
			}
			k := new(big.Float).SetPrec(2000).SetInt64(int64(others))
			f := new(big.Float).SetPrec(2000).SetFloat64(r.flip)
			// (1−F)k/F − 1 = (k − F(k+1))/F, exactly.
			num := new(big.Float).SetPrec(2000).Mul(f, new(big.Float).SetInt64(int64(others+1)))
			num.Sub(k, num)
			num.Quo(num, f)
			lim := new(big.Float).SetPrec(2000).SetFloat64(math.Expm1(eps) * (1 - 0x1p-50))
			if num.Cmp(lim) > 0 {
				t.Errorf("newRR(%v, %d): realised ratio − 1 = %v exceeds e^ε − 1 = %v", eps, others, num, lim)
			}
			// F lives on a grid of spacing ≥ 2⁻⁵⁴ near others/(others+1),
			// which quantises the loss by about (others+1)²·2⁻⁵³.
			slack := eps*0x1p-38 + float64((others+1)*(others+1))*0x1p-50
			if !(r.effEps <= eps) || !(r.contrast > 0) || (eps >= 0x1p-30 && r.effEps < eps-slack) {
				t.Errorf("newRR(%v, %d): effEps = %v, contrast = %v", eps, others, r.effEps, r.contrast)
			}
		}
	}
	// Distribution: others = 3, ε = 1, from outcome 2.
	r, _ := newRR("test", 1, 3)
	src := NewSeededSource(77)
	const n = 200000
	counts := make([]int64, 4)
	br := bitReader{src: src}
	for range n {
		counts[r.respond(2, &br)]++
	}
	probs := []float64{r.flip / 3, r.flip / 3, 1 - r.flip, r.flip / 3}
	if _, p := chiSquarePValue(t, counts, probs); p < 1e-6 {
		t.Errorf("rr counts %v: χ² p = %v", counts, p)
	}
}

// privacyCheck summarises an empirical privacy check: for each ordered pair
// of inputs and each output cell C with at least 100 hits under both,
// L = ln(p̂₁(C)/p̂₂(C)), with standard error se = √(1/c₁ − 1/n + 1/c₂ − 1/n)
// (delta method for the log of a binomial proportion).
type privacyCheck struct {
	maxLoss  float64 // max L
	maxLower float64 // max L − z·se: above ε means a violation
	maxUpper float64 // max L + z·se: the partition can see losses this large
	z        float64
}

// empiricalPrivacy draws n releases at each input and compares the cell
// frequencies for every ordered pair of inputs. z is the Bonferroni
// quantile for the pairs × ncells one-sided tests at family-wise level
// 10⁻⁶, so a correct mechanism has maxLower > ε with probability below
// 10⁻⁶ (the normal approximation of ln p̂ is good for ≥ 100 hits per cell).
func empiricalPrivacy(t *testing.T, r VectorRandomiser, inputs [][]float64, cell func([]float64) int, ncells, n int, seed uint64) privacyCheck {
	t.Helper()
	src := NewSeededSource(seed)
	counts := make([][]float64, len(inputs))
	for i, x := range inputs {
		counts[i] = make([]float64, ncells)
		for range n {
			y, err := r.Randomise(x, src)
			if err != nil {
				t.Fatal(err)
			}
			counts[i][cell(y)]++
		}
	}
	tests := float64(len(inputs) * (len(inputs) - 1) * ncells)
	pc := privacyCheck{z: math.Sqrt2 * math.Erfinv(1-2e-6/tests)}
	nf := float64(n)
	for a := range counts {
		for b := range counts {
			if a == b {
				continue
			}
			for i := range ncells {
				c1, c2 := counts[a][i], counts[b][i]
				if c1 < 100 || c2 < 100 {
					continue
				}
				l := math.Log(c1 / c2)
				se := math.Sqrt(1/c1 - 1/nf + 1/c2 - 1/nf)
				pc.maxLoss = math.Max(pc.maxLoss, l)
				pc.maxLower = math.Max(pc.maxLower, l-pc.z*se)
				pc.maxUpper = math.Max(pc.maxUpper, l+pc.z*se)
			}
		}
	}
	return pc
}

// assertPrivate fails unless the check is consistent with the claimed loss
// eps (maxLower ≤ eps) and the partition is fine enough to see it
// (maxUpper ≥ eps: some cell's loss is within the tolerance of the claim).
func assertPrivate(t *testing.T, what string, pc privacyCheck, eps float64) {
	t.Helper()
	t.Logf("%s: max ln ratio = %.4f (claimed ε = %.4f; tolerance z = %.2f σ)", what, pc.maxLoss, eps, pc.z)
	if pc.maxLower > eps {
		t.Errorf("%s: empirical loss %.4f exceeds ε = %.4f by more than %.2f σ", what, pc.maxLoss, eps, pc.z)
	}
	if pc.maxUpper < eps {
		t.Errorf("%s: no cell came within %.2f σ of ε = %.4f (max %.4f): the check is not tight", what, pc.z, eps, pc.maxLoss)
	}
}

// binOf returns the index of the first edge > v (len(edges) if none).
func binOf(v float64, edges ...float64) int {
	for i, e := range edges {
		if v < e {
			return i
		}
	}
	return len(edges)
}

// brokenLaplace is a deliberately wrong Laplace randomiser for the ℓ1 ball:
// it calibrates to sensitivity l instead of 2l (half the noise scale) and
// claims ε; its true loss is 2ε.
type brokenLaplace struct {
	ball L1Ball
	lap  *Laplace
	eps  float64
}

func (b brokenLaplace) Name() string              { return "broken-laplace" }
func (b brokenLaplace) Epsilon() float64          { return b.eps }
func (b brokenLaplace) EffectiveEpsilon() float64 { return b.eps }
func (b brokenLaplace) Set() OutputSet            { return b.ball }
func (b brokenLaplace) Randomise(x []float64, src Source) ([]float64, error) {
	c, err := b.ball.Clip(x)
	if err != nil {
		return nil, err
	}
	return b.lap.AddNoise(c, src)
}

// TestEmpiricalPrivacyLaplace: d = 2, neighbouring inputs at maximal
// distance (opposite points of the ℓ1 ball; opposite corners of the box),
// cells from thresholds on the outputs; and the same check catches a
// Laplace with half the noise scale (true loss 2ε).
func TestEmpiricalPrivacyLaplace(t *testing.T) {
	const n = 200000
	ball := L1Ball{D: 2, Radius: 1}
	r := mustRandomiser(t, "laplace", ball, 1)
	cellBall := func(y []float64) int { return binOf(y[0], -3, -1, 1, 3) }
	pc := empiricalPrivacy(t, r, [][]float64{{1, 0}, {-1, 0}}, cellBall, 5, n, 11)
	assertPrivate(t, "laplace L1Ball", pc, r.EffectiveEpsilon())

	box := Box{Lo: []float64{0, 0}, Hi: []float64{1, 1}}
	r = mustRandomiser(t, "laplace", box, 1)
	cellBox := func(y []float64) int { return 3*binOf(y[0], 0, 1) + binOf(y[1], 0, 1) }
	pc = empiricalPrivacy(t, r, [][]float64{{1, 1}, {0, 0}}, cellBox, 9, n, 12)
	assertPrivate(t, "laplace Box", pc, r.EffectiveEpsilon())

	broken := brokenLaplace{ball: ball, lap: mustLaplace(t, ball.Radius, 1, 2), eps: 1}
	pc = empiricalPrivacy(t, broken, [][]float64{{1, 0}, {-1, 0}}, cellBall, 5, n, 13)
	t.Logf("broken laplace (half noise): max ln ratio = %.4f", pc.maxLoss)
	if !(pc.maxLower > broken.eps) {
		t.Errorf("the check did not catch the half-noise Laplace: max ln ratio = %.4f, lower bound %.4f ≤ ε = %v", pc.maxLoss, pc.maxLower, broken.eps)
	}
}

// specDuchi is Duchi's mechanism as the spec reads it for even d: ties in
// BOTH T⁺ and T⁻ (w accepted if ±Σw ≥ 0) with the spec's constant
// C_d = (2^{d−1} + ½C(d, d/2))/C(d−1, d/2). It is unbiased, but its true
// loss is ln(1 + e^ε), not the ε it claims (see [Duchi]).
type specDuchi struct {
	*Duchi
	specB float64
}

func newSpecDuchi(t *testing.T, set Box, eps float64) specDuchi {
	m, err := NewDuchi(set, eps)
	if err != nil {
		t.Fatal(err)
	}
	d := m.d
	binom := func(n, k int) float64 { // small d only
		r := 1.0
		for i := 1; i <= k; i++ {
			r = r * float64(n-k+i) / float64(i)
		}
		return r
	}
	cd := (math.Ldexp(1, d-1) + binom(d, d/2)/2) / binom(d-1, d/2)
	return specDuchi{Duchi: m, specB: cd / m.cap.contrast}
}

func (s specDuchi) Randomise(x []float64, src Source) ([]float64, error) {
	c, err := s.set.Clip(x)
	if err != nil {
		return nil, err
	}
	tc := s.frame.toWork(c, 1)
	br := bitReader{src: src}
	for j, tj := range tc {
		tc[j] = -1
		if bernoulliBits(&br, (1+tj)/2) {
			tc[j] = 1
		}
	}
	plus := s.cap.keep(&br)
	for {
		w := src.Uint64()
		sum := 0
		for j := range s.d {
			sum += 2*int(w>>j&1) - 1
		}
		if (plus && sum >= 0) || (!plus && sum <= 0) {
			for j := range tc {
				if w>>j&1 == 0 {
					tc[j] = -tc[j]
				}
				tc[j] *= s.specB
			}
			s.frame.fromWork(tc)
			return tc, nil
		}
	}
}

// TestEmpiricalPrivacyDuchi: d = 2 on the unit box, all four corners
// compared pairwise (opposite corners alone do not attain the loss of every
// tie convention); the four possible outputs are the cells, so the check is
// exact up to sampling error. The spec's even-d version (ties in both sets)
// is caught: its loss is ln(1 + e^ε).
func TestEmpiricalPrivacyDuchi(t *testing.T) {
	box := Box{Lo: []float64{0, 0}, Hi: []float64{1, 1}}
	corners := [][]float64{{0, 0}, {0, 1}, {1, 0}, {1, 1}}
	cell := func(y []float64) int { return 2*binOf(y[0], 0.5) + binOf(y[1], 0.5) }
	const n = 100000
	for i, eps := range []float64{0.5, 2} {
		r := mustRandomiser(t, "duchi", box, eps)
		pc := empiricalPrivacy(t, r, corners, cell, 4, n, 20+uint64(i))
		assertPrivate(t, fmt.Sprintf("duchi ε=%v", eps), pc, r.EffectiveEpsilon())
	}
	spec := newSpecDuchi(t, box, 1)
	pc := empiricalPrivacy(t, spec, corners, cell, 4, n, 29)
	t.Logf("duchi with ties in both sets (spec): max ln ratio = %.4f, true loss ln(1+e) = %.4f", pc.maxLoss, math.Log1p(math.E))
	if !(pc.maxLower > spec.EffectiveEpsilon()) {
		t.Errorf("the check did not catch the ties-in-both Duchi: max ln ratio %.4f, lower bound %.4f ≤ ε = %v", pc.maxLoss, pc.maxLower, spec.EffectiveEpsilon())
	}
}

// privUnitCells returns a partition of PrivUnit's releases on an L1Ball of
// dimension 2 fine enough to attain its loss: the ScalarDP level j (decoded
// from the release's norm |R̂ⱼ|/m, which must be unambiguous) and whether V
// lies in the cap around e₁, the cap around −e₁, or neither.
func privUnitCells(t *testing.T, m *PrivUnit) (func([]float64) int, int) {
	t.Helper()
	k := m.params.K
	levels := make([]float64, k+1)
	for j := range levels {
		levels[j] = m.magA * (float64(j) - m.magB) * m.scale
	}
	for i := range levels {
		for j := range i {
			if math.Abs(math.Abs(levels[i])-math.Abs(levels[j])) < 1e-6*math.Abs(levels[i]) {
				t.Fatalf("ambiguous ScalarDP levels %v", levels)
			}
		}
	}
	g := m.params.Gamma
	cell := func(y []float64) int {
		norm := math.Hypot(y[0], y[1])
		best := 0
		for j := range levels {
			if math.Abs(norm-math.Abs(levels[j])) < math.Abs(norm-math.Abs(levels[best])) {
				best = j
			}
		}
		if math.Abs(norm-math.Abs(levels[best])) > 1e-9*norm {
			t.Fatalf("release %v of norm %v matches no level of %v", y, norm, levels)
		}
		v0 := y[0] / levels[best] // first coordinate of V
		switch {
		case v0 >= g:
			return 3 * best
		case v0 <= -g:
			return 3*best + 1
		}
		return 3*best + 2
	}
	return cell, 3 * (k + 1)
}

// TestEmpiricalPrivacyPrivUnit: d = 2, x₁ = e₁ (norm r_max) and x₂ =
// −2⁻³⁰e₁ (norm ≈ 0, opposite direction), which maximise both the
// magnitude's and the direction's loss; the cells decode the ScalarDP
// level and the cap. A PrivUnit whose cap probability is calibrated to 2ε₀
// while claiming the same ε is caught.
func TestEmpiricalPrivacyPrivUnit(t *testing.T) {
	const n = 150000
	ball := L1Ball{D: 2, Radius: 1}
	x1, x2 := []float64{1, 0}, []float64{-0x1p-30, 0}
	for i, eps := range []float64{1, 3} {
		m, err := NewPrivUnit(ball, eps)
		if err != nil {
			t.Fatal(err)
		}
		cell, nc := privUnitCells(t, m)
		pc := empiricalPrivacy(t, m, [][]float64{x1, x2}, cell, nc, n, 30+uint64(i))
		assertPrivate(t, fmt.Sprintf("privunit ε=%v %+v", eps, m.Params()), pc, m.EffectiveEpsilon())
	}

	m, _ := NewPrivUnit(ball, 3)
	p := m.Params()
	p.Eps0 *= 2
	broken, err := newPrivUnitFromParams("broken", ball, MaxEpsilon, m.frame, m.zBound, p)
	if err != nil {
		t.Fatal(err)
	}
	cell, nc := privUnitCells(t, broken)
	pc := empiricalPrivacy(t, broken, [][]float64{x1, x2}, cell, nc, n, 39)
	t.Logf("broken privunit (2ε₀): max ln ratio = %.4f, true loss %.4f", pc.maxLoss, broken.EffectiveEpsilon())
	if !(pc.maxLower > m.EffectiveEpsilon()) {
		t.Errorf("the check did not catch the 2ε₀ PrivUnit: max ln ratio = %.4f, lower bound %.4f ≤ ε = %v", pc.maxLoss, pc.maxLower, m.EffectiveEpsilon())
	}
}

// TestRandomiserConcurrent: randomisers are immutable and may be shared by
// goroutines (run with -race); PrivUnit's parameter cache is guarded.
func TestRandomiserConcurrent(t *testing.T) {
	done := make(chan error)
	for g := range 4 {
		go func() {
			for _, name := range RandomiserNames() {
				r, err := NewRandomiser(name, L1Ball{D: 16, Radius: 1}, 1+float64(g%2))
				if err != nil {
					done <- err
					return
				}
				for range 50 {
					if _, err := r.Randomise(onesVec(16), CryptoSource()); err != nil {
						done <- err
						return
					}
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
