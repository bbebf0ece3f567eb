package mechanisms

import (
	"fmt"
	"math"
	"math/big"
	"testing"
)

// TestDuchiConstants compares C_d = 1/E[w₁ | w ∈ T⁺] (ties weighted ½)
// with brute-force enumeration of {±1}ᵈ for d ≤ 14 and with the closed
// form 2^{d−1}/C(d−1, ⌊d/2⌋) (the paper's, for odd d), and checks that the
// lgamma evaluation stays finite and ≈ √(π(d−1)/2) at d = 784 and 3072
// (where 2^{d−1} overflows float64).
func TestDuchiConstants(t *testing.T) {
	binom := func(n, k int) float64 {
		return float64(new(big.Int).Binomial(int64(n), int64(k)).Int64())
	}
	for d := 1; d <= 14; d++ {
		var weight, sumW1 float64
		for w := 0; w < 1<<d; w++ {
			s := 0
			for j := range d {
				s += 2*(w>>j&1) - 1
			}
			a := 0.0
			switch {
			case s > 0:
				a = 1
			case s == 0:
				a = 0.5
			}
			weight += a
			sumW1 += a * float64(2*(w&1)-1)
		}
		brute := weight / sumW1
		closed := math.Ldexp(1, d-1) / binom(d-1, d/2)
		got := math.Exp(-duchiLogInvC(d))
		if math.Abs(got-brute) > 1e-13*brute || math.Abs(closed-brute) > 1e-13*brute {
			t.Errorf("d = %d: C_d = %v (lgamma), %v (closed form), %v (enumeration)", d, got, closed, brute)
		}
	}
	for _, d := range []int{784, 3072} {
		c := math.Exp(-duchiLogInvC(d))
		if r := c / math.Sqrt(math.Pi*float64(d-1)/2); math.IsInf(c, 0) || math.Abs(r-1) > 1.0/float64(d) {
			t.Errorf("d = %d: C_d = %v, ratio to √(π(d−1)/2) = %v", d, c, r)
		}
		m, err := NewDuchi(Box{Lo: make([]float64, d), Hi: onesVec(d)}, 1)
		if err != nil {
			t.Fatal(err)
		}
		want := c * (math.E + 1) / (math.E - 1)
		if math.Abs(m.B()-want) > 1e-9*want {
			t.Errorf("d = %d, ε = 1: B = %v, want C_d(e+1)/(e−1) = %v", d, m.B(), want)
		}
	}
}

// duchiExact returns the exact output distribution of Duchi's mechanism in
// dimension d for an input t in [−1, 1]ᵈ: P[o] for o indexed by its sign
// bits (bit j set ⇔ oⱼ = +B), given the probability p of choosing T⁺, with
// ties (Σ oⱼvⱼ = 0) given weight tiePlus in T⁺ and tieMinus in T⁻ (the
// mechanism: ½ and ½).
func duchiExact(d int, t []float64, p, tiePlus, tieMinus float64) []float64 {
	n := 1 << d
	sum := func(o, v int) int { // Σ oⱼvⱼ over signs
		s := 0
		for j := range d {
			if (o>>j&1 == 1) == (v>>j&1 == 1) {
				s++
			} else {
				s--
			}
		}
		return s
	}
	weights := func(s int) (plus, minus float64) {
		switch {
		case s > 0:
			return 1, 0
		case s < 0:
			return 0, 1
		}
		return tiePlus, tieMinus
	}
	var nPlus, nMinus float64 // total weights of T± (the same for every v)
	for o := range n {
		a, b := weights(sum(o, 0))
		nPlus += a
		nMinus += b
	}
	out := make([]float64, n)
	for v := range n {
		pv := 1.0
		for j := range d {
			if v>>j&1 == 1 {
				pv *= (1 + t[j]) / 2
			} else {
				pv *= (1 - t[j]) / 2
			}
		}
		for o := range n {
			a, b := weights(sum(o, v))
			out[o] += pv * (p*a/nPlus + (1-p)*b/nMinus)
		}
	}
	return out
}

// duchiMaxLoss returns the largest log-likelihood ratio over outputs and
// pairs of corners of the cube (corners suffice: each P[o | t] is
// multilinear in t).
func duchiMaxLoss(d int, p, tiePlus, tieMinus float64) float64 {
	var dists [][]float64
	for c := range 1 << d {
		corner := make([]float64, d)
		for j := range d {
			corner[j] = float64(2*(c>>j&1) - 1)
		}
		dists = append(dists, duchiExact(d, corner, p, tiePlus, tieMinus))
	}
	var loss float64
	for a := range dists {
		for b := range dists {
			for o := range dists[a] {
				loss = math.Max(loss, math.Log(dists[a][o]/dists[b][o]))
			}
		}
	}
	return loss
}

