package mechanisms

import (
	"strconv"
	"strings"
)

// CoordinateRR is per-coordinate randomised response on a [Box] (Barber,
// "Private machine learning via randomised response", §6; the project
// digest's §I.3.2 and §I.3.5), quantised to B bins so that its ε stays
// within [MaxEpsilon]. For a box [lo₁, hi₁] × … × [lo_D, hi_D]:
//
//  1. each clipped coordinate xᵢ is quantised to its bin
//     jᵢ = ⌊B(xᵢ − loᵢ)/(hiᵢ − loᵢ)⌋ (the last bin closed), of B equal bins;
//
//  2. jᵢ is released by B-ary randomised response at ε/D: kept with
//     probability 1 − F, otherwise replaced by one of the other B − 1 bins
//     uniformly (F/(B − 1) each), independently per coordinate, with
//
//     F = (B − 1)/(e^{ε/D} + B − 1),   (1 − F)(B − 1)/F = e^{ε/D};
//
//  3. the release is the bin centre loᵢ + (k + ½)(hiᵢ − loᵢ)/B of each
//     reported bin k.
//
// Privacy. Each coordinate's report is (ε/D)-LDP: for every reported bin
// the probability under any two inputs differs by at most the factor
// (1 − F)/(F/(B − 1)) = e^{ε/D}. The coordinates use independent noise, so
// by basic composition the row's release is ε-LDP (the likelihood ratio of
// the whole vector is the product of D ratios). Clipping and quantising are
// deterministic maps of the input and the centres a deterministic map of the
// reports, so neither costs privacy. The sampler is the exact rr of
// randomiser.go (an exact Bernoulli(F) for the float64 F, an exact [IntN] for
// the replacement, F rounded so that the realised per-coordinate loss is at
// most ε/D); EffectiveEpsilon is D times that realised loss, rounded up.
//
// Not unbiased. Unlike the other [VectorRandomiser]s the release is not an
// unbiased estimate of x: E[x̃ᵢ] = cᵢ + (1 − F·B/(B − 1))(centre(jᵢ) − cᵢ)
// with cᵢ the box's midpoint. It is the categorical release that
// training/spread's "rr" channel models (TRAIN_NOISY_CLASSIFIER 'em').
//
// Cost. With D coordinates the per-coordinate ε is small: at ε = 64 over
// D = 784 pixels it is 0.082, so two bins (B = 2) keep a pixel's bin with
// probability 0.52. The paper's K = 256 states with flip rates 0.1–0.4 cost
// ε ≈ 6–7.7 per pixel, 4,663–6,069 per image, far above MaxEpsilon: fewer
// states and a smaller per-coordinate ε are what fit (the digest's
// recommendation).
//
// Output sets. Only a Box has per-coordinate ranges: an [L1Ball] is
// rejected (a latent of a ν₁ encoder has no range of its own per
// coordinate; its coordinates share a budget of ℓ1 mass).
type CoordinateRR struct {
	eps    float64
	set    Box
	bins   int
	frame  affineFrame
	coord  rr      // others = bins − 1, at ε/D
	effEps float64 // D · coord.effEps, rounded up
}

// Per-coordinate randomised response: its names are RandomiserRRPrefix
// followed by the number of bins B, MinRRBins ≤ B ≤ MaxRRBins ("rr2",
// "rr16").
const (
	RandomiserRRPrefix = "rr"
	MinRRBins          = 2
	MaxRRBins          = 1 << 16
)

// RRName returns the randomiser name of per-coordinate randomised response
// on bins bins, e.g. "rr16".
func RRName(bins int) string { return RandomiserRRPrefix + strconv.Itoa(bins) }

// ParseRRName returns the number of bins of a per-coordinate randomised
// response name ("rr16" → 16). ok is false for any other name, including
// "rr", a sign, leading zeros or a B outside [MinRRBins, MaxRRBins].
func ParseRRName(name string) (bins int, ok bool) {
	digits, found := strings.CutPrefix(name, RandomiserRRPrefix)
	if !found || digits == "" || digits[0] < '1' || digits[0] > '9' || len(digits) > 6 {
		return 0, false
	}
	b, err := strconv.Atoi(digits)
	if err != nil || b < MinRRBins || b > MaxRRBins || strconv.Itoa(b) != digits {
		return 0, false
	}
	return b, true
}

