package audit

import (
	"cmp"
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

// releasedPairs is how many of the farthest-apart candidate pairs Released
// tries.
const releasedPairs = 3

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
	return hostPlan(fmt.Sprintf("encoder → clip → %s on %s", r.Name(), describeSet(set)), HostRelease(enc, set, r), r, inputs, anchors, nil, 1)
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
// counts as refused. As the estimates are noisy, the three pairs whose
// estimates lie farthest apart are all tried (the selection half chooses). The pilot releases are not used by the audit itself.
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
	ses := make([][]float64, len(inputs))
	var lastErr error
	for i, x := range inputs {
		sum := make([]float64, set.Dim())
		sq := make([]float64, set.Dim())
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
				sq[j] += v * v
			}
			n++
		}
		if n == 0 {
			continue
		}
		ses[i] = sq
		for j := range sum {
			sum[j] /= float64(n)
			// The standard error of the mean (0 for a single release).
			sq[j] = math.Sqrt(math.Max(sq[j]/float64(n)-sum[j]*sum[j], 0) / float64(max(n-1, 1)))
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
	return hostPlan(name, release, r, inputs, anchors, ses, releasedPairs)
}

// hostPlan builds the plan of [Encoded] and [Released] from the candidates
// and their clipped encodings (nil: refused), trying the top pairs whose
// encodings are farthest apart. If the encodings are estimates, ses holds
// their standard errors: coordinates in which two estimates differ by less
// than 2 standard errors are taken to be equal (so the projection ignores
// them rather than betting on noise), unless that leaves no pair apart.
func hostPlan(name string, release func([]float64, mechanisms.Source) ([]float64, error), r mechanisms.VectorRandomiser, inputs, anchors, ses [][]float64, top int) (Mechanism, error) {
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
	// The candidate pairs farthest apart (top of them), each with the
	// partitions between its two clipped encodings.
	type cand struct {
		i, j int
		d    float64
	}
	var cands []cand
	clean := ses != nil
	same := func(i, j, k int) bool {
		return clean && math.Abs(anchors[i][k]-anchors[j][k]) < 2*math.Hypot(ses[i][k], ses[j][k])
	}
	// other returns j's anchor with the coordinates that do not differ
	// significantly from i's set to i's.
	other := func(i, j int) []float64 {
		b := slices.Clone(anchors[j])
		for k := range b {
			if same(i, j, k) {
				b[k] = anchors[i][k]
			}
		}
		return b
	}
	for range 2 {
		for a, i := range released {
			for _, j := range released[a+1:] {
				if d := distance(set, anchors[i], other(i, j)); d > 0 {
					cands = append(cands, cand{i, j, d})
				}
			}
		}
		if len(cands) > 0 || !clean {
			break
		}
		clean = false // no estimate differs significantly: take them as they are
	}
	slices.SortStableFunc(cands, func(a, b cand) int { return cmp.Compare(b.d, a.d) })
	var pairs []Pair
	for _, c := range cands[:min(top, len(cands))] {
		parts, err := partitionsFor(r, anchors[c.i], other(c.i, c.j))
		if err != nil {
			return Mechanism{}, err
		}
		pairs = append(pairs, Pair{Name: fmt.Sprintf("candidates %d vs %d (clipped encodings %.3g set-widths apart)", c.i, c.j, c.d), X: inputs[c.i], Y: inputs[c.j], Partitions: parts})
	}
	// Partitions for the pairs below: the first pair's, or between the
	// set's own extreme points.
	var parts []Partition
	if len(pairs) > 0 {
		parts = pairs[0].Partitions
	} else {
		v, err := Vector(r)
		if err != nil {
			return Mechanism{}, err
		}
		if parts, err = partitionsFor(r, v.Pairs[0].X, v.Pairs[0].Y); err != nil {
			return Mechanism{}, err
		}
	}
	if len(refused) > 0 && len(released) > 0 {
		i, j := refused[0], released[0]
		pairs = append(pairs, Pair{Name: fmt.Sprintf("candidates %d (refused) vs %d (released)", i, j), X: inputs[i], Y: inputs[j], Partitions: parts})
	}
	if len(pairs) == 0 { // every candidate refused, or all encode to one point
		pairs = append(pairs, Pair{Name: "candidates 0 vs 1", X: inputs[0], Y: inputs[1], Partitions: parts})
	}
	return Mechanism{
		Name:      name,
		Claimed:   r.Epsilon(),
		Effective: r.EffectiveEpsilon(),
		Release:   release,
		Pairs:     pairs,
	}, nil
}
