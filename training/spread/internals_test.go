package spread

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// mixedData is a small K = 3 set with one feature of each channel kind.
func mixedData(n int) Data {
	rng := rand.New(rand.NewPCG(5, 6))
	chans := []Channel{
		{Kind: KindLaplace, Lo: -3, Hi: 3, Scale: 0.8, Bins: 12},
		{Kind: KindRR, Lo: 0, Hi: 10, Bins: 5, FlipProb: 0.25},
		{Kind: KindClean},
	}
	x, c := gaussClasses(rng, n, []float64{0.5, 0.3, 0.2}, [][]float64{{-1, 3, 0}, {1, 5, 1}, {0, 7, -1}}, 1, -3, 10)
	for _, row := range x {
		row[0] = min(3, max(-3, row[0]))
	}
	r := krr(3, 0.3)
	xt, ct := privatise(rng, x, c, chans, r)
	return Data{X: xt, Labels: ct, Channels: chans, R: r}
}

// The M-step gradient is the gradient of the energy, with the E-step's
// weights and responsibilities held at θ^k:
//
//	sampled: E(θ) = (1/N) Σ_n Σ_s w(s|n) log p_θ(c^s|x^s),
//	exact:   E(θ) = (1/N) Σ_n Σ_s w(s|n) Σ_c r(c|n,s) log p_θ(c|x^s),
//
// checked by central finite differences at θ ≠ θ^k, with every channel
// kind present. Re-generated samples must also give exactly the E-step's
// gradient back at θ^k.
func TestMStepGradientFiniteDifferences(t *testing.T) {
	for _, labels := range []string{LabelsSampled, LabelsExact} {
		t.Run(labels, func(t *testing.T) {
			d := mixedData(200)
			tr := newTrainer(Config{Samples: 4, StepsPerIteration: 2, Labels: labels}.withDefaults(), d, 3)
			rng := rand.New(rand.NewPCG(9, 9))
			theta0 := make([]float64, 3*3+3)
			for i := range theta0 {
				theta0[i] = 0.5 * rng.NormFloat64()
			}
			ctx := context.Background()
			const iter = 5
			r0, err := tr.pass(ctx, theta0, iter, true)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := tr.pass(ctx, theta0, iter, false)
			if !slices.Equal(r0.grad, again.grad) || r0.energy != again.energy {
				t.Fatalf("regenerated samples give a different gradient at θ^k: %v vs %v", again.grad, r0.grad)
			}
			theta1 := slices.Clone(theta0)
			for i := range theta1 {
				theta1[i] += 0.3 * rng.NormFloat64()
			}
			r1, _ := tr.pass(ctx, theta1, iter, false)
			const h = 1e-5
			for i := range theta1 {
				p, m := slices.Clone(theta1), slices.Clone(theta1)
				p[i] += h
				m[i] -= h
				ep, _ := tr.pass(ctx, p, iter, false)
				em, _ := tr.pass(ctx, m, iter, false)
				fd := (ep.energy - em.energy) / (2 * h)
				// E is smooth with O(1) derivatives: the truncation error is
				// O(h²) ≈ 1e-10 and the rounding error O(1e-16/h) ≈ 1e-11.
				if math.Abs(fd-r1.grad[i]) > 1e-7 {
					t.Errorf("∂E/∂θ[%d]: analytic %.10f, finite difference %.10f", i, r1.grad[i], fd)
				}
			}
			// The weights sum to 1 per row (sampled mode stores them) and
			// the energy, a mean of log-probabilities, is ≤ 0.
			if labels == LabelsSampled {
				for n := range 200 {
					if s := tr.w[4*n] + tr.w[4*n+1] + tr.w[4*n+2] + tr.w[4*n+3]; math.Abs(s-1) > 1e-12 {
						t.Fatalf("row %d weights sum to %v", n, s)
					}
				}
			}
			if r1.energy > 0 || !(r0.loglik < 0) {
				t.Errorf("energy %v > 0 or LogLik %v not < 0", r1.energy, r0.loglik)
			}
		})
	}
}

// The Laplace proposal computed by geometric recurrences equals the
// log-space posterior p(k)·exp(−|x̃ − centre_k|/b) normalised directly.
func TestLaplaceProposalMatchesLogSpace(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, b := range []float64{0.01, 0.3, 2, 50} {
		for _, bins := range []int{2, 7, 32} {
			tr := newTrainer(DefaultConfig(), Data{X: [][]float64{{0}}, Labels: []int{0}, R: krr(2, 0.2),
				Channels: []Channel{{Kind: KindLaplace, Lo: -1, Hi: 3, Scale: b, Bins: bins}}}, 2)
			f := &tr.noisy[0]
			for k := range f.prior {
				f.prior[k] = 0.05 + rng.Float64()
			}
			for _, x := range []float64{-1e3, -3, -1, -0.99, 0.2, 1, 1.37, 2.999, 3, 7, 1e3} {
				cdf := make([]float64, bins)
				tot := f.laplaceProposal(x, cdf)
				lw := make([]float64, bins)
				for k := range lw {
					lw[k] = math.Log(f.prior[k]) - math.Abs(x-f.centre[k])/b
				}
				lse := logSumExp(lw)
				prev := 0.0
				for k := range bins {
					got := (cdf[k] - prev) / tot
					prev = cdf[k]
					want := math.Exp(lw[k] - lse)
					if math.Abs(got-want) > 1e-12*max(1, float64(bins)) {
						t.Errorf("b=%v B=%d x=%v: ρ(%d) = %.15g, log-space %.15g", b, bins, x, k, got, want)
					}
				}
			}
		}
	}
}

