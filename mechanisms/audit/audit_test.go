package audit

import (
	"math"
	"testing"

	"github.com/ldpsql/ldpsql/mechanisms"
)

// Every test below gives a correct mechanism and its deliberately broken
// variants the same sample budget, and runs at the default confidence
// 1 − 10⁻⁶ with a seeded source (so the outcome is reproducible; a correct
// mechanism would fail with probability ≤ 10⁻⁶ for a random seed).

// audit runs m with n samples per input and the given seed, logs the result
// and returns it.
func audit(t *testing.T, m Mechanism, n int, seed uint64) Result {
	t.Helper()
	r, err := Run(m, Config{Samples: n, Source: mechanisms.NewSeededSource(seed)})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(r)
	return r
}

// wantPass fails unless r passed with a point estimate within tol of the
// effective ε (the audit's power: a correct mechanism is seen close to its
// claimed loss, not just below it).
func wantPass(t *testing.T, r Result, tol float64) {
	t.Helper()
	if !r.Pass {
		t.Errorf("%s: FAIL, lower bound %.4f > effective ε %.4f", r.Mechanism, r.Lower, r.Effective)
	}
	if math.Abs(r.Point-r.Effective) > tol {
		t.Errorf("%s: point estimate %.4f is not within %v of ε = %.4f: the audit lacks power", r.Mechanism, r.Point, tol, r.Effective)
	}
}

// wantFail fails unless the audit caught r's mechanism.
func wantFail(t *testing.T, r Result) {
	t.Helper()
	if r.Pass {
		t.Errorf("%s: the broken mechanism PASSED: lower bound %.4f ≤ claimed %.4f (point %.4f)", r.Mechanism, r.Lower, r.Effective, r.Point)
	}
}

// must returns v, panicking on a construction error (a bug in the test).
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// claims wraps a vector randomiser and claims a different ε for it: a
// randomiser calibrated to 2ε that reports ε has the wrong noise scale or
// keep probability for its claim.
type claims struct {
	mechanisms.VectorRandomiser
	eps float64
}

func (c claims) Epsilon() float64          { return c.eps }
func (c claims) EffectiveEpsilon() float64 { return c.eps }

// krrAllLabels is k-RR with a classic bug: after deciding to flip, it draws
// the replacement from all K labels (the true one included), so the true
// label's probability is p + (1 − p)/K and the loss ln(1 + pK/(1 − p)).
type krrAllLabels struct{ *mechanisms.KRR }

func (r krrAllLabels) Randomise(y int, src mechanisms.Source) (int, error) {
	if mechanisms.Bernoulli(src, r.KeepProbability()) {
		return y, nil
	}
	return mechanisms.IntN(src, r.K()), nil
}

// krrClaims is a KRR calibrated to one ε that claims another (its keep
// probability is wrong for the claim).
type krrClaims struct {
	*mechanisms.KRR
	eps float64
}

func (r krrClaims) Epsilon() float64          { return r.eps }
func (r krrClaims) EffectiveEpsilon() float64 { return r.eps }

func TestAuditKRR(t *testing.T) {
	const n = 1_000_000
	for i, eps := range []float64{0.5, 1, 4} {
		r := must(mechanisms.NewKRR(eps, 4))
		wantPass(t, audit(t, KRR(r), n, 100+uint64(i)), 0.02+0.01*eps)
	}
	// Wrong keep probability: calibrated to ε = 1.5 (p = 0.60 instead of
	// 0.475 at K = 4), claims 1.
	wantFail(t, audit(t, KRR(krrClaims{must(mechanisms.NewKRR(1.5, 4)), 1}), n, 110))
	// Replacement drawn from all K labels: loss ln(1 + 4p/(1 − p)) = 1.53.
	bug := krrAllLabels{must(mechanisms.NewKRR(1, 4))}
	r := audit(t, KRR(bug), n, 111)
	wantFail(t, r)
	p := bug.KeepProbability()
	if want := math.Log1p(4 * p / (1 - p)); math.Abs(r.Point-want) > 0.03 {
		t.Errorf("all-labels k-RR: point %.4f, true loss %.4f", r.Point, want)
	}
}

// halfScale is a Laplace mechanism with half the noise scale it claims:
// built for 2ε, it reports ε.
type halfScale struct {
	*mechanisms.Laplace
	eps float64
}

func (h halfScale) Epsilon() float64          { return h.eps }
func (h halfScale) EffectiveEpsilon() float64 { return h.eps }

