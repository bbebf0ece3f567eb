package mechanisms

import (
	"fmt"
	"math"
	mathrand "math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mathext"
)

func mustPrivUnit(t testing.TB, set OutputSet, eps float64) *PrivUnit {
	t.Helper()
	m, err := NewPrivUnit(set, eps)
	if err != nil {
		t.Fatalf("NewPrivUnit(%#v, %v): %v", set, eps, err)
	}
	return m
}

// TestCapMasses checks I_c = Pr[T ≥ γ] and ½ − I_c = Pr[0 ≤ T < γ] against
// closed forms (d = 2: T = cos θ, θ uniform: I_c = acos(γ)/π; d = 3: T
// uniform on [−1, 1]: I_c = (1 − γ)/2) to 10⁻¹³, and against the direct
// I_{(1−γ)/2}(α, α) for larger d (where slab + I_c = ½ to 10⁻¹², the
// accuracy of the incomplete beta function at d = 3072); and that the slab
// mass is accurate for tiny γ (≈ γ/B(½, α)).
func TestCapMasses(t *testing.T) {
	for _, g := range []float64{1e-9, 0.01, 0.3, 0.7, 0.99} {
		slab, c := capMasses(g, 0.5)
		if math.Abs(c-math.Acos(g)/math.Pi) > 1e-13*c || math.Abs(slab-math.Asin(g)/math.Pi) > 1e-13*slab+1e-300 {
			t.Errorf("d = 2, γ = %v: masses %v, %v; want %v, %v", g, slab, c, math.Asin(g)/math.Pi, math.Acos(g)/math.Pi)
		}
		slab, c = capMasses(g, 1)
		if math.Abs(c-(1-g)/2) > 1e-13*c || math.Abs(slab-g/2) > 1e-13*slab {
			t.Errorf("d = 3, γ = %v: masses %v, %v; want %v, %v", g, slab, c, g/2, (1-g)/2)
		}
	}
	for _, d := range []int{8, 64, 784, 3072} {
		alpha := float64(d-1) / 2
		for _, z := range []float64{0.1, 1, 3, 6} { // γ in units of the cosine's sd ≈ 1/√d
			g := z / math.Sqrt(float64(d))
			if g >= 1 {
				continue
			}
			slab, c := capMasses(g, alpha)
			direct := mathext.RegIncBeta(alpha, alpha, (1-g)/2)
			if math.Abs(c-direct) > 1e-12*direct || math.Abs(slab+c-0.5) > 1e-12 {
				t.Errorf("d = %d, γ = %v: I_c = %v, direct %v, slab + I_c = %v", d, g, c, direct, slab+c)
			}
		}
		g := 1e-12
		slab, _ := capMasses(g, alpha)
		want := g * math.Exp(-mathext.Lbeta(0.5, alpha))
		if math.Abs(slab-want) > 1e-9*want {
			t.Errorf("d = %d, γ = %v: slab %v, want ≈ %v", d, g, slab, want)
		}
	}
}

// privUnitMSEBound returns the worst-case MSE bound (V_max + 1)/m² − 1 (in
// units of r_max²) that the parameter choice minimises, for a given split.
func privUnitMSEBound(d int, eps, frac float64) float64 {
	_, v := scalarDPBestK(frac * eps)
	lm, _, _ := privUnitBestDirection(eps-frac*eps, d)
	return (1+v)*math.Exp(-2*lm) - 1
}

