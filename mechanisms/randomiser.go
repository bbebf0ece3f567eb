package mechanisms

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// VectorRandomiser is a local randomiser for vectors in an [OutputSet]: the
// host clips an encoder's output into the set and releases Randomise's
// result, which is ε-LDP with ε = EffectiveEpsilon() ≤ Epsilon() whatever
// the input (clipping is part of the mechanism).
//
// Implementations are immutable and safe for concurrent use; concurrency
// safety of the noise then rests on the Source passed to Randomise.
type VectorRandomiser interface {
	// Name returns the mechanism's name: "laplace", "duchi", "privunit" or
	// "rrB" (per-coordinate randomised response on B bins).
	Name() string
	// Epsilon returns the privacy parameter ε requested at construction.
	Epsilon() float64
	// EffectiveEpsilon returns the privacy loss the sampler as implemented
	// guarantees (the supremum of the log-likelihood ratio over pairs of
	// inputs and output events); it is never larger than Epsilon().
	EffectiveEpsilon() float64
	// Set returns (a copy of) the output set inputs are clipped into.
	Set() OutputSet
	// Randomise clips x into Set() and returns the noisy release, in the
	// coordinates of the set: an unbiased estimate of the clipped x for
	// Laplace, Duchi and PrivUnit (up to floating-point rounding); the
	// reported bin centres for [CoordinateRR], which are not.
	// x is not modified. It returns an error wrapping ErrInvalidArgument
	// if len(x) ≠ Set().Dim() or x has a NaN or ±Inf element, and never
	// fails for a finite x of the right length, however far outside the
	// set it lies.
	Randomise(x []float64, src Source) ([]float64, error)
}

// Names of the vector randomisers, as accepted by NewRandomiser.
const (
	RandomiserLaplace  = "laplace"
	RandomiserDuchi    = "duchi"
	RandomiserPrivUnit = "privunit"
)

// RandomiserNames returns the names of the randomisers without parameters,
// which release any output set. NewRandomiser also accepts "rrB"
// ([CoordinateRR], B bins), for a [Box] only; [CheckRandomiserName] checks
// either kind.
func RandomiserNames() []string {
	return []string{RandomiserLaplace, RandomiserDuchi, RandomiserPrivUnit}
}

// RandomiserNamesText lists the names NewRandomiser accepts, for messages.
func RandomiserNamesText() string {
	return fmt.Sprintf("%s, or rrB (randomised response per coordinate of a box on B bins, %d ≤ B ≤ %d, e.g. rr2, rr16)",
		strings.Join(RandomiserNames(), ", "), MinRRBins, MaxRRBins)
}

// CheckRandomiserName returns an error wrapping ErrInvalidArgument, listing
// the valid names, unless NewRandomiser knows name.
func CheckRandomiserName(name string) error {
	if slices.Contains(RandomiserNames(), name) {
		return nil
	}
	if _, ok := ParseRRName(name); ok {
		return nil
	}
	if digits, ok := strings.CutPrefix(name, RandomiserRRPrefix); ok && digits != "" {
		return invalid("unknown randomiser %q: randomised response takes rrB with B a whole number of bins, %d ≤ B ≤ %d (e.g. rr2, rr16)", name, MinRRBins, MaxRRBins)
	}
	return invalid("unknown randomiser %q; valid names are %s", name, RandomiserNamesText())
}

// NewRandomiser returns the vector randomiser called name for inputs clipped
// into set, at privacy level eps:
//
//   - "laplace": the Laplace mechanism ([NewVectorLaplace]);
//   - "duchi": the multidimensional mechanism of Duchi et al. 2018
//     ([NewDuchi]);
//   - "privunit": PrivUnit₂ for the direction and ScalarDP for the
//     magnitude, Bhowmick et al. 2019 ([NewPrivUnit]).
//
// set must be an [L1Ball] or a [Box] (or a pointer to one); the randomiser
// keeps its own copy. It returns an error wrapping ErrInvalidArgument for an
// unknown name (listing the valid ones), an invalid set, or eps outside
// [MinEpsilon, MaxEpsilon], and whatever the named constructor rejects.
func NewRandomiser(name string, set OutputSet, eps float64) (VectorRandomiser, error) {
	switch name {
	case RandomiserLaplace:
		return NewVectorLaplace(set, eps)
	case RandomiserDuchi:
		return NewDuchi(set, eps)
	case RandomiserPrivUnit:
		return NewPrivUnit(set, eps)
	}
	if bins, ok := ParseRRName(name); ok {
		return NewCoordinateRR(set, eps, bins)
	}
	return nil, fmt.Errorf("NewRandomiser: %w", CheckRandomiserName(name))
}

