package spread

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
)

// bayesModel is the Bayes-optimal classifier of Gaussian classes with
// shared covariance σ²I: logit_c(x) = μ_cᵀx/σ² − |μ_c|²/(2σ²) + log π_c
// (the clipping to [lo, hi] in gaussClasses is ignored; it moves < 1% of
// the points).
func bayesModel(prior []float64, means [][]float64, sd float64) *Model {
	k, d := len(means), len(means[0])
	th := make([]float64, k*d+k)
	for c, mu := range means {
		sq := 0.0
		for i, v := range mu {
			th[c*d+i] = v / (sd * sd)
			sq += v * v
		}
		th[k*d+c] = -sq/(2*sd*sd) + math.Log(prior[c])
	}
	(&trainer{k: k, d: d}).centre(th)
	return modelOf(th, k, d)
}

// predictedShare returns the fraction of x predicted as each class.
func predictedShare(m *Model, x [][]float64) []float64 {
	s := make([]float64, m.Classes())
	for _, row := range x {
		s[m.Predict(row)] += 1 / float64(len(x))
	}
	return s
}

// Known answer: Gaussian classes with unequal priors, features privatised by
// Laplace noise, categorical randomised response and (K = 3) nothing, labels
// by k-RR with flip probability 0.3. Logistic regression on the noisy data
// is biased: feature noise attenuates its weights (errors in variables) and
// label noise flattens p(c̃|x̃) further, so its shrunken weights leave the
// class-prior term in charge and it under-predicts the minority classes on
// clean data. Spread-EM (default S = 8, 300 iterations) models both
// channels and gets close to the Bayes-optimal classifier, with either label
// treatment; summing the label out ("exact") gets closer than sampling it.
func TestKnownAnswerGaussianClasses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		prior []float64
		means [][]float64
		ch    []Channel
	}{
		{"K=2 laplace+rr", []float64{0.75, 0.25}, [][]float64{{-1, -0.5}, {1, 1}},
			[]Channel{{Kind: KindLaplace, Lo: -4, Hi: 4, Scale: 1}, {Kind: KindRR, Lo: -4, Hi: 4, Bins: 16, FlipProb: 0.3}}},
		{"K=3 laplace+rr+clean", []float64{0.6, 0.25, 0.15}, [][]float64{{-1.5, -0.5, 0}, {1.5, -0.5, 0}, {0, 1.5, 0.5}},
			[]Channel{{Kind: KindLaplace, Lo: -4, Hi: 4, Scale: 1.2}, {Kind: KindRR, Lo: -4, Hi: 4, Bins: 16, FlipProb: 0.3}, {Kind: KindClean}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, dim := len(tc.prior), len(tc.ch)
			rng := rand.New(rand.NewPCG(3, 4))
			x, c := gaussClasses(rng, 4000, tc.prior, tc.means, 1, -4, 4)
			r := krr(k, 0.3)
			xt, ct := privatise(rng, x, c, tc.ch, r)
			xtest, ctest := gaussClasses(rng, 10000, tc.prior, tc.means, 1, -4, 4)

			bayes := bayesModel(tc.prior, tc.means, 1)
			naive := modelOf(fitForward(t, xt, ct, krr(k, 0)), k, dim)
			labelOnly := modelOf(fitForward(t, xt, ct, r), k, dim)
			aB, aN, aL := accuracy(bayes, xtest, ctest), accuracy(naive, xtest, ctest), accuracy(labelOnly, xtest, ctest)
			sB, sN := predictedShare(bayes, xtest), predictedShare(naive, xtest)
			att := norm(naive.w) / norm(bayes.w)
			t.Logf("clean test accuracy: Bayes %.4f, naive LR %.4f, label correction only %.4f", aB, aN, aL)
			t.Logf("predicted class shares (true %v): Bayes %.3f, naive %.3f; naive |W|/Bayes |W| = %.3f", tc.prior, sB, sN, att)
			// The naive fit is biased: attenuated weights (measured 0.08 and
			// 0.12 of Bayes's), and the smallest class predicted far less
			// often than Bayes predicts it.
			if att > 0.25 {
				t.Errorf("naive |W| is %.3f of Bayes's, want a clearly attenuated ≤ 0.25", att)
			}
			minor := k - 1
			if sN[minor] > 0.5*sB[minor] {
				t.Errorf("naive LR predicts the smallest class on %.3f of clean points vs Bayes %.3f: want < half (biased towards the majority)", sN[minor], sB[minor])
			}

			for _, mode := range []struct {
				labels string
				// maxGap is the largest accuracy deficit to Bayes allowed,
				// maxShare the largest error in the smallest class's
				// predicted share, as a fraction of naive's.
				maxGap, maxShare float64
			}{
				// Measured 0.9 (K=2) and 1.7 (K=3) points below Bayes, share
				// errors a third of naive's (finite-S IS shrinkage of the
				// logits, a factorised prior on dependent features).
				{LabelsSampled, 0.03, 0.5},
				// Measured 0.2 points above (K=2) and 0.4 below (K=3) Bayes,
				// share errors 7% and 1% of naive's.
				{LabelsExact, 0.015, 0.25},
			} {
				em, err := Train(context.Background(), Config{Seed: 11, Labels: mode.labels}, Data{X: xt, Labels: ct, Channels: tc.ch, R: r}, nil)
				if err != nil {
					t.Fatal(err)
				}
				aE, sE := accuracy(em, xtest, ctest), predictedShare(em, xtest)
				t.Logf("labels %q: spread-EM clean test accuracy %.4f, predicted class shares %.3f", mode.labels, aE, sE)
				// The accuracies are measured on 10 000 clean points
				// (standard error ≈ 0.003) and differ from their population
				// values by about 1 point through the 4 000 training
				// points; the measured gap EM − naive is ≥ 7.4 points, so a
				// 4-point margin cannot be met by chance yet fails if the
				// spread machinery stops correcting.
				if aE < aN+0.04 {
					t.Errorf("labels %q: spread-EM accuracy %.4f is not clearly above naive LR's %.4f (want a ≥ 4-point margin)", mode.labels, aE, aN)
				}
				if aE < aB-mode.maxGap {
					t.Errorf("labels %q: spread-EM accuracy %.4f is more than %.1f points below the Bayes-optimal %.4f", mode.labels, aE, 100*mode.maxGap, aB)
				}
				if eE, eN := math.Abs(sE[minor]-sB[minor]), math.Abs(sN[minor]-sB[minor]); eE > mode.maxShare*eN {
					t.Errorf("labels %q: spread-EM predicts the smallest class on %.3f of clean points (Bayes %.3f, naive %.3f): want less than %.2f of naive's error",
						mode.labels, sE[minor], sB[minor], sN[minor], mode.maxShare)
				}
			}
		})
	}
}
