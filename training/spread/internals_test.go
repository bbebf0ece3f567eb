package spread

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ldpsql/ldpsql/training/nn"
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
				lse := nn.LogSumExp(lw)
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

// spreadLL returns the label spread log-likelihood under the trainer's
// current prior, (1/N) Σ_n log Σ_x Π_i ρ(x_i|x̃_{n,i}) Σ_c R[c̃_n][c] p_θ(c|x),
// by enumerating every combination of the privatised features' bins, and
// its gradient (θ in standardised units, laid out as in the trainer).
func spreadLL(tr *trainer, r [][]float64, theta []float64) (float64, []float64) {
	k, d, nf, nc := tr.k, tr.d, len(tr.noisy), len(tr.clean)
	grad := make([]float64, len(theta))
	rho := make([][]float64, nf)
	z := make([]float64, d)
	idx := make([]int, nf)
	lg := make([]float64, k)
	var terms []struct {
		logw float64   // log Π ρ + log q
		g    []float64 // r − p (k) then z (d)
	}
	f := 0.0
	for n := range tr.n {
		for fi := range tr.noisy {
			ft := &tr.noisy[fi]
			rho[fi] = make([]float64, ft.bins)
			if ft.laplace {
				cdf := make([]float64, ft.bins)
				tot := ft.laplaceProposal(ft.xt[n], cdf)
				prev := 0.0
				for b := range cdf {
					rho[fi][b] = (cdf[b] - prev) / tot
					prev = cdf[b]
				}
			} else {
				tot := 0.0
				for b := range ft.bins {
					l := 1.0
					if b == int(ft.obs[n]) {
						l = ft.alpha
					}
					rho[fi][b] = ft.prior[b] * l
					tot += rho[fi][b]
				}
				for b := range rho[fi] {
					rho[fi][b] /= tot
				}
			}
		}
		for j, col := range tr.clean {
			z[col] = tr.zClean[n*nc+j]
		}
		terms = terms[:0]
		clear(idx)
		for {
			lw := 0.0
			for fi := range tr.noisy {
				ft := &tr.noisy[fi]
				z[ft.col] = ft.z[idx[fi]]
				lw += math.Log(rho[fi][idx[fi]])
			}
			for c := range k {
				v := theta[k*d+c]
				for i := range d {
					v += theta[c*d+i] * z[i]
				}
				lg[c] = v
			}
			lse := nn.LogSumExp(lg)
			q := 0.0
			g := make([]float64, k+d)
			for c := range k {
				g[c] = r[tr.labels[n]][c] * math.Exp(lg[c]-lse) // R[c̃][c] p_θ(c|x)
				q += g[c]
			}
			for c := range k {
				g[c] = g[c]/q - math.Exp(lg[c]-lse) // r(c|x) − p_θ(c|x)
			}
			copy(g[k:], z)
			terms = append(terms, struct {
				logw float64
				g    []float64
			}{lw + math.Log(q), g})
			// Next combination of bins.
			fi := 0
			for ; fi < nf; fi++ {
				idx[fi]++
				if idx[fi] < tr.noisy[fi].bins {
					break
				}
				idx[fi] = 0
			}
			if fi == nf {
				break
			}
		}
		lws := make([]float64, len(terms))
		for i, tm := range terms {
			lws[i] = tm.logw
		}
		lse := nn.LogSumExp(lws)
		f += lse
		for _, tm := range terms {
			post := math.Exp(tm.logw - lse)
			for c := range k {
				gc := post * tm.g[c]
				grad[k*d+c] += gc
				for i := range d {
					grad[c*d+i] += gc * tm.g[k+i]
				}
			}
		}
	}
	inv := 1 / float64(tr.n)
	for i := range grad {
		grad[i] *= inv
	}
	return f * inv, grad
}

// With privatised features the E-step's gradient at θ^k is a
// self-normalised IS estimate of the gradient of the spread log-likelihood
// (under the current prior), consistent as S → ∞ in both label modes;
// summing the label out inside each feature sample makes it less biased at
// every S. Checked against spreadLL's enumeration over all 60 bin
// combinations of the Laplace and rr features of mixedData. Measured
// relative errors of the mean of 8 E-steps, sampled / exact: S = 2: 1.30 /
// 0.090, S = 8: 0.36 / 0.033, S = 32: 0.073 / 0.0088, S = 128: 0.023 /
// 0.0044, S = 512: 0.0064 / 0.0008.
func TestEStepGradientConvergesToSpreadGradient(t *testing.T) {
	d := mixedData(1000)
	theta := []float64{0.8, -0.5, 0.3, -0.2, 0.6, -0.4, -0.6, -0.1, 0.1, 0.2, -0.3, 0.1}
	var target []float64
	prevSampled := math.Inf(1)
	for _, s := range []int{2, 8, 32, 128, 512} {
		rel := map[string]float64{}
		for _, labels := range []string{LabelsSampled, LabelsExact} {
			tr := newTrainer(Config{Samples: s, Labels: labels}.withDefaults(), d, 3)
			if target == nil {
				f, g := spreadLL(tr, d.R, theta)
				// spreadLL's own gradient, by central differences.
				const h = 1e-6
				for i := range theta {
					p, m := slices.Clone(theta), slices.Clone(theta)
					p[i] += h
					m[i] -= h
					fp, _ := spreadLL(tr, d.R, p)
					fm, _ := spreadLL(tr, d.R, m)
					if fd := (fp - fm) / (2 * h); math.Abs(fd-g[i]) > 1e-7 {
						t.Fatalf("spreadLL: ∂/∂θ[%d] = %.10f, finite difference %.10f", i, g[i], fd)
					}
				}
				t.Logf("spread log-likelihood %.6f, |∇| = %.4f", f, norm(g))
				target = g
			}
			const P = 8
			mean := make([]float64, len(theta))
			for it := range P {
				r, err := tr.pass(context.Background(), theta, it, true)
				if err != nil {
					t.Fatal(err)
				}
				for i, g := range r.grad {
					mean[i] += g / P
				}
			}
			rel[labels] = diffNorm(mean, target) / norm(target)
		}
		t.Logf("S=%d: |ĝ − ∇L̃|/|∇L̃| (mean of 8 E-steps): sampled %.4f, exact %.4f", s, rel[LabelsSampled], rel[LabelsExact])
		if rel[LabelsSampled] >= prevSampled {
			t.Errorf("S=%d: the sampled-labels gradient's error %.4f did not fall (previous S: %.4f)", s, rel[LabelsSampled], prevSampled)
		}
		prevSampled = rel[LabelsSampled]
		if rel[LabelsExact] > 0.5*rel[LabelsSampled] {
			t.Errorf("S=%d: exact labels' gradient error %.4f is not below half the sampled labels' %.4f", s, rel[LabelsExact], rel[LabelsSampled])
		}
		if s == 8 && rel[LabelsExact] > 0.1 {
			t.Errorf("S=8: exact labels' gradient is %.4f from the spread gradient, want ≤ 0.1", rel[LabelsExact])
		}
		if s == 512 && (rel[LabelsSampled] > 0.02 || rel[LabelsExact] > 0.005) {
			t.Errorf("S=512: gradient errors sampled %.4f (want ≤ 0.02), exact %.4f (want ≤ 0.005)", rel[LabelsSampled], rel[LabelsExact])
		}
	}
}
