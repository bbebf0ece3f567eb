package mechanisms

import (
	"math"
	"math/big"
	"testing"
)

// TestDiscreteLaplaceChiSquare compares discreteLaplace with the exact law
// Pr[Z ≤ z] (twoSidedCDF) on 60 bins at the quantiles of the continuous
// Laplace plus an isolated zero cell, for λ from the Laplace mechanism's
// ≈ 2⁻⁴⁰ up to 4, where the digit loop is empty (m = 0). Seeded; p < 10⁻⁶
// fails.
func TestDiscreteLaplaceChiSquare(t *testing.T) {
	for i, lambda := range []float64{0x1p-50, 1.7 * 0x1p-40, 0x1p-40, 0.01, 0.3, 1, 4} {
		const n = 60000
		s := newDiscreteLaplace(lambda)
		br := &bitReader{src: NewSeededSource(300 + uint64(i))}
		samples := make([]int64, n)
		for j := range samples {
			samples[j] = s.sample(br)
		}
		var edges []int64
		for j := 1; j < 60; j++ {
			u := float64(j) / 60
			var x float64
			if u < 0.5 {
				x = math.Log(2*u) / lambda
			} else {
				x = -math.Log(2*(1-u)) / lambda
			}
			edges = append(edges, int64(math.Floor(x)))
		}
		edges = append(edges, -1, 0)
		if p := binnedIntegerChiSquare(t, samples, edges, twoSidedCDF(lambda)); p < 1e-6 {
			t.Errorf("discreteLaplace(λ = %v): χ² p-value %v", lambda, p)
		}
	}
}

// TestDiscreteLaplaceExactCells tests the pmf cell by cell around 0 where
// the mass is on few integers (λ = 0.4, m = 1, so both the rejection and
// the block paths are used): Pr[Z = z] = tanh(λ/2)e^{−λ|z|}. Seeded; p < 10⁻⁶ fails.
func TestDiscreteLaplaceExactCells(t *testing.T) {
	const n, lambda, half = 200000, 0.4, 25
	s := newDiscreteLaplace(lambda)
	if s.m != 1 {
		t.Fatalf("m = %d, want 1", s.m)
	}
	br := &bitReader{src: NewSeededSource(17)}
	// Cells: z < −half, −half..half, z > half.
	counts := make([]int64, 2*half+3)
	probs := make([]float64, 2*half+3)
	for range n {
		z := s.sample(br)
		counts[min(max(z, -half-1), half+1)+half+1]++
	}
	c := math.Tanh(lambda / 2)
	tail := math.Exp(-lambda*(half+1)) / (1 + math.Exp(-lambda)) // Pr[Z > half]
	probs[0], probs[len(probs)-1] = tail, tail
	for z := -half; z <= half; z++ {
		probs[z+half+1] = c * math.Exp(-lambda*math.Abs(float64(z)))
	}
	cc, pp := poolSmallCells(counts, probs, n)
	if stat, pv := chiSquarePValue(t, cc, pp); pv < 1e-6 {
		t.Errorf("discreteLaplace(0.4) cells: χ² = %v, p = %v", stat, pv)
	}
}

// TestDiscreteLaplaceTables checks the decomposition's parameters: m is the
// smallest integer with λ2^m ≥ ½, the block probability is e^{−λ2^m}, and
// thresholds represent their probabilities exactly.
func TestDiscreteLaplaceTables(t *testing.T) {
	for _, c := range []struct {
		lambda float64
		m      uint
	}{{0x1p-40, 39}, {1.5 * 0x1p-40, 39}, {0.99 * 0x1p-40, 40}, {0x1p-50, 49}, {0.3, 1}, {0.5, 0}, {700, 0}} {
		s := newDiscreteLaplace(c.lambda)
		if s.m != c.m {
			t.Errorf("λ = %v: m = %d, want %d", c.lambda, s.m, c.m)
		}
		if got, want := thresholdValue(s.block), math.Exp(-c.lambda*math.Ldexp(1, int(s.m))); got != want {
			t.Errorf("λ = %v: block probability %v, want %v", c.lambda, got, want)
		}
		if s.maxH<<s.m+(1<<s.m-1) != math.MaxInt64 {
			t.Errorf("λ = %v: maxH = %d does not match m = %d", c.lambda, s.maxH, s.m)
		}
	}
	for _, p := range []float64{0, 0.3, 0.5, 0x1p-70, 1 - 0x1p-53, math.SmallestNonzeroFloat64} {
		th := newThreshold(p)
		exact := new(big.Float).SetPrec(2000).SetUint64(th.hi)
		exact.Add(exact, new(big.Float).SetPrec(2000).SetFloat64(th.rest))
		exact.SetMantExp(exact, -64)
		if exact.Cmp(new(big.Float).SetPrec(2000).SetFloat64(p)) != 0 {
			t.Errorf("threshold(%v) = (%#x, %v) does not represent p exactly", p, th.hi, th.rest)
		}
	}
	for _, bad := range []float64{0x1p-51, 0, -1, math.NaN(), math.Inf(1)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("newDiscreteLaplace(%v) did not panic", bad)
				}
			}()
			newDiscreteLaplace(bad)
		}()
	}
}

func thresholdValue(th threshold) float64 {
	return (float64(th.hi) + th.rest) * 0x1p-64
}