// TestPrivUnitParams checks the parameters over a grid of d and ε: the
// budget adds up; γ is in (0, 1), satisfies condition (a) or (b) of
// Theorem 1 for ε₁, and its exact cap loss is below ε₁; EffectiveEpsilon
// is the sum of the realised parts and ≤ ε; m ∈ (0, 1]; and the optimised
// split is at least as good as fixed splits (ε_mag = 0.1ε, 0.5ε).
func TestPrivUnitParams(t *testing.T) {
	for _, d := range []int{2, 3, 8, 64, 784, 3072} {
		for _, eps := range []float64{0x1p-30, 0.1, 1, 4, 8, 16, 64} {
			m := mustPrivUnit(t, L1Ball{D: d, Radius: 1}, eps)
			p := m.Params()
			ctx := fmt.Sprintf("d=%d ε=%v %+v", d, eps, p)
			if math.Abs(p.EpsDirection+p.EpsMagnitude-eps) > 1e-12*eps || math.Abs(p.Eps0+p.Eps1-p.EpsDirection) > 1e-12*eps {
				t.Errorf("%s: budget does not add up", ctx)
			}
			df, alpha := float64(d), float64(d-1)/2
			condA := p.Gamma <= math.Tanh(p.Eps1/2)*math.Sqrt(math.Pi/(2*(df-1)))*(1+1e-12)
			condB := p.Gamma >= math.Sqrt(2/df) &&
				p.Eps1*(1+1e-12) >= 0.5*math.Log(df)+math.Log(6)-alpha*math.Log1p(-p.Gamma*p.Gamma)+math.Log(p.Gamma)
			if !(p.Gamma > 0 && p.Gamma < 1) || !(condA || condB) {
				t.Errorf("%s: γ satisfies neither condition", ctx)
			}
			slab, c := capMasses(p.Gamma, alpha)
			exact := math.Log1p(2 * slab / c)
			if !(exact <= p.Eps1) || math.Abs(exact-p.Eps1Exact) > 1e-8*exact+1e-300 {
				t.Errorf("%s: exact cap loss %v vs Eps1Exact %v, Eps1 %v", ctx, exact, p.Eps1Exact, p.Eps1)
			}
			f := m.capRR.flip // ln((1 − F)/F), computed without cancellation
			parts := math.Log1p(math.FMA(-2, f, 1)/f) + exact + m.magRR.effEps
			if eff := m.EffectiveEpsilon(); !(eff <= eps) || math.Abs(eff-parts) > 1e-9*eps {
				t.Errorf("%s: EffectiveEpsilon %v, parts sum to %v", ctx, eff, parts)
			}
			if !(p.M > 0 && p.M <= 1) || !(p.P > 0.5) || p.K < 1 || p.K > 64 || p.RMax != 1 {
				t.Errorf("%s: implausible parameters", ctx)
			}
			if eps >= 0.1 && eps <= 16 {
				best := privUnitMSEBound(d, eps, p.EpsMagnitude/eps)
				for _, f := range []float64{0.1, 0.5} {
					if alt := privUnitMSEBound(d, eps, f); alt < best*(1-1e-9) {
						t.Errorf("%s: split ε_mag = %vε gives MSE bound %v < chosen %v", ctx, f, alt, best)
					}
				}
			}
		}
	}
}

// TestPrivUnitNormaliser checks m against numerical integration of the
// cosine's density ∝ (1 − t²)^{(d−3)/2}: m = p·E[T | T ≥ γ] +
// (1 − p)·E[T | T < γ], Simpson's rule on 2·10⁵ intervals (error ≪ 10⁻⁸
// for these smooth integrands at d ≥ 4).
func TestPrivUnitNormaliser(t *testing.T) {
	for _, c := range []struct {
		d   int
		eps float64
	}{{4, 1}, {8, 4}, {64, 8}, {784, 2}} {
		m := mustPrivUnit(t, L1Ball{D: c.d, Radius: 1}, c.eps)
		p := m.Params()
		e := float64(c.d-3) / 2
		simpson := func(a, b float64, f func(float64) float64) float64 {
			const n = 200000
			h := (b - a) / n
			s := f(a) + f(b)
			for i := 1; i < n; i++ {
				w := 2.0
				if i%2 == 1 {
					w = 4
				}
				s += w * f(a+float64(i)*h)
			}
			return s * h / 3
		}
		dens := func(t float64) float64 { return math.Exp(e * math.Log1p(-t*t)) }
		tdens := func(t float64) float64 { return t * dens(t) }
		g := p.Gamma
		capMean := simpson(g, 1, tdens) / simpson(g, 1, dens)
		compMean := simpson(-1, g, tdens) / simpson(-1, g, dens)
		want := p.P*capMean + (1-p.P)*compMean
		if math.Abs(p.M-want) > 1e-7*want {
			t.Errorf("d=%d ε=%v: m = %v, quadrature gives %v", c.d, c.eps, p.M, want)
		}
	}
}

