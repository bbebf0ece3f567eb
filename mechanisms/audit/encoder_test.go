package audit

import (
	"errors"
	"math"
	mathrand "math/rand/v2"
	"strings"
	"testing"

	"github.com/ldpsql/ldpsql/mechanisms"
)

// candidates are inputs of a 3-feature encoder: ± the first feature, the
// second, and zero.
var candidates = [][]float64{{1, 0, 0}, {-1, 0, 0}, {0, 1, 0}, {0, 0, 0}}

// hugeEncoder is a hostile encoder that returns vectors vastly outside any
// declared set, up to ±MaxFloat64, pointing opposite ways for ±x₀.
func hugeEncoder(x []float64) ([]float64, error) {
	return []float64{x[0] * math.MaxFloat64, -x[0] * math.MaxFloat64, x[1] * 1e300, x[2] - 1e200}, nil
}

// TestAuditEncoderHostile: an encoder that returns huge vectors cannot
// weaken ε, because the host re-clips before randomising; the audit passes
// for all three randomisers, and for the Laplace one it sees the full ε
// (the clipped encodings of ±x₀ are opposite points of the ball, ℓ1
// distance 2l).
func TestAuditEncoderHostile(t *testing.T) {
	const n = 300_000
	ball := mechanisms.L1Ball{D: 4, Radius: 1}
	box := mechanisms.Box{Lo: []float64{-1, -1, -1, -1}, Hi: []float64{1, 1, 1, 1}}
	for i, c := range []struct {
		name string
		set  mechanisms.OutputSet
		tol  float64
	}{
		{mechanisms.RandomiserLaplace, ball, 0.05},
		{mechanisms.RandomiserLaplace, box, math.Inf(1)}, // ±x₀ reach opposite corners in 2 of 4 coordinates only
		{mechanisms.RandomiserDuchi, box, math.Inf(1)},
		{mechanisms.RandomiserPrivUnit, ball, math.Inf(1)}, // equal norms: ε_mag is not exercised
	} {
		r := must(mechanisms.NewRandomiser(c.name, c.set, 1))
		m := must(Encoded(hugeEncoder, c.set, r, candidates))
		res := audit(t, m, n, 600+uint64(i))
		wantPass(t, res, c.tol)
	}
}

// TestAuditEncoderNaN: the host refuses (fails the statement on) an
// encoding with a NaN or ±Inf element. An encoder that always returns NaN
// makes every release a refusal, which reveals nothing: the audit passes
// with ε̂ = 0. One that returns NaN at random, independently of the input,
// and huge vectors otherwise, passes too.
func TestAuditEncoderNaN(t *testing.T) {
	const n = 200_000
	ball := mechanisms.L1Ball{D: 4, Radius: 1}
	r := must(mechanisms.NewRandomiser(mechanisms.RandomiserLaplace, ball, 1))
	nan := func([]float64) ([]float64, error) { return []float64{math.NaN(), 0, math.Inf(1), 0}, nil }
	res := audit(t, must(Encoded(nan, ball, r, candidates)), n, 610)
	if !res.Pass || res.Point != 0 || res.K1 != res.HeldOut {
		t.Errorf("always-NaN encoder: %v, want PASS with every release refused", res)
	}
	rng := mathrand.New(mathrand.NewPCG(1, 2))
	coin := func(x []float64) ([]float64, error) {
		if rng.IntN(2) == 0 {
			return []float64{math.NaN(), 0, 0, 0}, nil
		}
		return hugeEncoder(x)
	}
	wantPass(t, audit(t, must(Encoded(coin, ball, r, candidates)), n, 611), 0.1)
}

