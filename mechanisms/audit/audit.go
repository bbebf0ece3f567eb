package audit

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/ldpsql/ldpsql/mechanisms"
)

// Defaults of [Config].
const (
	DefaultSamples    = 1_000_000
	DefaultConfidence = 0.999999
)

// maxCells bounds the number of distinct cells a partition may show in the
// selection half; a partition with more is skipped (its events would be
// chosen by noise, and the prefix search would be slow).
const maxCells = 1 << 14

// ErrRefused marks a release that the mechanism under audit refused to make
// (the host's answer to a non-finite encoding, say). A refusal is an
// outcome the caller observes, like a release: every partition puts it in
// the cell [RefusedCell], so a refusal that depends on the input is caught
// as a privacy loss. Any other error from Release aborts the audit.
var ErrRefused = errors.New("audit: release refused")

// RefusedCell is the cell of a refused release in every partition.
const RefusedCell = math.MaxUint64

// Partition divides a mechanism's outputs into cells; the audit's events are
// unions of cells. Cell must be a deterministic function of the output
// (never returning RefusedCell).
type Partition struct {
	Name string
	Cell func(y []float64) uint64
}

// Pair is a pair of neighbouring inputs of the mechanism under audit, with
// the partitions in which to look for an event separating them.
type Pair struct {
	Name       string
	X, Y       []float64
	Partitions []Partition
}

// Mechanism is a randomiser under audit: its claimed and effective ε, the
// release it makes of an input, and the neighbouring inputs to try.
type Mechanism struct {
	Name string
	// Claimed is the ε requested (Epsilon()); Effective is the guarantee
	// the sampler claims to realise (EffectiveEpsilon(), ≤ Claimed), the
	// value the audit tests.
	Claimed, Effective float64
	// Release returns one randomised release of x; it must be safe to
	// call with the same src repeatedly (not concurrently). An error
	// wrapping ErrRefused is an observable refusal, any other aborts.
	Release func(x []float64, src mechanisms.Source) ([]float64, error)
	Pairs   []Pair
}

// Config sets the audit's sample budget, confidence and randomness.
type Config struct {
	// Samples is the number of releases drawn at each input of a pair:
	// ⌊Samples/2⌋ to choose the event, the rest to test it. Default
	// DefaultSamples; at least 2.
	Samples int
	// Confidence is 1 − α: a mechanism whose privacy loss is at most its
	// effective ε fails the audit with probability at most α. Default
	// DefaultConfidence; it must lie in (0, 1).
	Confidence float64
	// Source supplies the mechanism's randomness. Default
	// mechanisms.CryptoSource(); tests pass mechanisms.NewSeededSource to
	// be reproducible.
	Source mechanisms.Source
}

func (c Config) withDefaults() (Config, error) {
	if c.Samples == 0 {
		c.Samples = DefaultSamples
	}
	if c.Confidence == 0 {
		c.Confidence = DefaultConfidence
	}
	if c.Source == nil {
		c.Source = mechanisms.CryptoSource()
	}
	if c.Samples < 2 {
		return c, fmt.Errorf("audit: Samples = %d must be at least 2", c.Samples)
	}
	if !(c.Confidence > 0 && c.Confidence < 1) {
		return c, fmt.Errorf("audit: Confidence = %v must lie in (0, 1)", c.Confidence)
	}
	return c, nil
}

// Result is the outcome of an audit.
type Result struct {
	Mechanism string
	// Claimed and Effective are copied from the Mechanism.
	Claimed, Effective float64
	// Point is ln(k₁/k₂) for the held-out counts of the chosen event at
	// the two inputs (+Inf if k₂ = 0 < k₁, NaN if both are 0).
	Point float64
	// Lower is the lower confidence bound on the privacy loss:
	// ln(CP_lower(k₁)/CP_upper(k₂)), each Clopper–Pearson bound one-sided
	// at level α/2, so Pr[Lower > true loss] ≤ α = 1 − Confidence.
	Lower      float64
	Confidence float64
	// Samples is the number of releases drawn at each input of the chosen
	// pair (selection and held-out halves); Releases is the total drawn.
	Samples, Releases int
	// HeldOut is the size of each held-out half and K1, K2 the event's
	// counts in it, at the input the event favours and at the other one.
	HeldOut, K1, K2 int
	// Pair and Event describe the chosen inputs and event.
	Pair, Event string
	// Pass reports Lower ≤ Effective: the samples are consistent with the
	// claimed guarantee.
	Pass bool
}

// Verdict returns "PASS" or "FAIL".
func (r Result) Verdict() string {
	if r.Pass {
		return "PASS"
	}
	return "FAIL"
}

// String formats the result on one line.
func (r Result) String() string {
	return fmt.Sprintf("%s: claimed ε = %.6g, effective ε = %.15g, ε̂ = %.4f, ε̂ lower (%.10g) = %.4f, %d samples per input (%d held out: %d vs %d), pair %s, event %s: %s",
		r.Mechanism, r.Claimed, r.Effective, r.Point, r.Confidence, r.Lower, r.Samples, r.HeldOut, r.K1, r.K2, r.Pair, r.Event, r.Verdict())
}

// event is a union of cells of one partition of one pair, favouring input
// dir (0: X, 1: Y).
type event struct {
	pair, part, dir int
	cells           map[uint64]bool
	size, total     int // cells in the event, cells seen
	train           float64
}