// TestPrivUnitCosineLaw samples the cosine T = ⟨V, u⟩ at d = 8 and d = 784
// (where rejection on the sphere could not work) and compares it with the
// truncated Beta law by Kolmogorov–Smirnov tests, separately on the cap and
// its complement (p < 10⁻⁶ fails), checks √(1 − T²) against T, and checks
// E[T] = m within 5 standard errors.
func TestPrivUnitCosineLaw(t *testing.T) {
	for _, c := range []struct {
		d   int
		eps float64
	}{{8, 4}, {784, 4}, {784, 12}} {
		m := mustPrivUnit(t, L1Ball{D: c.d, Radius: 1}, c.eps)
		p := m.Params()
		a := m.alpha
		below := func(t float64) float64 { return mathext.RegIncBeta(a, a, (1+t)/2) } // Pr[T ≤ t]
		above := func(t float64) float64 { return mathext.RegIncBeta(a, a, (1-t)/2) } // Pr[T ≥ t]
		src := NewSeededSource(500 + uint64(c.d))
		const n = 10000
		for _, inCap := range []bool{true, false} {
			ts := make([]float64, n)
			for i := range ts {
				ti, si := m.sampleCosine(inCap, src)
				if inCap != (ti >= p.Gamma) || math.Abs(ti*ti+si*si-1) > 1e-12 || si < 0 {
					t.Fatalf("d=%d: cosine %v, sine %v for inCap = %v, γ = %v", c.d, ti, si, inCap, p.Gamma)
				}
				ts[i] = ti
			}
			cdf := func(x float64) float64 { return below(x) / (0.5 + m.slabMass) }
			if inCap {
				cdf = func(x float64) float64 { return 1 - above(x)/m.capMass }
			}
			if d, pv := ksPValue(ts, cdf); pv < 1e-6 {
				t.Errorf("d=%d ε=%v inCap=%v: KS D = %v, p = %v", c.d, c.eps, inCap, d, pv)
			}
		}
		var sum, sum2 float64
		br := bitReader{src: src}
		for range n {
			ti, _ := m.sampleCosine(m.capRR.keep(&br), src)
			sum += ti
			sum2 += ti * ti
		}
		mean := sum / n
		se := math.Sqrt((sum2/n - mean*mean) / n)
		if math.Abs(mean-p.M) > 5*se {
			t.Errorf("d=%d ε=%v: E[T] = %v ± %v, want m = %v", c.d, c.eps, mean, se, p.M)
		}
	}
}

// TestPrivUnitDirection: at d = 784, V = T·u + √(1−T²)·W is a unit vector
// with ⟨V, u⟩ = T, W ⊥ u, and E[V] = m·u (coordinatewise within 5.5
// standard errors over 16 coordinates; the perpendicular part averages
// out only if W is uniform on u's orthogonal sphere).
func TestPrivUnitDirection(t *testing.T) {
	const d, n = 784, 3000
	m := mustPrivUnit(t, L1Ball{D: d, Radius: 1}, 16)
	rng := mathrand.New(NewSeededSource(600))
	u := randomUnitVector(d, rng)
	src := NewSeededSource(601)
	br := bitReader{src: src}
	const coords = 16
	sum, sum2 := make([]float64, coords), make([]float64, coords)
	for range n {
		v := m.sampleDirection(u, &br, rng)
		var norm2, dot float64
		for i := range v {
			norm2 += v[i] * v[i]
			dot += v[i] * u[i]
		}
		if math.Abs(norm2-1) > 1e-12 {
			t.Fatalf("‖V‖² = %v", norm2)
		}
		for i := range coords {
			sum[i] += v[i]
			sum2[i] += v[i] * v[i]
		}
	}
	for i := range coords {
		mean := sum[i] / n
		se := math.Sqrt((sum2[i]/n - mean*mean) / n)
		if want := m.params.M * u[i]; math.Abs(mean-want) > 5.5*se {
			t.Errorf("coord %d: E[V] = %v ± %v, want m·u = %v", i, mean, se, want)
		}
	}
}

