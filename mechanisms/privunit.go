package mechanisms

import (
	"math"
	mathrand "math/rand/v2"
	"sync"

	"gonum.org/v1/gonum/mathext"
)

// PrivUnit is PrivUnit₂ for the direction and ScalarDP for the magnitude
// (Bhowmick, Duchi, Freudiger, Kapoor & Rogers, "Protection Against
// Reconstruction and Its Implications for Private Federated Learning",
// arXiv:1812.00984, Algorithms 1 and 2), the baseline of thesis §7.3. An
// input x (clipped into the set, in working coordinates z, see below) is
// split into its norm r = ‖z‖₂ ≤ r_max and direction u = z/r; x = 0 gets a
// uniformly random direction (any u gives an unbiased release of 0). The
// release is R̂·Z, with R̂ = ScalarDP(r) and Z = PrivUnit₂(u) independent,
// E[R̂] = r and E[Z] = u, so E[R̂·Z] = z. It is ε-LDP with
// ε = ε_dir + ε_mag (basic composition).
//
// PrivUnit₂(u, γ, p). With probability p = e^{ε₀}/(1 + e^{ε₀}) draw V
// uniformly from the cap {v ∈ S^{d−1} : ⟨v, u⟩ ≥ γ}, otherwise uniformly
// from its complement, and return Z = V/m with
//
//	m = (1 − γ²)^α / ((d − 1)·B(½, α)) · [p/I_c − (1 − p)/(1 − I_c)],
//
// α = (d − 1)/2, I_c = Pr[⟨V, u⟩ ≥ γ] for V uniform on the sphere, so that
// E[Z] = u. (This is the paper's m: 2^{d−2}B(α, α) = B(½, α).) The cosine
// T = ⟨V, u⟩ has density ∝ (1 − t²)^{(d−3)/2}, i.e. S = (1 + T)/2 ~
// Beta(α, α), so I_c = I_{(1−γ)/2}(α, α). The mass of the slab
// ½ − I_c = Pr[0 ≤ T < γ] would cancel for small γ, so we evaluate it by
// the identity I_x(α, α) = ½·I_{4x(1−x)}(α, ½) (x ≤ ½) as
//
//	½ − I_c = ½·I_{γ²}(½, α),
//
// and take I_c = ½ − slab when the slab is small, I_{(1−γ)/2}(α, α)
// directly otherwise; m is computed in log space, so nothing overflows or
// cancels at d = 3072 nor for tiny γ. V is sampled as
// V = T·u + √(1 − T²)·W, W uniform on the unit sphere orthogonal to u (a
// projected normalised Gaussian vector), and T from the truncated Beta law
// by inverting its CDF (gonum's InvRegIncBeta, always in the tail where the
// target probability is ≤ ½, so it is computed to ~10⁻¹³ relative):
// rejection sampling on the sphere would essentially never hit the cap at
// d = 784. The privacy loss of PrivUnit₂ is exactly
//
//	ε₀ + ln((1 − I_c)/I_c),
//
// the density ratio of a point of u's cap under u and under −u. Bhowmick et
// al.'s Theorem 1 bounds the second term by ε₁ if γ satisfies
//
//	(a) γ ≤ (e^{ε₁} − 1)/(e^{ε₁} + 1)·√(π/(2(d − 1))), or
//	(b) ε₁ ≥ ½ ln d + ln 6 − α·ln(1 − γ²) + ln γ  and  γ ≥ √(2/d).
//
// ScalarDP(r, k, r_max). Round k·r/r_max stochastically to J ∈ {0, …, k}
// (E[J] = k·r/r_max), release J̃ by (k+1)-ary randomised response (keep with
// probability 1 − F, else uniform over the other k values; ε_mag-LDP for
// every J, see rr), and debias: R̂ = (r_max/k)·(J̃ − F(k + 1)/2)/c, with
// c = 1 − F(k + 1)/k. For the nominal F = k/(e^ε + k) this is the paper's
// a(J̃ − b), a = ((e^ε + k)/(e^ε − 1))·(r_max/k), b = k(k + 1)/(2(e^ε + k));
// the realised F is used so that R̂ is unbiased for the sampler as built.
//
// Parameters (the thesis leaves them open, §7.3 and §12; all are chosen at
// construction from (d, ε) only, so they leak nothing):
//
//   - r_max is the largest ℓ2 norm in the set: the radius l for an L1Ball
//     (‖z‖₂ ≤ ‖z‖₁ ≤ l; working coordinates are the set's own), and √d for
//     a Box, which is first mapped affinely onto the cube [−1, 1]ᵈ
//     (z = 2(x − lo)/(hi − lo) − 1); the release is mapped back by the
//     inverse map (post-processing, keeps unbiasedness).
//   - γ, given ε₁, is the LARGEST γ satisfying (a) or (b) (a larger cap
//     offset means a larger m, i.e. less variance).
//   - ε_dir/ε_mag, ε₀/ε₁ and k minimise the worst-case mean squared error
//     bound sup_x E‖R̂Z − z‖² ≤ (V_max + r_max²)/m² − r_max² (attained at
//     ‖z‖ = r_max), where V_max = (r_max/(kc))²·(F·Q/k − F²(k+1)²/4 + c²/4),
//     Q = k(k+1)(2k+1)/6, bounds Var R̂ (randomised response from an end
//     point plus stochastic rounding). The error is a PRODUCT of the
//     magnitude's second moment and the direction's 1/m², so the magnitude
//     is not a rounding error: the optimum gives it roughly 45% of ε at
//     ε = 1, 35% at ε = 4 and 20% at ε = 16, nearly independently of d
//     (an ε_dir = 0.9ε split is 4–6× worse at ε ≤ 2). k is searched over
//     1..64 (the optimum is 1 for ε_mag < 1.24 and grows roughly like
//     e^{ε_mag/3}), ε₁ by a grid and golden-section search over
//     (0, 0.98ε_dir], and the fraction ε_mag/ε likewise over [1/32, 3/4].
//     The search costs a few milliseconds and is cached per (d, ε).
//
// EffectiveEpsilon is the exact loss of the sampler as built: the realised
// ln(p/(1 − p)) + ln((1 − I_c)/I_c) + the realised ScalarDP loss. The
// second term is strictly below the ε₁ that γ was chosen for (the theorem's
// conditions are sufficient, not tight; e.g. ≈ 0.8ε₁ at d = 2), so
// EffectiveEpsilon is somewhat below Epsilon; the slack is not re-spent.
//
// Exactness and floating point. The cap choice and ScalarDP are exact
// Bernoulli/IntN draws of float64 probabilities (see rr). The direction V
// is continuous and computed in float64: the cosine's law is realised up to
// the ~10⁻¹³ relative accuracy of the incomplete beta function, and, unlike
// [Laplace], the released floats are not hardened against floating-point
// side channels (Mironov 2012); this is the usual state of PrivUnit
// implementations (e.g. Apple's pfl) and is a known limitation.
//
// PrivUnit needs d ≥ 2 and ε ≥ 2⁻³⁰.
type PrivUnit struct {
	eps, effEps float64
	set         OutputSet
	d           int
	frame       affineFrame
	zBound      float64 // |zᵢ| ≤ zBound in working coordinates
	params      PrivUnitParams

	alpha    float64 // (d − 1)/2
	capRR    rr      // others = 1: flip ⇒ complement
	magRR    rr      // others = k
	capMass  float64 // I_c
	slabMass float64 // ½ − I_c
	scale    float64 // 1/m
	magA     float64 // r_max/(k·c)
	magB     float64 // F(k + 1)/2
}