// TestBitReaderScripted follows the bit consumption by hand.
func TestBitReaderScripted(t *testing.T) {
	// Words: 0101 0…0, then 0…0.
	s := script(t, 0x5000000000000000, 0)
	br := &bitReader{src: s}
	if !br.bernoulli(newThreshold(0.75)) { // U = 0…  < 0.11: decided by 1 bit
		t.Error("first decision: want true")
	}
	if br.bernoulli(newThreshold(0.25)) { // next bit 1 vs 0.01's 0: U > p
		t.Error("second decision: want false")
	}
	if br.n != 62 || s.used != 1 {
		t.Fatalf("after two decisions: %d bits left, %d words used; want 62, 1", br.n, s.used)
	}
	// The remaining 62 bits are 01 0…0, equal to p = 0.25's first 62
	// digits; its last two digits (00) match the first two bits of the
	// second word, and p has no more digits, so U ≥ p.
	if br.bernoulli(newThreshold(0.25)) {
		t.Error("third decision: want false")
	}
	if br.n != 62 || s.used != 2 {
		t.Errorf("after the tie: %d bits left, %d words used; want 62, 2", br.n, s.used)
	}
	// bit() hands out bits most significant first.
	br = &bitReader{src: script(t, 0xA000000000000000)}
	for i, want := range []uint64{1, 0, 1, 0, 0} {
		if got := br.bit(); got != want {
			t.Errorf("bit %d = %d, want %d", i, got, want)
		}
	}
}

// TestBitReaderMatchesReference replays a seeded stream of words through
// bitReader.bernoulli and through a direct reading of "U < p, digit by
// digit" on the same bit string, for random probabilities; every decision
// and the number of bits consumed must agree.
func TestBitReaderMatchesReference(t *testing.T) {
	gen := NewSeededSource(5)
	words := make([]uint64, 4000)
	for i := range words {
		words[i] = gen.Uint64()
	}
	bitAt := func(pos int) uint64 { return words[pos/64] >> (63 - pos%64) & 1 }
	br := &bitReader{src: script(t, words...)}
	pos := 0 // reference read position in the bit string
	probs := NewSeededSource(6)
	for call := 0; call < 50000; call++ {
		p := Float64(probs)
		if call%3 == 0 {
			p = math.Ldexp(p, -int(probs.Uint64()%20)) // small probabilities too
		}
		th := newThreshold(p)
		var want bool
		for j := 0; ; j++ {
			if j == 64 {
				t.Fatal("reference: 64-digit tie (probability 2^-64)")
			}
			u, d := bitAt(pos), th.hi>>(63-j)&1
			pos++
			if u != d {
				want = d == 1
				break
			}
		}
		if got := br.bernoulli(th); got != want {
			t.Fatalf("call %d (p = %v): got %v, want %v", call, p, got, want)
		}
		if consumed := 64*br.src.(*scriptedSource).used - int(br.n); consumed != pos {
			t.Fatalf("call %d: bitReader consumed %d bits, reference %d", call, consumed, pos)
		}
		if call%7 == 0 { // interleave single bits
			if got, want := br.bit(), bitAt(pos); got != want {
				t.Fatalf("call %d: bit() = %d, want %d", call, got, want)
			}
			pos++
		}
	}
}

// zeroSource returns only zero words: every comparison "U < p" with p > 0
// succeeds, which drives the geometric block loop to its truncation.
type zeroSource struct{}

func (zeroSource) Uint64() uint64 { return 0 }

func TestDiscreteLaplaceTruncation(t *testing.T) {
	s := newDiscreteLaplace(0x1p-40)
	if got := s.sample(&bitReader{src: zeroSource{}}); got != math.MaxInt64 {
		t.Errorf("all-zero bits: sample = %d, want MaxInt64 (truncated)", got)
	}
}

func BenchmarkDiscreteLaplace(b *testing.B) {
	s := newDiscreteLaplace(0x1p-40)
	br := &bitReader{src: NewSeededSource(1)}
	for b.Loop() {
		s.sample(br)
	}
}

// TestExpAccuracy backs the exactness claims of discreteLaplace, which
// assume math.Exp is within 2 ulps on [−2, 0], the arguments it uses (Go's
// documented target is < 1 ulp; amd64 uses an assembly version). The reference is the Taylor
// series in 300-bit arithmetic.
func TestExpAccuracy(t *testing.T) {
	src := NewSeededSource(3)
	worst := 0.0
	for range 2000 {
		x := -2 * Float64(src)
		got := math.Exp(x)
		const prec = 300
		bx := new(big.Float).SetPrec(prec).SetFloat64(x)
		sum := new(big.Float).SetPrec(prec).SetInt64(1)
		term := new(big.Float).SetPrec(prec).SetInt64(1)
		for k := int64(1); k < 80; k++ {
			term.Mul(term, bx)
			term.Quo(term, new(big.Float).SetPrec(prec).SetInt64(k))
			sum.Add(sum, term)
		}
		d, _ := new(big.Float).Sub(new(big.Float).SetPrec(prec).SetFloat64(got), sum).Float64()
		worst = math.Max(worst, math.Abs(d)/(math.Nextafter(got, 2)-got))
	}
	if worst > 2 {
		t.Errorf("math.Exp error up to %v ulps on [-2, 0], want <= 2", worst)
	}
}