// Run audits m (see the package documentation): it draws the selection half
// at every pair, picks the event (a union of cells of one partition of one
// pair, in one direction) with the largest lower bound on the selection
// half, then draws the held-out half at that pair and returns the bound
// and point estimate computed from it alone.
func Run(m Mechanism, cfg Config) (Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Result{}, err
	}
	if m.Release == nil || len(m.Pairs) == 0 {
		return Result{}, fmt.Errorf("audit: mechanism %q has no Release or no pairs", m.Name)
	}
	alpha := 1 - cfg.Confidence
	nSel := cfg.Samples / 2
	nHold := cfg.Samples - nSel
	res := Result{Mechanism: m.Name, Claimed: m.Claimed, Effective: m.Effective, Confidence: cfg.Confidence, Samples: cfg.Samples, HeldOut: nHold}

	best := event{train: math.Inf(-1), pair: -1}
	for pi, p := range m.Pairs {
		if len(p.Partitions) == 0 {
			return Result{}, fmt.Errorf("audit: pair %q has no partitions", p.Name)
		}
		// counts[part][input][cell]
		counts := make([][2]map[uint64]int, len(p.Partitions))
		for j := range counts {
			counts[j] = [2]map[uint64]int{{}, {}}
		}
		for in, x := range [][]float64{p.X, p.Y} {
			for range nSel {
				y, refused, err := release(m, x, cfg.Source)
				if err != nil {
					return Result{}, err
				}
				for j, part := range p.Partitions {
					c := uint64(RefusedCell)
					if !refused {
						c = part.Cell(y)
					}
					counts[j][in][c]++
				}
			}
			res.Releases += nSel
		}
		for j := range p.Partitions {
			for dir := range 2 {
				if e, ok := bestEvent(counts[j][dir], counts[j][1-dir], nSel, nHold, alpha/2); ok && e.train > best.train {
					e.pair, e.part, e.dir = pi, j, dir
					best = e
				}
			}
		}
	}
	if best.pair < 0 {
		return Result{}, fmt.Errorf("audit: mechanism %q: no partition had at most %d cells", m.Name, maxCells)
	}

	p := m.Pairs[best.pair]
	part := p.Partitions[best.part]
	inputs := [2][]float64{p.X, p.Y}
	var k [2]int
	for in := range 2 {
		x := inputs[(best.dir+in)%2] // in = 0: the favoured input
		for range nHold {
			y, refused, err := release(m, x, cfg.Source)
			if err != nil {
				return Result{}, err
			}
			c := uint64(RefusedCell)
			if !refused {
				c = part.Cell(y)
			}
			if best.cells[c] {
				k[in]++
			}
		}
		res.Releases += nHold
	}
	res.K1, res.K2 = k[0], k[1]
	res.Lower = lowerBound(k[0], k[1], nHold, alpha/2)
	res.Point = math.Log(float64(k[0]) / float64(k[1]))
	res.Pass = !(res.Lower > m.Effective)
	from, to := "x", "x'"
	if best.dir == 1 {
		from, to = to, from
	}
	res.Pair = p.Name
	res.Event = fmt.Sprintf("%s: %d of %d cells (%s vs %s)", part.Name, best.size, best.total, from, to)
	return res, nil
}

// release draws one release of x, reporting a refusal separately.
func release(m Mechanism, x []float64, src mechanisms.Source) (y []float64, refused bool, err error) {
	y, err = m.Release(x, src)
	if errors.Is(err, ErrRefused) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("audit: mechanism %q: %w", m.Name, err)
	}
	return y, false, nil
}

// lowerBound returns ln(CP_lower(k1, n)/CP_upper(k2, n)) at level a each.
func lowerBound(k1, k2, n int, a float64) float64 {
	return math.Log(ClopperPearsonLower(k1, n, a)) - math.Log(ClopperPearsonUpper(k2, n, a))
}

// bestEvent returns the union of cells that maximises the lower bound that
// the held-out half would give if its counts were those of the selection
// half (scaled to nHold), among the prefixes of the cells sorted by their
// estimated likelihood ratio num/den (the Neyman–Pearson order: the best
// test of x against x' rejects on a super-level set of the ratio). ok is
// false if there are too many cells.
func bestEvent(num, den map[uint64]int, nSel, nHold int, a float64) (event, bool) {
	seen := make(map[uint64]bool, len(num)+len(den))
	for c := range num {
		seen[c] = true
	}
	for c := range den {
		seen[c] = true
	}
	if len(seen) > maxCells {
		return event{}, false
	}
	cells := make([]uint64, 0, len(seen))
	for c := range seen {
		cells = append(cells, c)
	}
	// Ratio with ½ added to both counts (so empty cells sort sensibly);
	// ties broken by the larger numerator, then by cell for determinism.
	slices.SortFunc(cells, func(a, b uint64) int {
		ra := (float64(num[a]) + 0.5) * (float64(den[b]) + 0.5)
		rb := (float64(num[b]) + 0.5) * (float64(den[a]) + 0.5)
		switch {
		case ra > rb:
			return -1
		case ra < rb:
			return 1
		case num[a] != num[b]:
			return num[b] - num[a]
		case a < b:
			return -1
		case a > b:
			return 1
		}
		return 0
	})
	scale := float64(nHold) / float64(nSel)
	e := event{train: math.Inf(-1), total: len(cells)}
	var k1, k2 int
	for i, c := range cells {
		k1 += num[c]
		k2 += den[c]
		if k1 == 0 {
			continue
		}
		s1 := min(int(math.Round(float64(k1)*scale)), nHold)
		s2 := min(int(math.Round(float64(k2)*scale)), nHold)
		if l := lowerBound(s1, s2, nHold, a); l > e.train {
			e.train, e.size = l, i+1
		}
	}
	if e.size == 0 {
		return e, true
	}
	e.cells = make(map[uint64]bool, e.size)
	for _, c := range cells[:e.size] {
		e.cells[c] = true
	}
	return e, true
}