// PrivUnitParams are the data-independent parameters of a [PrivUnit].
type PrivUnitParams struct {
	EpsDirection float64 // ε_dir = ε₀ + ε₁ (nominal)
	EpsMagnitude float64 // ε_mag, ScalarDP's budget (nominal)
	Eps0         float64 // cap-choice budget: p = e^{ε₀}/(1 + e^{ε₀})
	Eps1         float64 // cap-size budget γ was chosen for
	Eps1Exact    float64 // ln((1 − I_c)/I_c), the realised cap-size loss, < Eps1
	Gamma        float64 // cap offset γ
	P            float64 // realised probability of sampling the cap
	M            float64 // normaliser m: E[⟨V, u⟩] = m
	K            int     // ScalarDP levels
	RMax         float64 // ScalarDP's r_max, in working coordinates
}

// privUnitMinEpsilon is the smallest ε NewPrivUnit accepts: below it the
// magnitude's share of ε cannot be realised by randomised response in
// float64 (and such a release is pure noise anyway).
const privUnitMinEpsilon = 0x1p-30

// privUnitMaxGamma caps γ away from 1 so that 1 − γ² and its logarithm stay
// accurate; it only binds for tiny d at very large ε.
const privUnitMaxGamma = 1 - 0x1p-30

// NewPrivUnit returns PrivUnit₂ + ScalarDP for set (an [L1Ball] or a [Box])
// at privacy level eps, with the parameters described on [PrivUnit]. It
// returns an error for an invalid set or eps, for d < 2 or eps < 2⁻³⁰, or if
// the largest possible release overflows float64.
func NewPrivUnit(set OutputSet, eps float64) (*PrivUnit, error) {
	const who = "NewPrivUnit"
	s, err := copyOutputSet(who, set)
	if err != nil {
		return nil, err
	}
	if err := checkEpsilon(who, eps); err != nil {
		return nil, err
	}
	if eps < privUnitMinEpsilon {
		return nil, invalid("%s: epsilon = %v is below the minimum 2^-30 for privunit", who, eps)
	}
	d := s.Dim()
	if d < 2 {
		return nil, invalid("%s: dimension %d: privunit needs d >= 2 (the sphere S^0 has no caps); use laplace or duchi", who, d)
	}
	p := choosePrivUnitParams(d, eps)
	var frame affineFrame
	var rmax, zBound float64
	switch s := s.(type) {
	case L1Ball:
		frame, rmax, zBound = newScaleFrame(d, 1), s.Radius, s.Radius
	case Box:
		frame, rmax, zBound = newBoxFrame(s), math.Sqrt(float64(d)), 1
	}
	p.RMax = rmax
	return newPrivUnitFromParams(who, s, eps, frame, zBound, p)
}