// TestScalarDPExact enumerates ScalarDP's output for several k and ε: the
// debiased R̂ has E[R̂] = r exactly (to 10⁻¹²·r_max) for every r in
// [0, r_max], and its variance never exceeds the bound V_max used to pick
// the parameters.
func TestScalarDPExact(t *testing.T) {
	base := mustPrivUnit(t, L1Ball{D: 4, Radius: 2}, 4)
	for _, k := range []int{1, 2, 5, 17} {
		for _, eps := range []float64{0.3, 2, 9} {
			p := base.Params()
			p.K, p.EpsMagnitude = k, eps
			m, err := newPrivUnitFromParams("test", base.set, MaxEpsilon, base.frame, base.zBound, p)
			if err != nil {
				t.Fatal(err)
			}
			f := m.magRR.flip
			vmax := scalarDPVarBound(k, f) * p.RMax * p.RMax
			for i := 0; i <= 40; i++ {
				r := p.RMax * float64(i) / 40
				y := float64(k) * r / p.RMax
				j0 := math.Floor(y)
				var mean, second float64
				for dj, pj := range []float64{1 - (y - j0), y - j0} {
					j := int(j0) + dj
					if pj == 0 || j > k {
						continue
					}
					for out := 0; out <= k; out++ {
						q := f / float64(k)
						if out == j {
							q = 1 - f
						}
						rh := m.magA * (float64(out) - m.magB)
						mean += pj * q * rh
						second += pj * q * rh * rh
					}
				}
				if math.Abs(mean-r) > 1e-12*p.RMax*math.Max(1, m.magA) {
					t.Errorf("k=%d ε=%v r=%v: E[R̂] = %v", k, eps, r, mean)
				}
				if v := second - mean*mean; v > vmax*(1+1e-12) {
					t.Errorf("k=%d ε=%v r=%v: Var R̂ = %v exceeds the bound %v", k, eps, r, v, vmax)
				}
			}
		}
	}
}

// TestPrivUnitUnbiased: E[release] = clipped x at d = 8 and d = 64, on an
// L1Ball and a Box, for an input outside the set and one inside. Each
// coordinate's sample mean must be within 5.5 standard errors (sample
// standard deviation; Bonferroni over the 144 coordinates: false-failure
// probability < 10⁻⁵), and so must the projection ⟨mean − x, u⟩ on the
// input's direction.
func TestPrivUnitUnbiased(t *testing.T) {
	t.Parallel()
	for i, c := range []struct {
		d, n int
		eps  float64
		box  bool
	}{{8, 60000, 4, false}, {8, 60000, 2, true}, {64, 25000, 8, false}, {64, 25000, 8, true}} {
		var set OutputSet = L1Ball{D: c.d, Radius: 3}
		if c.box {
			lo, hi := make([]float64, c.d), make([]float64, c.d)
			for j := range lo {
				lo[j], hi[j] = float64(j%3)-1, float64(j%3)+float64(j%2)
			}
			set = Box{Lo: lo, Hi: hi}
		}
		m := mustPrivUnit(t, set, c.eps)
		x := make([]float64, c.d)
		for j := range x {
			x[j] = math.Sin(float64(3*j+1)) * 2
		}
		clipped, _ := set.Clip(x)
		d := c.d
		sum, sum2 := make([]float64, d), make([]float64, d)
		src := NewSeededSource(700 + uint64(i))
		ys := make([][]float64, 0, c.n)
		for range c.n {
			y, err := m.Randomise(x, src)
			if err != nil {
				t.Fatal(err)
			}
			for j := range y {
				sum[j] += y[j]
				sum2[j] += y[j] * y[j]
			}
			ys = append(ys, y)
		}
		n := float64(c.n)
		for j := range d {
			mean := sum[j] / n
			se := math.Sqrt((sum2[j]/n - mean*mean) / n)
			if math.Abs(mean-clipped[j]) > 5.5*se {
				t.Errorf("case %d coord %d: mean %v, want %v ± %v (%.1f σ)", i, j, mean, clipped[j], 5.5*se, (mean-clipped[j])/se)
			}
		}
		// Projection on the direction of the clipped input.
		var norm float64
		for j := range clipped {
			norm += clipped[j] * clipped[j]
		}
		norm = math.Sqrt(norm)
		var ps, ps2 float64
		for _, y := range ys {
			var pr float64
			for j := range y {
				pr += (y[j] - clipped[j]) * clipped[j] / norm
			}
			ps += pr
			ps2 += pr * pr
		}
		mean := ps / n
		se := math.Sqrt((ps2/n - mean*mean) / n)
		if math.Abs(mean) > 5.5*se {
			t.Errorf("case %d: projection of the bias on x/‖x‖ = %v ± %v", i, mean, se)
		}
		t.Logf("case %d (d=%d ε=%v box=%v): projection bias %.4f ± %.4f, ‖x‖ = %.3f", i, d, c.eps, c.box, mean, se, norm)
	}
}