// TestAuditEncoderRefusalChannel documents what the host's refusal means
// for privacy: an encoder that returns NaN for some inputs and a valid
// vector for others makes the statement fail or succeed depending on the
// input, and that outcome is observable (an error instead of a release).
// The audit counts refusals as an outcome, so it FAILS such an encoder,
// whatever the randomiser: the trust boundary (clip, then randomise) bounds
// what a release reveals, not whether a release is made. An encoder error
// (a crash, a timeout) is the same channel.
func TestAuditEncoderRefusalChannel(t *testing.T) {
	const n = 200_000
	ball := mechanisms.L1Ball{D: 4, Radius: 1}
	r := must(mechanisms.NewRandomiser(mechanisms.RandomiserLaplace, ball, 1))
	for i, enc := range []Encoder{
		func(x []float64) ([]float64, error) {
			if x[0] > 0 {
				return []float64{math.NaN(), 0, 0, 0}, nil
			}
			return hugeEncoder(x)
		},
		func(x []float64) ([]float64, error) {
			if x[0] > 0 {
				return nil, errors.New("plugin crashed")
			}
			return hugeEncoder(x)
		},
	} {
		res := audit(t, must(Encoded(enc, ball, r, candidates)), n, 620+uint64(i))
		if res.Pass || !strings.Contains(res.Pair, "(refused)") || !math.IsInf(res.Point, 1) {
			t.Errorf("input-dependent refusal: %v, want FAIL on the refused-vs-released pair", res)
		}
	}
}

// TestHostRelease: the host path clips whatever the encoder returns, so
// with a huge encoding the release is the randomised clipped point; NaN,
// ±Inf, a wrong length and an encoder error are refusals.
func TestHostRelease(t *testing.T) {
	ball := mechanisms.L1Ball{D: 4, Radius: 1}
	r := must(mechanisms.NewRandomiser(mechanisms.RandomiserLaplace, ball, 1))
	rel := HostRelease(hugeEncoder, ball, r)
	// The same seed through the randomiser directly, at the clipped point.
	clipped := must(ball.Clip(must(hugeEncoder([]float64{1, 0, 0}))))
	got := must(rel([]float64{1, 0, 0}, mechanisms.NewSeededSource(7)))
	want := must(r.Randomise(clipped, mechanisms.NewSeededSource(7)))
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("host release %v, randomised clipped encoding %v", got, want)
		}
	}
	for _, enc := range []Encoder{
		func([]float64) ([]float64, error) { return []float64{0, math.NaN(), 0, 0}, nil },
		func([]float64) ([]float64, error) { return []float64{0, 0, math.Inf(-1), 0}, nil },
		func([]float64) ([]float64, error) { return []float64{0, 0, 0}, nil },
		func([]float64) ([]float64, error) { return nil, errors.New("boom") },
	} {
		if _, err := HostRelease(enc, ball, r)([]float64{0}, mechanisms.NewSeededSource(1)); !errors.Is(err, ErrRefused) {
			t.Errorf("want a refusal, got %v", err)
		}
	}
}

// TestAuditReleased: the plan for a host path seen only through its
// releases (LDP_ENCODE in SQL, say) estimates the clipped encodings from
// pilot releases and then audits like Encoded: the hostile encoder passes
// with a point estimate near ε, an input-dependent refusal fails, and a path
// that refuses every candidate is an error.
func TestAuditReleased(t *testing.T) {
	const n = 300_000
	ball := mechanisms.L1Ball{D: 4, Radius: 1}
	r := must(mechanisms.NewRandomiser(mechanisms.RandomiserLaplace, ball, 1))
	src := mechanisms.NewSeededSource(630)
	m := must(Released("hidden host path", HostRelease(hugeEncoder, ball, r), r, candidates, 2000, src))
	wantPass(t, audit(t, m, n, 631), 0.08)

	nanAt0 := func(x []float64) ([]float64, error) {
		if x[0] > 0 {
			return []float64{math.NaN(), 0, 0, 0}, nil
		}
		return hugeEncoder(x)
	}
	m = must(Released("hidden host path", HostRelease(nanAt0, ball, r), r, candidates, 100, src))
	if res := audit(t, m, 50_000, 632); res.Pass {
		t.Errorf("input-dependent refusal passed: %v", res)
	}
	nan := func([]float64) ([]float64, error) { return []float64{math.NaN(), 0, 0, 0}, nil }
	if _, err := Released("hidden host path", HostRelease(nan, ball, r), r, candidates, 10, src); err == nil || !strings.Contains(err.Error(), "every candidate input was refused") {
		t.Errorf("every candidate refused: err = %v", err)
	}
}