// newPrivUnitFromParams builds the mechanism for given nominal parameters
// (EpsDirection, EpsMagnitude, Eps0, Eps1, Gamma, K, RMax); the tests use it
// to build deliberately broken variants.
func newPrivUnitFromParams(who string, s OutputSet, eps float64, frame affineFrame, zBound float64, p PrivUnitParams) (*PrivUnit, error) {
	d := s.Dim()
	m := &PrivUnit{eps: eps, set: s, d: d, frame: frame, zBound: zBound, alpha: float64(d-1) / 2}
	var err error
	if m.capRR, err = newRR(who+" (cap choice)", p.Eps0, 1); err != nil {
		return nil, err
	}
	if m.magRR, err = newRR(who+" (ScalarDP)", p.EpsMagnitude, p.K); err != nil {
		return nil, err
	}
	m.slabMass, m.capMass = capMasses(p.Gamma, m.alpha)
	logM := privUnitLogM(p.Gamma, 0.5-m.capRR.flip, m.alpha, m.slabMass, m.capMass)
	p.P = 1 - m.capRR.flip
	p.M = math.Exp(logM)
	p.Eps1Exact = math.Log1p(2*m.slabMass/m.capMass) * (1 + 0x1p-30)
	m.params = p
	if !(p.Eps1Exact <= p.Eps1) || !(p.Gamma > 0) {
		// privUnitGamma caps γ so that the exact loss is ≤ ε₁(1 − 2⁻²⁴);
		// failing this means the special functions misbehaved.
		return nil, invalid("%s: internal check failed: cap loss %v exceeds eps1 = %v (gamma = %v, d = %d)", who, p.Eps1Exact, p.Eps1, p.Gamma, d)
	}
	m.effEps = sumUp(m.capRR.effEps, p.Eps1Exact, m.magRR.effEps)
	if !(m.effEps <= eps) {
		return nil, invalid("%s: internal check failed: effective epsilon %v exceeds epsilon %v", who, m.effEps, eps)
	}
	m.scale = math.Exp(-logM)
	k := float64(p.K)
	m.magA = p.RMax / (k * m.magRR.contrast)
	m.magB = m.magRR.flip * (k + 1) / 2
	maxR := m.magA * math.Max(m.magB, k-m.magB)
	if math.IsInf(maxR*m.scale, 0) || math.IsInf(frame.maxOutput(maxR*m.scale), 0) {
		return nil, invalid("%s: the largest release (%v in working coordinates) overflows float64 for this set and epsilon = %v", who, maxR*m.scale, eps)
	}
	return m, nil
}