// TestPrivUnitZeroInput: x = 0 gets a uniformly random direction; the
// releases are unbiased for 0 (5 standard errors per coordinate over 8
// coordinates) and point in many directions.
func TestPrivUnitZeroInput(t *testing.T) {
	const d, n = 8, 40000
	m := mustPrivUnit(t, L1Ball{D: d, Radius: 1}, 4)
	src := NewSeededSource(800)
	sum, sum2 := make([]float64, d), make([]float64, d)
	var first []float64
	maxCos := 0.0
	for i := range n {
		y, err := m.Randomise(make([]float64, d), src)
		if err != nil {
			t.Fatal(err)
		}
		for j := range y {
			sum[j] += y[j]
			sum2[j] += y[j] * y[j]
		}
		if i == 0 {
			first = y
		} else if i < 50 {
			var dot, n1, n2 float64
			for j := range y {
				dot += y[j] * first[j]
				n1 += y[j] * y[j]
				n2 += first[j] * first[j]
			}
			maxCos = math.Max(maxCos, math.Abs(dot)/math.Sqrt(n1*n2))
		}
	}
	if maxCos > 0.999 {
		t.Errorf("releases for x = 0 are (nearly) collinear: max |cos| = %v", maxCos)
	}
	for j := range d {
		mean := sum[j] / n
		se := math.Sqrt((sum2[j]/n - mean*mean) / n)
		if math.Abs(mean) > 5.5*se {
			t.Errorf("coord %d: mean %v ± %v, want 0", j, mean, se)
		}
	}
}

// TestPrivUnitHighDimension: construction and a few releases at d = 784
// (MNIST) and d = 3072 (CIFAR-10) on the unit box: finite, and the release
// norm equals |R̂|/m times the box half-widths (here ½).
func TestPrivUnitHighDimension(t *testing.T) {
	for _, d := range []int{784, 3072} {
		box := Box{Lo: make([]float64, d), Hi: onesVec(d)}
		m := mustPrivUnit(t, box, 8)
		src := NewSeededSource(900 + uint64(d))
		x := make([]float64, d)
		for j := range x {
			x[j] = float64(j%7) / 6
		}
		for range 5 {
			y, err := m.Randomise(x, src)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkFinite("", "y", y); err != nil {
				t.Fatal(err)
			}
			var n2 float64
			for j := range y {
				z := (y[j] - 0.5) / 0.5
				n2 += z * z
			}
			norm := math.Sqrt(n2)
			ok := false
			for j := 0; j <= m.params.K; j++ {
				if l := math.Abs(m.magA*(float64(j)-m.magB)) * m.scale; math.Abs(norm-l) < 1e-9*l {
					ok = true
				}
			}
			if !ok {
				t.Errorf("d=%d: release norm %v is not a ScalarDP level / m", d, norm)
			}
		}
	}
}