// NewCoordinateRR returns per-coordinate randomised response on bins bins
// of each coordinate of box, at total privacy level eps (ε/D per
// coordinate; see [CoordinateRR]). It returns an error wrapping
// ErrInvalidArgument for a set that is not a valid Box (an [L1Ball] is
// named as such), bins outside [MinRRBins, MaxRRBins], eps outside
// [MinEpsilon, MaxEpsilon], or an ε/D too small for randomised response over
// B outcomes in float64.
func NewCoordinateRR(set OutputSet, eps float64, bins int) (*CoordinateRR, error) {
	who := "NewCoordinateRR"
	if bins < MinRRBins || bins > MaxRRBins {
		return nil, invalid("%s: bins B = %d must be in [%d, %d]", who, bins, MinRRBins, MaxRRBins)
	}
	who = RRName(bins)
	s, err := copyOutputSet(who, set)
	if err != nil {
		return nil, err
	}
	box, ok := s.(Box)
	if !ok {
		return nil, invalid("%s: randomised response per coordinate needs a Box output set (a range per coordinate); "+
			"%T is an l1-ball, whose coordinates have no range of their own: use %s, %s or %s", who, s, RandomiserLaplace, RandomiserDuchi, RandomiserPrivUnit)
	}
	if err := checkEpsilon(who, eps); err != nil {
		return nil, err
	}
	d := box.Dim()
	perCoord := eps / float64(d)
	if !(perCoord >= MinEpsilon) {
		return nil, invalid("%s: the per-coordinate epsilon/D = %v/%d is below MinEpsilon = 2^-50", who, eps, d)
	}
	coord, err := newRR(who, perCoord, bins-1)
	if err != nil {
		return nil, err
	}
	// D·effEps with its one rounding enlarged: an upper bound on the sum of
	// the D per-coordinate losses.
	eff := float64(d) * coord.effEps * (1 + 0x1p-52)
	if eff > eps {
		// rr's margin of 2⁻⁴⁰ relative makes this unreachable; refuse rather
		// than claim more privacy than realised.
		return nil, invalid("%s: the realised loss %v of %d coordinates exceeds epsilon = %v", who, eff, d, eps)
	}
	return &CoordinateRR{eps: eps, set: box, bins: bins, frame: newBoxFrame(box), coord: coord, effEps: eff}, nil
}

// Name returns "rrB", B the number of bins.
func (m *CoordinateRR) Name() string { return RRName(m.bins) }

// Epsilon returns the requested total ε of a row.
func (m *CoordinateRR) Epsilon() float64 { return m.eps }

// EffectiveEpsilon returns D times the realised per-coordinate loss
// ln((1 − F)(B − 1)/F), rounded up; ≤ ε.
func (m *CoordinateRR) EffectiveEpsilon() float64 { return m.effEps }

// Set returns a copy of the box.
func (m *CoordinateRR) Set() OutputSet { return cloneOutputSet(m.set) }

// Bins returns B.
func (m *CoordinateRR) Bins() int { return m.bins }

// FlipProbability returns F, the realised probability that a coordinate's
// reported bin differs from its true one (each other bin F/(B − 1)).
func (m *CoordinateRR) FlipProbability() float64 { return m.coord.flip }

// Randomise clips x into the box and returns each coordinate's reported bin
// centre (see [CoordinateRR]).
func (m *CoordinateRR) Randomise(x []float64, src Source) ([]float64, error) {
	c, err := m.set.Clip(x)
	if err != nil {
		return nil, err
	}
	z := m.frame.toWork(c, 1)
	br := bitReader{src: src}
	b := float64(m.bins)
	for i, zi := range z {
		j := min(max(int((zi+1)/2*b), 0), m.bins-1)
		k := m.coord.respond(j, &br)
		z[i] = (2*float64(k)+1)/b - 1
	}
	m.frame.fromWork(z)
	return z, nil
}

var _ VectorRandomiser = (*CoordinateRR)(nil)