// duchiMean returns E[o] for the distribution from duchiExact.
func duchiMean(d int, probs []float64, b float64) []float64 {
	mean := make([]float64, d)
	for o, q := range probs {
		for j := range d {
			if o>>j&1 == 1 {
				mean[j] += b * q
			} else {
				mean[j] -= b * q
			}
		}
	}
	return mean
}

// TestDuchiExactEnumeration enumerates the output distribution at d = 4, 5
// and 6 with the mechanism's own p and B: it sums to 1, E[o] = t (to 1e-12)
// at every corner and at interior points, and the largest log-likelihood
// ratio over all outputs and all pairs of inputs equals EffectiveEpsilon,
// up to its 2⁻⁵⁰ rounding up. For even d it also shows why ties are
// weighted ½ (see [Duchi]): with ties fully in both T⁺ and T⁻ and the
// spec's C_d the release is unbiased but its loss is ln(1 + e^ε) > ε; with
// ties in T⁻ only (or T⁺ only) it is biased and its loss is not ε either.
func TestDuchiExactEnumeration(t *testing.T) {
	binom := func(n, k int) float64 {
		return float64(new(big.Int).Binomial(int64(n), int64(k)).Int64())
	}
	for _, d := range []int{4, 5, 6} {
		for _, eps := range []float64{0.5, 1, 4} {
			box := Box{Lo: make([]float64, d), Hi: onesVec(d)}
			m, err := NewDuchi(box, eps)
			if err != nil {
				t.Fatal(err)
			}
			p := 1 - m.cap.flip
			inputs := [][]float64{make([]float64, d), []float64{0.5, -0.25, 0, 0.9, -1, 0.3}[:d]}
			for c := range 1 << d {
				corner := make([]float64, d)
				for j := range d {
					corner[j] = float64(2*(c>>j&1) - 1)
				}
				inputs = append(inputs, corner)
			}
			for _, in := range inputs {
				dist := duchiExact(d, in, p, 0.5, 0.5)
				var tot float64
				for _, q := range dist {
					tot += q
				}
				if math.Abs(tot-1) > 1e-12 {
					t.Errorf("d=%d ε=%v t=%v: probabilities sum to %v", d, eps, in, tot)
				}
				for j, mj := range duchiMean(d, dist, m.B()) {
					if math.Abs(mj-in[j]) > 1e-12*m.B() {
						t.Errorf("d=%d ε=%v t=%v: E[o][%d] = %v, want %v", d, eps, in, j, mj, in[j])
					}
				}
			}
			if loss, eff := duchiMaxLoss(d, p, 0.5, 0.5), m.EffectiveEpsilon(); loss > eff || loss < eff*(1-1e-12) {
				t.Errorf("d=%d ε=%v: max log ratio %v, EffectiveEpsilon %v", d, eps, loss, eff)
			}
			if d%2 == 1 {
				continue
			}
			// The spec's convention: ties in both sets, its C_d.
			specB := (math.Ldexp(1, d-1) + binom(d, d/2)/2) / binom(d-1, d/2) / (2*p - 1)
			one := onesVec(d)
			if f := duchiMean(d, duchiExact(d, one, p, 1, 1), specB)[0]; math.Abs(f-1) > 1e-12 {
				t.Errorf("d=%d ε=%v: ties in both sets with the spec's C_d: E[o] = %v·t, expected unbiased", d, eps, f)
			}
			loss := duchiMaxLoss(d, p, 1, 1)
			t.Logf("d=%d ε=%v: ties in both T⁺ and T⁻ (spec): loss %.4f = ln(1 + e^ε) %.4f > ε", d, eps, loss, -math.Log(1-p))
			if math.Abs(loss+math.Log(1-p)) > 1e-12 {
				t.Errorf("d=%d ε=%v: ties in both sets: loss %v, want ln(1/(1−p)) = %v", d, eps, loss, -math.Log(1-p))
			}
			for _, conv := range []struct {
				name        string
				plus, minus float64
			}{{"T⁻ only", 0, 1}, {"T⁺ only", 1, 0}} {
				f := duchiMean(d, duchiExact(d, one, p, conv.plus, conv.minus), specB)[0]
				loss := duchiMaxLoss(d, p, conv.plus, conv.minus)
				t.Logf("d=%d ε=%v: ties in %s with the spec's C_d: E[o] = %.3f·t, loss %.4f", d, eps, conv.name, f, loss)
				if math.Abs(f-1) < 0.01 || math.Abs(loss-eps) < 0.01 {
					t.Errorf("d=%d ε=%v, ties in %s: factor %v and loss %v, expected biased and not ε", d, eps, conv.name, f, loss)
				}
			}
		}
	}
}