// Name returns "privunit".
func (m *PrivUnit) Name() string { return RandomiserPrivUnit }

// Epsilon returns the requested ε.
func (m *PrivUnit) Epsilon() float64 { return m.eps }

// EffectiveEpsilon returns the exact privacy loss of the sampler as built
// (see [PrivUnit]), rounded up; it is below Epsilon().
func (m *PrivUnit) EffectiveEpsilon() float64 { return m.effEps }

// Set returns a copy of the output set.
func (m *PrivUnit) Set() OutputSet { return cloneOutputSet(m.set) }

// Params returns the mechanism's parameters.
func (m *PrivUnit) Params() PrivUnitParams { return m.params }

// Randomise clips x into the set and returns R̂·Z in the set's coordinates
// (see [PrivUnit]).
func (m *PrivUnit) Randomise(x []float64, src Source) ([]float64, error) {
	c, err := m.set.Clip(x)
	if err != nil {
		return nil, err
	}
	z := m.frame.toWork(c, m.zBound)
	br := bitReader{src: src}
	rng := mathrand.New(src)
	r, u := polar(z)
	if r == 0 {
		u = randomUnitVector(m.d, rng)
	}
	rhat := m.scalarDP(r, &br)
	v := m.sampleDirection(u, &br, rng)
	f := rhat * m.scale
	for i := range v {
		v[i] *= f
	}
	m.frame.fromWork(v)
	return v, nil
}

// scalarDP returns R̂ for the norm r ≥ 0 (clamped to r_max).
func (m *PrivUnit) scalarDP(r float64, br *bitReader) float64 {
	k := m.params.K
	y := float64(k) * math.Min(r/m.params.RMax, 1)
	j := int(math.Floor(y))
	if j < k && bernoulliBits(br, y-float64(j)) {
		j++
	}
	return m.magA * (float64(m.magRR.respond(j, br)) - m.magB)
}

// sampleDirection returns V: uniform on u's cap with probability p,
// otherwise uniform on its complement.
func (m *PrivUnit) sampleDirection(u []float64, br *bitReader, rng *mathrand.Rand) []float64 {
	t, sin := m.sampleCosine(m.capRR.keep(br), br.src)
	w := orthogonalUnitVector(u, rng)
	for i := range w {
		w[i] = t*u[i] + sin*w[i]
	}
	return w
}