// The two-valued randomised-response proposal draws bin k with probability
// ∝ p(k)·(α if k is the released bin j, else 1): checked against the exact
// probabilities over 200 000 draws (5 standard errors per bin), including
// the deterministic ends FlipProb = 0 (always j) and 1 (never j).
func TestRRProposalFrequencies(t *testing.T) {
	for _, pf := range []float64{0, 0.1, 0.5, 0.9, 1} {
		tr := newTrainer(DefaultConfig(), Data{X: [][]float64{{0}}, Labels: []int{0}, R: krr(2, 0.2),
			Channels: []Channel{{Kind: KindRR, Lo: 0, Hi: 1, Bins: 6, FlipProb: pf}}}, 2)
		f := &tr.noisy[0]
		copy(f.prior, []float64{0.3, 0.05, 0.25, 0.1, 0.2, 0.1})
		f.setPriorTables()
		rng := rand.New(rand.NewPCG(2, uint64(100*pf)))
		for _, j := range []int{0, 2, 5} {
			const M = 200000
			cnt := make([]float64, 6)
			for range M {
				cnt[f.sampleRR(j, rng)]++
			}
			want := make([]float64, 6)
			tot := 0.0
			for k := range want {
				lik := pf / 5 // p(x̃ = j | k ≠ j)
				if k == j {
					lik = 1 - pf
				}
				want[k] = f.prior[k] * lik
				tot += want[k]
			}
			for k := range want {
				want[k] /= tot
				got := cnt[k] / M
				se := math.Sqrt(want[k] * (1 - want[k]) / M)
				if math.Abs(got-want[k]) > 5*se+1e-12 {
					t.Errorf("FlipProb=%v j=%d: bin %d drawn with frequency %.5f, want %.5f ± %.5f", pf, j, k, got, want[k], se)
				}
			}
		}
	}
}

// With θ = 0 every weight is 1/S and the prior update (eq. 65) is
// stochastic EM for the deconvolution of one randomised-response feature,
// whose fixed point is the Warner-type estimate P⁻¹ f̃ of the clean bin
// frequencies (f̃ the released ones) when that lies inside the simplex.
func TestPriorUpdateDeconvolvesRR(t *testing.T) {
	const n, bins, pf = 10000, 4, 0.3
	truth := []float64{0.4, 0.3, 0.2, 0.1}
	rng := rand.New(rand.NewPCG(3, 3))
	ch := Channel{Kind: KindRR, Lo: 0, Hi: bins, Bins: bins, FlipProb: pf}
	x := make([][]float64, n)
	labels := make([]int, n)
	ft := make([]float64, bins)
	for i := range x {
		u, k := rng.Float64(), 0
		for k < bins-1 && u >= truth[k] {
			u -= truth[k]
			k++
		}
		v := privatiseRR(rng, ch, float64(k)+0.5)
		x[i] = []float64{v}
		ft[binOf(v, 0, bins, bins)] += 1.0 / n
		labels[i] = rng.IntN(2)
	}
	tr := newTrainer(Config{Samples: 4}.withDefaults(), Data{X: x, Labels: labels, R: krr(2, 0.3), Channels: []Channel{ch}}, 2)
	theta := make([]float64, 2+2)
	for it := range 200 {
		if _, err := tr.pass(context.Background(), theta, it, true); err != nil {
			t.Fatal(err)
		}
		tr.updatePrior()
	}
	// P = (1−p)I + p/(B−1)(11ᵀ − I) has P⁻¹ f̃ = (f̃ − p/(B−1))/(1 − p − p/(B−1))
	// for any f̃ that sums to 1.
	q := pf / (bins - 1)
	for k := range bins {
		want := (ft[k] - q) / (1 - pf - q)
		// The final prior is one stochastic EM step from N·S = 40 000
		// draws: its standard error is about √(¼/40000)·(1/0.6) ≈ 0.004
		// (the contraction 1/(1 − p − p/(B−1)) inflates it); 0.02 is 5×.
		got := tr.noisy[0].prior[k]
		t.Logf("bin %d: learnt %.4f, deconvolved %.4f, true %.2f", k, got, want, truth[k])
		if math.Abs(got-want) > 0.02 {
			t.Errorf("prior[%d] = %.4f, want the deconvolved frequency %.4f (true %.2f)", k, got, want, truth[k])
		}
	}
}
