package mechanisms

// VectorLaplace is the local Laplace mechanism (thesis Def 2.3.7) as a
// [VectorRandomiser], sampled by the secure discretised [Laplace]. Its
// calibration depends on the output set:
//
// L1Ball of radius l (the VLM/CLM mechanism, thesis §6.1, Learning to Noise
// §10.1). Two clipped inputs are at ℓ1 distance ≤ 2l, so the output is
//
//	y = ν₁(x) + (s₁, …, s_d),   sᵢ i.i.d. Laplace(0, 2l/ε),
//
// with the same scale 2l/ε on every coordinate: ε is NOT divided by d again.
// One [Laplace] with sensitivity 2l and dimension d does this; the
// mechanism's EffectiveEpsilon is that Laplace's.
//
// Box [lo, hi] (the raw-feature baseline, thesis §7.1). As in the paper,
// each feature is privatised independently with εᵢ = ε/d and sensitivity
// Δᵢ = hiᵢ − loᵢ: d scalar secure Laplace mechanisms with scale
// Δᵢ·d/ε. Coordinate i is εᵢ-LDP (its input moves by at most Δᵢ), and the d
// independent releases compose to Σᵢ εᵢ = ε. This is the paper's choice, not
// the only one: a single Laplace with ℓ1 sensitivity Σᵢ Δᵢ and ε would give
// every coordinate the scale ΣΔ/ε instead, the same when all widths are
// equal and otherwise spreading the budget by width rather than evenly.
// EffectiveEpsilon is the (rounded-up) sum of the d parts' effective ε; to
// keep it ≤ ε despite rounding, each part is given ε/d·(1 − (d+8)·2⁻⁵¹).
// Features of equal width share one mechanism.
//
// Randomise clips x into the set first (ClipL1 or ClipBox), so the
// guarantee holds for every finite input.
type VectorLaplace struct {
	eps, effEps float64
	set         OutputSet
	whole       *Laplace   // L1Ball: one mechanism for the whole vector
	perCoord    []*Laplace // Box: one scalar mechanism per coordinate
}

// NewVectorLaplace returns the Laplace randomiser for set (an [L1Ball] or a
// [Box]) at privacy level eps, as described on [VectorLaplace]. It returns
// an error for an invalid set or eps, and whatever [NewLaplace] rejects (for
// a Box, ε/d must be at least MinEpsilon, and the scales Δᵢd/ε must be
// representable).
func NewVectorLaplace(set OutputSet, eps float64) (*VectorLaplace, error) {
	const who = "NewVectorLaplace"
	s, err := copyOutputSet(who, set)
	if err != nil {
		return nil, err
	}
	if err := checkEpsilon(who, eps); err != nil {
		return nil, err
	}
	v := &VectorLaplace{eps: eps, set: s}
	switch s := s.(type) {
	case L1Ball:
		if v.whole, err = NewLaplace(2*s.Radius, eps, s.D); err != nil {
			return nil, err
		}
		v.effEps = v.whole.EffectiveEpsilon()
	case Box:
		d := len(s.Lo)
		part := eps / float64(d) * (1 - float64(d+8)*0x1p-51)
		if err := checkEpsilon(who+" (per-feature epsilon/d)", part); err != nil {
			return nil, err
		}
		byWidth := make(map[float64]*Laplace)
		v.perCoord = make([]*Laplace, d)
		effs := make([]float64, d)
		for i := range d {
			w := s.Hi[i] - s.Lo[i]
			l, ok := byWidth[w]
			if !ok {
				if l, err = NewLaplace(w, part, 1); err != nil {
					return nil, err
				}
				byWidth[w] = l
			}
			v.perCoord[i] = l
			effs[i] = l.EffectiveEpsilon()
		}
		v.effEps = sumUp(effs...)
		if !(v.effEps <= eps) { // not reached: the margin covers the rounding
			return nil, invalid("%s: composed effective epsilon %v exceeds epsilon %v", who, v.effEps, eps)
		}
	}
	return v, nil
}

// Name returns "laplace".
func (v *VectorLaplace) Name() string { return RandomiserLaplace }

// Epsilon returns the requested ε.
func (v *VectorLaplace) Epsilon() float64 { return v.eps }

// EffectiveEpsilon returns the guaranteed ε: the underlying Laplace's for an
// L1Ball, the sum over coordinates for a Box (see [VectorLaplace]).
func (v *VectorLaplace) EffectiveEpsilon() float64 { return v.effEps }

// Set returns a copy of the output set.
func (v *VectorLaplace) Set() OutputSet { return cloneOutputSet(v.set) }

// Scales returns the nominal Laplace scale of the noise on each coordinate:
// 2l/ε for every coordinate of an L1Ball, (hiᵢ − loᵢ)·d/ε for a Box (up to
// the relative 2⁻⁵¹·(d+8) margin).
func (v *VectorLaplace) Scales() []float64 {
	out := make([]float64, v.set.Dim())
	for i := range out {
		if v.whole != nil {
			out[i] = v.whole.Scale()
		} else {
			out[i] = v.perCoord[i].Scale()
		}
	}
	return out
}

// Randomise clips x into the set and adds Laplace noise (see
// [VectorLaplace]).
func (v *VectorLaplace) Randomise(x []float64, src Source) ([]float64, error) {
	c, err := v.set.Clip(x)
	if err != nil {
		return nil, err
	}
	if v.whole != nil {
		return v.whole.AddNoise(c, src)
	}
	br := bitReader{src: src}
	for i, l := range v.perCoord {
		c[i] = l.noisy(c[i], &br)
	}
	return c, nil
}

var _ VectorRandomiser = (*VectorLaplace)(nil)