// sampleCosine returns T = ⟨V, u⟩ and √(1 − T²) for V uniform on the cap
// (T ≥ γ) or on its complement (T < γ), by inverting the CDF of
// S = (1 + T)/2 ~ Beta(α, α) always in a tail whose mass is ≤ ½: writing
// y for S or 1 − S, whichever is ≤ ½, T = ±(1 − 2y) and
// √(1 − T²) = 2√(y(1 − y)), both without cancellation.
func (m *PrivUnit) sampleCosine(inCap bool, src Source) (t, sin float64) {
	u := Float64(src) // [0, 1)
	lowTail := (1 - m.params.Gamma) / 2
	if inCap {
		// Pr[1 − S ≤ y] = I_y, y ∈ (0, (1−γ)/2]: target mass in (0, I_c].
		y := m.invLowerCDF((1-u)*m.capMass, 0, lowTail)
		return 1 - 2*y, 2 * math.Sqrt(y*(1-y))
	}
	below := 0.5 + m.slabMass // 1 − I_c, the complement's mass
	if l := u * below; l <= 0.5 {
		// S ≤ ½: Pr[S ≤ s] = l.
		s := m.invLowerCDF(l, 0, 0.5)
		return 2*s - 1, 2 * math.Sqrt(s*(1-s))
	}
	// ½ < S < τ: Pr[1 − S ≤ y] = 1 − l = I_c + (1 − u)(1 − I_c) ∈ [I_c, ½).
	y := m.invLowerCDF(m.capMass+(1-u)*below, lowTail, 0.5)
	return 1 - 2*y, 2 * math.Sqrt(y*(1-y))
}

// invLowerCDF returns y ∈ [lo, hi] ⊆ [0, ½] with I_y(α, α) = q, q ∈ [0, ½].
func (m *PrivUnit) invLowerCDF(q, lo, hi float64) float64 {
	return math.Min(math.Max(invSymBeta(m.alpha, q), lo), hi)
}

// polar returns r = ‖z‖₂ and u = z/r, scaling by max|zᵢ| so that nothing
// overflows or underflows; u is nil when z = 0.
func polar(z []float64) (float64, []float64) {
	var s float64
	for _, v := range z {
		s = math.Max(s, math.Abs(v))
	}
	if s == 0 {
		return 0, nil
	}
	var q float64
	for _, v := range z {
		q += (v / s) * (v / s)
	}
	n := math.Sqrt(q)
	u := make([]float64, len(z))
	for i, v := range z {
		u[i] = v / s / n
	}
	return s * n, u
}

// randomUnitVector returns a uniform point of S^{d−1} (a normalised
// standard Gaussian vector).
func randomUnitVector(d int, rng *mathrand.Rand) []float64 {
	g := make([]float64, d)
	for {
		var q float64
		for i := range g {
			g[i] = rng.NormFloat64()
			q += g[i] * g[i]
		}
		if q > 0 {
			n := math.Sqrt(q)
			for i := range g {
				g[i] /= n
			}
			return g
		}
	}
}

// orthogonalUnitVector returns W uniform on the unit sphere of u's
// orthogonal complement: a standard Gaussian vector with its u-component
// removed (twice, for accuracy) and normalised. Draws whose orthogonal part
// is below 2⁻²⁰ of their norm are redrawn; that event depends only on the
// angle between the draw and u, so, by rotational symmetry about u, W stays
// uniform.
func orthogonalUnitVector(u []float64, rng *mathrand.Rand) []float64 {
	g := make([]float64, len(u))
	for {
		var q0 float64
		for i := range g {
			g[i] = rng.NormFloat64()
			q0 += g[i] * g[i]
		}
		for range 2 {
			var dot float64
			for i := range g {
				dot += g[i] * u[i]
			}
			for i := range g {
				g[i] -= dot * u[i]
			}
		}
		var q float64
		for _, v := range g {
			q += v * v
		}
		if q > q0*0x1p-40 && q > 0 {
			n := math.Sqrt(q)
			for i := range g {
				g[i] /= n
			}
			return g
		}
	}
}