func TestAuditLaplace(t *testing.T) {
	const n = 1_000_000
	for i, c := range []struct{ sens, eps float64 }{{1, 1}, {72, 0.5}, {1e-3, 3}} {
		l := must(mechanisms.NewLaplace(c.sens, c.eps, 1))
		wantPass(t, audit(t, must(Laplace(l)), n, 200+uint64(i)), 0.03)
	}
	broken := halfScale{must(mechanisms.NewLaplace(1, 2, 1)), 1}
	r := audit(t, must(Laplace(broken)), n, 210)
	wantFail(t, r)
	if math.Abs(r.Point-2) > 0.05 {
		t.Errorf("half-scale Laplace: point %.4f, true loss 2", r.Point)
	}
}

// TestAuditVectorLaplaceBall: opposite vertices ±e₁ of the ℓ1 ball, d = 8;
// the loss lives in the first coordinate (the event y₁ ≥ 1 has probability
// ½ against ½e^{−ε}), so the audit's power does not depend on d.
func TestAuditVectorLaplaceBall(t *testing.T) {
	const n = 600_000
	ball := mechanisms.L1Ball{D: 8, Radius: 1}
	r := must(mechanisms.NewRandomiser(mechanisms.RandomiserLaplace, ball, 1))
	wantPass(t, audit(t, must(Vector(r)), n, 300), 0.03)
	// Half the scale: the same mechanism built for 2ε, claiming ε.
	broken := claims{must(mechanisms.NewRandomiser(mechanisms.RandomiserLaplace, ball, 2)), 1}
	wantFail(t, audit(t, must(Vector(broken)), n, 310))
}

// TestAuditVectorLaplaceBox: opposite corners of a box, d = 4 (ε/4 per
// coordinate); the full ε needs every coordinate in its tail (probability
// 1/16 against e^{−ε}/16), which the clipped projection's top atom is.
func TestAuditVectorLaplaceBox(t *testing.T) {
	const n = 1_000_000
	box := mechanisms.Box{Lo: []float64{0, -1, 10, 0}, Hi: []float64{1, 1, 20, 1}}
	r := must(mechanisms.NewRandomiser(mechanisms.RandomiserLaplace, box, 1))
	wantPass(t, audit(t, must(Vector(r)), n, 301), 0.08)
	broken := claims{must(mechanisms.NewRandomiser(mechanisms.RandomiserLaplace, box, 2)), 1}
	wantFail(t, audit(t, must(Vector(broken)), n, 311))
}

func TestAuditDuchi(t *testing.T) {
	const n = 600_000
	for i, d := range []int{4, 5} {
		box := mechanisms.Box{Lo: make([]float64, d), Hi: ones(d)}
		r := must(mechanisms.NewRandomiser(mechanisms.RandomiserDuchi, box, 1))
		wantPass(t, audit(t, must(Vector(r)), n, 400+uint64(i)), 0.03)
		// Wrong keep probability: p = e^{1.5}/(e^{1.5} + 1) claimed as ε = 1.
		broken := claims{must(mechanisms.NewRandomiser(mechanisms.RandomiserDuchi, box, 1.5)), 1}
		wantFail(t, audit(t, must(Vector(broken)), n, 410+uint64(i)))
	}
	// On the ℓ1 ball, opposite vertices fix one coordinate of v only, so
	// the loss the audit sees is below ε: it passes, with a low estimate.
	r := must(mechanisms.NewRandomiser(mechanisms.RandomiserDuchi, mechanisms.L1Ball{D: 4, Radius: 1}, 1))
	if res := audit(t, must(Vector(r)), n, 420); !res.Pass {
		t.Errorf("duchi on the ball failed: %v", res)
	}
}

// tieDuchi is Duchi's mechanism on the unit box [0, 1]ᵈ written from
// scratch with a choice of tie rule for even d: half (each tie in T⁺ and
// T⁻ with weight ½, what mechanisms.Duchi does; exactly ε-LDP) or both
// (each tie fully in both sets, the spec's reading; loss ln(1 + e^ε)).
// Only the support matters to the audit's exact partition, so B = 1.
type tieDuchi struct {
	d    int
	eps  float64
	both bool
}

func (m tieDuchi) Name() string              { return mechanisms.RandomiserDuchi }
func (m tieDuchi) Epsilon() float64          { return m.eps }
func (m tieDuchi) EffectiveEpsilon() float64 { return m.eps }
func (m tieDuchi) Set() mechanisms.OutputSet {
	return mechanisms.Box{Lo: make([]float64, m.d), Hi: ones(m.d)}
}