// rrMargin is the relative margin by which an rr sampler's flip probability
// is computed for a slightly smaller ε than requested, so that its exact
// realised privacy loss is at most ε despite rounding.
const rrMargin = 0x1p-40

// rr is randomised response over 1 + others outcomes, the exact sampler
// behind Duchi's and PrivUnit's cap choice (others = 1) and ScalarDP
// (others = k): keep the true outcome with probability 1 − F, otherwise
// report one of the others uniformly (probability F/others each).
//
// Its privacy loss is exactly ln((1 − F)·others/F) for the float64 F, since
// the flip is an exact Bernoulli(F) and the replacement an exact [IntN].
// F is first computed for ε(1 − 2⁻⁴⁰) and then, if need be, nudged up one
// ulp at a time until the loss, evaluated with a relative error below
// 2⁻⁵⁰ as ln(1 + fma(−F, others+1, others)/F) (no cancellation even for
// tiny ε), is ≤ ε with that error accounted for. Unlike [KRR], whose
// relative margin on F would swamp a tiny ε, this keeps the realised
// contrast 1 − F(others+1)/others positive for every ε ≥ MinEpsilon when
// others = 1.
type rr struct {
	others   int
	flip     float64 // F, the total flip probability
	contrast float64 // keep − flip-per-other = 1 − F(others+1)/others > 0
	effEps   float64 // an upper bound on ln((1 − F)·others/F), ≤ ε
}

func newRR(who string, eps float64, others int) (rr, error) {
	k := float64(others)
	target := eps * (1 - rrMargin)
	var f float64
	if target < 1 {
		f = k / (k + 1 + math.Expm1(target))
	} else {
		e := math.Exp(-target)
		f = k * e / (1 + k*e)
	}
	loss := func(f float64) float64 {
		num := math.FMA(-f, k+1, k) // others − F(others+1), one rounding
		if !(num > 0) {
			return math.NaN()
		}
		return math.Log1p(num/f) * (1 + 0x1p-50)
	}
	for i := 0; ; i++ {
		l := loss(f)
		if math.IsNaN(l) || i == 4096 {
			return rr{}, invalid("%s: epsilon = %v is too small to realise randomised response over %d outcomes in float64", who, eps, others+1)
		}
		if l <= eps {
			return rr{others: others, flip: f, contrast: math.FMA(-f, k+1, k) / k, effEps: l}, nil
		}
		f = math.Nextafter(f, 1)
	}
}

// keep reports whether the true outcome is kept (probability 1 − F).
func (r rr) keep(br *bitReader) bool {
	return !br.bernoulli(newThreshold(r.flip))
}

// respond returns the randomised response for outcome j ∈ {0, …, others}.
func (r rr) respond(j int, br *bitReader) int {
	if r.keep(br) {
		return j
	}
	o := IntN(br.src, r.others)
	if o >= j {
		o++
	}
	return o
}

// bernoulliBits returns true with probability exactly p (clamped to [0, 1]),
// reading as few bits of br as it needs.
func bernoulliBits(br *bitReader, p float64) bool {
	switch {
	case !(p > 0):
		return false
	case p >= 1:
		return true
	}
	return br.bernoulli(newThreshold(p))
}

// sumUp returns an upper bound on the exact sum of non-negative xs: the
// float64 sum enlarged by the bound on its rounding error (Higham §4.2).
func sumUp(xs ...float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s * (1 + float64(len(xs)+2)*0x1p-52)
}