// capMasses returns ½ − I_c = Pr[0 ≤ T < γ] and I_c = Pr[T ≥ γ] for the
// cosine T of a uniform point of S^{d−1}, α = (d − 1)/2, γ ∈ [0, 1), via
// I_x(α, α) = ½·I_{4x(1−x)}(α, ½), 4x(1 − x) = 1 − γ² at x = (1 − γ)/2:
// the slab is ½·I_{γ²}(½, α), accurate to ~10⁻¹³ relative even for tiny γ;
// I_c is ½ − slab while that is ≥ ¼ (no cancellation), and otherwise the
// lower tail I_{(1−γ)/2}(α, α) itself (the function the sampler inverts),
// accurate relative to its own size (~10⁻¹³, ~10⁻¹² at d = 3072).
func capMasses(gamma, alpha float64) (slab, capMass float64) {
	slab = 0.5 * mathext.RegIncBeta(0.5, alpha, gamma*gamma)
	if slab <= 0.25 {
		return slab, 0.5 - slab
	}
	return slab, mathext.RegIncBeta(alpha, alpha, (1-gamma)/2)
}

// privUnitLogM returns ln m for cap offset γ, p − ½ = halfContrast, and the
// masses from capMasses:
//
//	m = (1−γ²)^α/((d−1)B(½,α)) · (p − I_c)/(I_c(1 − I_c)),
//
// with p − I_c = (p − ½) + (½ − I_c) and 1 − I_c = ½ + (½ − I_c).
func privUnitLogM(gamma, halfContrast, alpha, slab, capMass float64) float64 {
	return alpha*math.Log((1-gamma)*(1+gamma)) - math.Log(2*alpha) - mathext.Lbeta(0.5, alpha) +
		math.Log(halfContrast+slab) - math.Log(capMass) - math.Log(0.5+slab)
}

// privUnitGamma returns the γ for eps1 and its capMasses: the largest γ
// satisfying condition (a) or (b) of Bhowmick et al.'s Theorem 1 (see
// [PrivUnit]), capped at privUnitMaxGamma, and in addition never beyond the
// γ at which the exact cap loss ln((1 − I_c)/I_c) reaches eps1·(1 − 2⁻²⁰).
// The extra cap is a safety net: in d = 2, condition (a) admits every
// γ < 1 once ε₁ > 2.18, but the exact loss exceeds ε₁ from γ ≈ 0.91 on
// (the theorem's cap-area estimate does not hold there); in d = 3 it can
// bind for γ close to 1 under (b); in the tested range d ≥ 8 it never binds.
func privUnitGamma(eps1 float64, d int) (gamma, slab, capMass float64) {
	alpha := float64(d-1) / 2
	g := privUnitGammaTheorem(eps1, d)
	slab, capMass = capMasses(g, alpha)
	if math.Log1p(2*slab/capMass) <= eps1*(1-0x1p-24) {
		return g, slab, capMass
	}
	// Solve I_c(γ) = 1/(1 + e^{target}), target = ε₁(1 − 2⁻²⁰), directly:
	// I_c = I_{(1−γ)/2}(α, α); then step down until the check passes (the
	// first try does, unless the special functions are far off).
	target := eps1 * (1 - 0x1p-20)
	g = math.Min(g, 1-2*invSymBeta(alpha, 1/(1+math.Exp(target))))
	for range 64 {
		slab, capMass = capMasses(g, alpha)
		if math.Log1p(2*slab/capMass) <= eps1*(1-0x1p-24) {
			break
		}
		g *= 1 - 0x1p-20
	}
	return g, slab, capMass
}