// TestDuchiSamplerMatchesEnumeration: the sampler's output frequencies at
// d = 4 (even, so ties occur) match the exact distribution (χ² over the 16
// outputs; p < 10⁻⁶ fails).
func TestDuchiSamplerMatchesEnumeration(t *testing.T) {
	const d, n = 4, 200000
	box := Box{Lo: []float64{0, -2, 10, 0}, Hi: []float64{1, 2, 20, 0.5}}
	for i, tc := range [][]float64{{0.5, -0.25, 1, -1}, {0, 0, 0, 0}} {
		m, err := NewDuchi(box, 1)
		if err != nil {
			t.Fatal(err)
		}
		x := make([]float64, d)
		for j := range x {
			x[j] = box.Lo[j] + (tc[j]+1)/2*(box.Hi[j]-box.Lo[j])
		}
		counts := make([]int64, 1<<d)
		src := NewSeededSource(300 + uint64(i))
		mid := newBoxFrame(box).mid
		for range n {
			y, err := m.Randomise(x, src)
			if err != nil {
				t.Fatal(err)
			}
			o := 0
			for j := range d {
				if y[j] > mid[j] {
					o |= 1 << j
				}
			}
			counts[o]++
		}
		probs := duchiExact(d, tc, 1-m.cap.flip, 0.5, 0.5)
		if stat, p := chiSquarePValue(t, counts, probs); p < 1e-6 {
			t.Errorf("t = %v: χ² = %v, p = %v", tc, stat, p)
		}
	}
}

// TestDuchiUnbiased: E[release] = clipped x, coordinate by coordinate, for
// odd and even d (3, 4, 6, 8) on boxes and one ball. Each coordinate's
// release is midⱼ ± halfⱼB, with variance halfⱼ²(B² − tⱼ²) exactly, so the
// sample mean must lie within 5.5 standard errors (Bonferroni over the 29
// coordinates: false-failure probability < 2·10⁻⁶). A wrong constant for
// even d (the spec's is ×1.375 at d = 4, ×1.31 at d = 6) would show as a
// bias of ≥ 10 standard errors for these inputs.
func TestDuchiUnbiased(t *testing.T) {
	const n = 150000
	for i, c := range []struct {
		set OutputSet
		x   []float64
	}{
		{Box{Lo: []float64{0, 0, -1}, Hi: []float64{1, 1, 1}}, []float64{0.9, 0.2, 5}},
		{Box{Lo: []float64{0, 0, -1, 10}, Hi: []float64{1, 1, 1, 12}}, []float64{0.95, 0.1, -0.7, 11.8}},
		{Box{Lo: make([]float64, 6), Hi: onesVec(6)}, []float64{1, 0.9, 0.1, 0, 0.75, -3}},
		{Box{Lo: make([]float64, 8), Hi: onesVec(8)}, []float64{0.95, 0.9, 0.05, 0.1, 1, 0, 0.8, 0.3}},
		{L1Ball{D: 4, Radius: 2}, []float64{1.2, -0.6, 0.2, 0}},
	} {
		t.Run(fmt.Sprintf("case%d", i), func(t *testing.T) {
			m, err := NewDuchi(c.set, 1)
			if err != nil {
				t.Fatal(err)
			}
			clipped, _ := c.set.Clip(c.x)
			tcube := m.frame.toWork(clipped, 1)
			d := len(c.x)
			sum := make([]float64, d)
			src := NewSeededSource(400 + uint64(i))
			for range n {
				y, err := m.Randomise(c.x, src)
				if err != nil {
					t.Fatal(err)
				}
				for j := range y {
					sum[j] += y[j]
				}
			}
			for j := range d {
				mean := sum[j] / n
				h := m.frame.half[j]
				se := h * math.Sqrt((m.B()*m.B()-tcube[j]*tcube[j])/n)
				if math.Abs(mean-clipped[j]) > 5.5*se {
					t.Errorf("coord %d: mean %v, want %v ± %v (%.1f σ)", j, mean, clipped[j], 5.5*se, (mean-clipped[j])/se)
				}
			}
		})
	}
}