func (m tieDuchi) Randomise(x []float64, src mechanisms.Source) ([]float64, error) {
	v := make([]float64, m.d)
	for j := range v {
		v[j] = -1
		if mechanisms.Bernoulli(src, x[j]) { // t = 2x − 1: Pr[v = 1] = x
			v[j] = 1
		}
	}
	plus := mechanisms.Bernoulli(src, math.Exp(m.eps)/(math.Exp(m.eps)+1))
	for {
		w := src.Uint64()
		sum := 0
		for j := range m.d {
			sum += 2*int(w>>j&1) - 1
		}
		if !plus {
			sum = -sum
		}
		accept := sum > 0 || (sum == 0 && (m.both || src.Uint64()>>63 == 1))
		if accept {
			out := make([]float64, m.d)
			for j := range out {
				out[j] = v[j]
				if w>>j&1 == 0 {
					out[j] = -out[j]
				}
			}
			return out, nil
		}
	}
}

// TestAuditDuchiTies: the spec's tie rule leaks ln(1 + e^ε) = 1.31 at ε = 1,
// and only between corners that differ in one coordinate; the audit's
// Duchi plan tries those too and catches it, and passes the ½ rule.
func TestAuditDuchiTies(t *testing.T) {
	const n = 1_000_000
	good := audit(t, must(Vector(tieDuchi{d: 4, eps: 1})), n, 430)
	wantPass(t, good, 0.03)
	bad := audit(t, must(Vector(tieDuchi{d: 4, eps: 1, both: true})), n, 431)
	wantFail(t, bad)
	if want := math.Log1p(math.E); math.Abs(bad.Point-want) > 0.03 {
		t.Errorf("ties in both sets: point %.4f, true loss %.4f", bad.Point, want)
	}
}

// TestAuditPrivUnit: d = 16 on the ℓ1 ball, inputs e₁ (norm r_max) and
// −2⁻³⁰e₁, which exercise ScalarDP's extreme levels and opposite caps at
// once; the partition decodes the level from the release's norm and bins
// the cosine with e₁.
func TestAuditPrivUnit(t *testing.T) {
	const n = 300_000
	ball := mechanisms.L1Ball{D: 16, Radius: 1}
	r := must(mechanisms.NewRandomiser(mechanisms.RandomiserPrivUnit, ball, 1))
	wantPass(t, audit(t, must(Vector(r)), n, 500), 0.1)
	// Built for ε = 2, claiming 1.
	broken := claims{must(mechanisms.NewRandomiser(mechanisms.RandomiserPrivUnit, ball, 2)), 1}
	wantFail(t, audit(t, must(Vector(broken)), n, 510))
}

// TestAuditPrivUnitBox: on a box, the corner Hi against a tiny input
// pointing from the centre the other way.
func TestAuditPrivUnitBox(t *testing.T) {
	const n = 300_000
	box := mechanisms.Box{Lo: make([]float64, 8), Hi: ones(8)}
	r := must(mechanisms.NewRandomiser(mechanisms.RandomiserPrivUnit, box, 1))
	wantPass(t, audit(t, must(Vector(r)), n, 520), 0.1)
	broken := claims{must(mechanisms.NewRandomiser(mechanisms.RandomiserPrivUnit, box, 2)), 1}
	wantFail(t, audit(t, must(Vector(broken)), n, 530))
}

func ones(d int) []float64 {
	v := make([]float64, d)
	for i := range v {
		v[i] = 1
	}
	return v
}

// TestAuditCoordinateRR: per-coordinate randomised response (rr4 on a box, d = 2, ε/2 each): its
// outputs are finitely many bin centres, each its own event; the full ε is the event that both
// coordinates report the bins of x (probability (1 − F)² against (F/3)² under the opposite corner).
// Built for 2ε and claiming ε, it fails.
func TestAuditCoordinateRR(t *testing.T) {
	const n = 1_000_000
	box := mechanisms.Box{Lo: []float64{0, -1}, Hi: []float64{1, 1}}
	r := must(mechanisms.NewRandomiser(mechanisms.RRName(4), box, 1))
	wantPass(t, audit(t, must(Vector(r)), n, 321), 0.08)
	broken := claims{must(mechanisms.NewRandomiser(mechanisms.RRName(4), box, 2)), 1}
	wantFail(t, audit(t, must(Vector(broken)), n, 322))
}
