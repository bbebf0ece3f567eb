package audit

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/ldpsql/ldpsql/mechanisms"
)

// Encoder is an untrusted encoder: the deterministic map from a row's
// features to a vector that a mechanism's plugin computes. It may return
// anything, including vectors far outside its declared set, NaN, ±Inf, a
// wrong length or an error.
type Encoder func(x []float64) ([]float64, error)

// HostRelease returns the release LDP_ENCODE makes of a row x through an
// untrusted encoder (udf's resolvedMechanism.privatise, reproduced here on
// float64): encode; refuse an encoder error, a wrong length or a NaN/±Inf
// element (the host fails the statement); clip into the declared set
// (set.Clip); randomise with r, which clips into r.Set() again. Refusals
// wrap ErrRefused, so an audit sees them as an outcome.
func HostRelease(enc Encoder, set mechanisms.OutputSet, r mechanisms.VectorRandomiser) func(x []float64, src mechanisms.Source) ([]float64, error) {
	return func(x []float64, src mechanisms.Source) ([]float64, error) {
		c, err := hostClip(enc, set, x)
		if err != nil {
			return nil, err
		}
		return r.Randomise(c, src)
	}
}

// hostClip encodes x and clips the encoding into set, as the host does.
func hostClip(enc Encoder, set mechanisms.OutputSet, x []float64) ([]float64, error) {
	h, err := enc(x)
	if err != nil {
		return nil, fmt.Errorf("%w: encoder failed: %v", ErrRefused, err)
	}
	if len(h) != set.Dim() {
		return nil, fmt.Errorf("%w: encoding of %d values, declared dimension %d", ErrRefused, len(h), set.Dim())
	}
	for i, v := range h {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: non-finite value %v at index %d of the encoding", ErrRefused, v, i)
		}
	}
	c, err := set.Clip(h)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRefused, err)
	}
	return c, nil
}

// anchorTries is how many times Encoded encodes a candidate before taking
// it to be refused.
const anchorTries = 8

// Encoded returns the audit plan for the host path "encode with enc, clip
// into set, randomise with r" ([HostRelease]). r must be built for set (the
// declared output set the host records at registration).
//
// The pairs are chosen among the candidate inputs (at least two): each is
// encoded and clipped (retried up to 8 times if refused), and the audit
// tries the two candidates whose clipped encodings are farthest apart (ℓ1
// distance in units of the set's extent; for a linear encoder, inputs ±c·v
// with large c reach opposite points of the set), with the partitions
// [Vector] would use between those two points; and, if some candidates are
// refused (a NaN encoding, say) and others are not, a refused candidate
// against a released one: a refusal that depends on the input is an
// observable outcome and fails the audit.
func Encoded(enc Encoder, set mechanisms.OutputSet, r mechanisms.VectorRandomiser, inputs [][]float64) (Mechanism, error) {
	if set == nil || set.Dim() != r.Set().Dim() {
		return Mechanism{}, fmt.Errorf("audit: the declared set and the randomiser's set differ in dimension")
	}
	anchors := make([][]float64, len(inputs))
	for i, x := range inputs {
		// An encoder may refuse at random: a candidate counts as refused
		// only if every one of a few tries is.
		for range anchorTries {
			if c, err := hostClip(enc, set, x); err == nil {
				anchors[i] = c
				break
			}
		}
	}
	return hostPlan(fmt.Sprintf("encoder → clip → %s on %s", r.Name(), describeSet(set)), HostRelease(enc, set, r), r, inputs, anchors)
}