// invSymBeta returns y ∈ [0, ½] with I_y(α, α) = q for q ∈ [0, ½] (closed
// forms for α = ½ and α = 1, i.e. d = 2 and d = 3; gonum's InvRegIncBeta,
// accurate to ~10⁻¹³ relative in this lower tail, otherwise).
func invSymBeta(alpha, q float64) float64 {
	q = math.Min(q, 0.5)
	var y float64
	switch {
	case !(q > 0):
		return 0
	case alpha == 0.5: // I_y(½, ½) = (2/π)·asin(√y)
		s := math.Sin(math.Pi / 2 * q)
		y = s * s
	case alpha == 1: // I_y(1, 1) = y
		y = q
	default:
		y = mathext.InvRegIncBeta(alpha, alpha, q)
		if math.IsNaN(y) {
			// Not expected; fall back to bisection on I_y.
			a, b := 0.0, 0.5
			for range 100 {
				mid := (a + b) / 2
				if mathext.RegIncBeta(alpha, alpha, mid) < q {
					a = mid
				} else {
					b = mid
				}
			}
			y = (a + b) / 2
		}
	}
	return math.Min(math.Max(y, 0), 0.5)
}

// privUnitGammaTheorem returns the largest γ satisfying condition (a) or (b)
// of Bhowmick et al.'s Theorem 1 for eps1, capped at privUnitMaxGamma.
func privUnitGammaTheorem(eps1 float64, d int) float64 {
	df := float64(d)
	ga := math.Tanh(eps1/2) * math.Sqrt(math.Pi/(2*(df-1)))
	alpha := (df - 1) / 2
	epsB := func(g float64) float64 {
		return 0.5*math.Log(df) + math.Log(6) - alpha*math.Log1p(-g*g) + math.Log(g)
	}
	gb := 0.0
	if lo := math.Sqrt(2 / df); lo < privUnitMaxGamma && epsB(lo) <= eps1 {
		hi := privUnitMaxGamma
		if epsB(hi) <= eps1 {
			gb = hi
		} else {
			// Safeguarded Newton on the increasing epsB, keeping the
			// invariant epsB(lo) ≤ eps1 < epsB(hi).
			g := (lo + hi) / 2
			for range 200 {
				f := epsB(g) - eps1
				if f <= 0 {
					lo = g
				} else {
					hi = g
				}
				if hi-lo <= 0x1p-52*hi {
					break
				}
				next := g - f/(2*alpha*g/((1-g)*(1+g))+1/g)
				if !(next > lo && next < hi) {
					next = (lo + hi) / 2
				}
				g = next
			}
			gb = lo
		}
	}
	return math.Min(math.Max(ga, gb), privUnitMaxGamma)
}

// privUnitNominalFlip returns k/(e^ε + k), ScalarDP's nominal flip
// probability (k = 1: PrivUnit's probability of the complement).
func privUnitNominalFlip(eps float64, k int) float64 {
	kf := float64(k)
	if eps < 1 {
		return kf / (kf + 1 + math.Expm1(eps))
	}
	e := math.Exp(-eps)
	return kf * e / (1 + kf*e)
}

// scalarDPVarBound returns V_max/r_max² for k levels and flip probability F
// (see [PrivUnit]).
func scalarDPVarBound(k int, f float64) float64 {
	kf := float64(k)
	c := 1 - f*(kf+1)/kf
	q := kf * (kf + 1) * (2*kf + 1) / 6
	v0 := f*q/kf - f*f*(kf+1)*(kf+1)/4
	return (v0 + c*c/4) / (kf * c * kf * c)
}

// scalarDPBestK returns the k ∈ [1, 64] minimising scalarDPVarBound at
// eps, and the bound.
func scalarDPBestK(eps float64) (int, float64) {
	bestK, bestV := 1, math.Inf(1)
	for k := 1; k <= 64; k++ {
		if v := scalarDPVarBound(k, privUnitNominalFlip(eps, k)); v < bestV {
			bestK, bestV = k, v
		}
	}
	return bestK, bestV
}

// privUnitBestDirection maximises ln m over ε₁ ∈ (0, 0.98ε_dir] (with γ the
// largest allowed for ε₁ and ε₀ = ε_dir − ε₁) and returns ln m, ε₁ and γ.
func privUnitBestDirection(epsDir float64, d int) (logM, eps1, gamma float64) {
	alpha := float64(d-1) / 2
	obj := func(e1 float64) (float64, float64) {
		g, slab, capMass := privUnitGamma(e1, d)
		// p − ½ = ½·tanh(ε₀/2) for the nominal p.
		return privUnitLogM(g, 0.5*math.Tanh((epsDir-e1)/2), alpha, slab, capMass), g
	}
	e1, lm, g := maximise1D(obj, 0, 0.98*epsDir, 16, 14)
	return lm, e1, g
}

// maximise1D maximises f over (lo, hi] by a grid of n points lo + i(hi−lo)/n,
// i = 1..n, then golden-section search between the best point's
// neighbours; f returns the objective and an auxiliary value.
func maximise1D(f func(float64) (float64, float64), lo, hi float64, n, iters int) (x, best, aux float64) {
	step := (hi - lo) / float64(n)
	bi := 1
	best = math.Inf(-1)
	for i := 1; i <= n; i++ {
		if v, a := f(lo + float64(i)*step); v > best {
			best, aux, bi = v, a, i
		}
	}
	x = lo + float64(bi)*step
	a, b := lo+float64(bi-1)*step, math.Min(hi, lo+float64(bi+1)*step)
	if bi == 1 {
		a = lo + step/64 // keep off the boundary value lo itself
	}
	const invPhi = 0.6180339887498949
	c1, c2 := b-invPhi*(b-a), a+invPhi*(b-a)
	f1, a1 := f(c1)
	f2, a2 := f(c2)
	for range iters {
		if f1 >= f2 {
			b, c2, f2, a2 = c2, c1, f1, a1
			c1 = b - invPhi*(b-a)
			f1, a1 = f(c1)
		} else {
			a, c1, f1, a1 = c1, c2, f2, a2
			c2 = a + invPhi*(b-a)
			f2, a2 = f(c2)
		}
	}
	if f1 > best {
		x, best, aux = c1, f1, a1
	}
	if f2 > best {
		x, best, aux = c2, f2, a2
	}
	return x, best, aux
}

type privUnitKey struct {
	d   int
	eps float64
}

var privUnitCache = struct {
	sync.Mutex
	m map[privUnitKey]PrivUnitParams
}{m: make(map[privUnitKey]PrivUnitParams)}

// privUnitCacheSize bounds the parameter cache; beyond it parameters are
// recomputed (the choice is deterministic, so caching changes nothing else).
const privUnitCacheSize = 1024

// choosePrivUnitParams returns the nominal parameters (without RMax) that
// minimise the worst-case MSE bound described on [PrivUnit].
func choosePrivUnitParams(d int, eps float64) PrivUnitParams {
	key := privUnitKey{d, eps}
	privUnitCache.Lock()
	p, ok := privUnitCache.m[key]
	privUnitCache.Unlock()
	if ok {
		return p
	}
	// Minimise ln(1 + V_max) − 2 ln m, in units of r_max².
	obj := func(frac float64) (float64, float64) {
		_, v := scalarDPBestK(frac * eps)
		lm, _, _ := privUnitBestDirection(eps-frac*eps, d)
		return -(math.Log1p(v) - 2*lm), 0
	}
	frac, _, _ := maximise1D(obj, 0, 0.75, 24, 12)
	frac = math.Max(frac, 1.0/32)
	epsMag := frac * eps
	epsDir := eps - epsMag
	k, _ := scalarDPBestK(epsMag)
	_, eps1, gamma := privUnitBestDirection(epsDir, d)
	p = PrivUnitParams{
		EpsDirection: epsDir,
		EpsMagnitude: epsMag,
		Eps0:         epsDir - eps1,
		Eps1:         eps1,
		Gamma:        gamma,
		K:            k,
	}
	privUnitCache.Lock()
	if len(privUnitCache.m) < privUnitCacheSize {
		privUnitCache.m[key] = p
	}
	privUnitCache.Unlock()
	return p
}

var _ VectorRandomiser = (*PrivUnit)(nil)