// Released returns the audit plan for a host path whose encodings cannot be
// seen, only its releases: release(x, src) makes one release of the
// candidate input x (it may ignore src, e.g. an SQL query that calls
// LDP_ENCODE, which draws its own noise), ending with a randomiser built
// like r (whose ε, effective ε, set and name the plan uses). An error
// wrapping ErrRefused is a refusal.
//
// It proceeds as [Encoded], with each candidate's clipped encoding
// estimated as the mean of pilot releases (the randomisers are unbiased),
// clipped into r's set; a candidate all of whose pilot releases are refused
// counts as refused. The pilot releases are not used by the audit itself.
// It returns an error if every candidate is refused.
func Released(name string, release func(x []float64, src mechanisms.Source) ([]float64, error), r mechanisms.VectorRandomiser, inputs [][]float64, pilot int, src mechanisms.Source) (Mechanism, error) {
	if pilot < 1 {
		return Mechanism{}, fmt.Errorf("audit: Released needs at least one pilot release per candidate")
	}
	if src == nil {
		src = mechanisms.CryptoSource()
	}
	set := r.Set()
	anchors := make([][]float64, len(inputs))
	var lastErr error
	for i, x := range inputs {
		sum := make([]float64, set.Dim())
		n := 0
		for range pilot {
			y, err := release(x, src)
			if errors.Is(err, ErrRefused) {
				lastErr = err
				continue
			}
			if err != nil {
				return Mechanism{}, fmt.Errorf("audit: %s: %w", name, err)
			}
			if len(y) != len(sum) {
				return Mechanism{}, fmt.Errorf("audit: %s: a release of %d values, the set has dimension %d", name, len(y), len(sum))
			}
			for j, v := range y {
				sum[j] += v
			}
			n++
		}
		if n == 0 {
			continue
		}
		for j := range sum {
			sum[j] /= float64(n)
		}
		c, err := set.Clip(sum)
		if err != nil {
			return Mechanism{}, fmt.Errorf("audit: %s: the mean release of candidate %d: %w", name, i, err)
		}
		anchors[i] = c
	}
	if !slices.ContainsFunc(anchors, func(a []float64) bool { return a != nil }) {
		return Mechanism{}, fmt.Errorf("audit: %s: every candidate input was refused, e.g. %w", name, lastErr)
	}
	return hostPlan(name, release, r, inputs, anchors)
}

// hostPlan builds the plan of [Encoded] and [Released] from the candidates
// and their clipped encodings (nil: refused).
func hostPlan(name string, release func([]float64, mechanisms.Source) ([]float64, error), r mechanisms.VectorRandomiser, inputs, anchors [][]float64) (Mechanism, error) {
	if len(inputs) < 2 {
		return Mechanism{}, fmt.Errorf("audit: the host path needs at least two candidate inputs")
	}
	set := r.Set()
	var released, refused []int
	for i, a := range anchors {
		if a == nil {
			refused = append(refused, i)
		} else {
			released = append(released, i)
		}
	}
	// Anchors for the partitions: the farthest-apart clipped encodings, or
	// the set's own extreme points if fewer than two differ.
	bi, bj, bd := -1, -1, 0.0
	for a, i := range released {
		for _, j := range released[a+1:] {
			if d := distance(set, anchors[i], anchors[j]); d > bd {
				bi, bj, bd = i, j, d
			}
		}
	}
	var ax, ay []float64
	if bi >= 0 {
		ax, ay = anchors[bi], anchors[bj]
	} else {
		v, err := Vector(r)
		if err != nil {
			return Mechanism{}, err
		}
		ax, ay = v.Pairs[0].X, v.Pairs[0].Y
	}
	parts, err := partitionsFor(r, ax, ay)
	if err != nil {
		return Mechanism{}, err
	}
	var pairs []Pair
	if bi >= 0 {
		pairs = append(pairs, Pair{Name: fmt.Sprintf("inputs %d vs %d (clipped encodings %.3g set-widths apart)", bi, bj, bd), X: inputs[bi], Y: inputs[bj], Partitions: parts})
	}
	if len(refused) > 0 && len(released) > 0 {
		i, j := refused[0], released[0]
		pairs = append(pairs, Pair{Name: fmt.Sprintf("inputs %d (refused) vs %d (released)", i, j), X: inputs[i], Y: inputs[j], Partitions: parts})
	}
	if len(pairs) == 0 { // every candidate refused, or all encode to one point
		pairs = append(pairs, Pair{Name: "inputs 0 vs 1", X: inputs[0], Y: inputs[1], Partitions: parts})
	}
	return Mechanism{
		Name:      name,
		Claimed:   r.Epsilon(),
		Effective: r.EffectiveEpsilon(),
		Release:   release,
		Pairs:     pairs,
	}, nil
}
