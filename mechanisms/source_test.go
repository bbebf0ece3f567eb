package mechanisms

import (
	"math"
	"math/bits"
	"sync"
	"testing"
)

// TestCryptoSourceUniform checks that CryptoSource words look uniform. The
// data is NOT seeded, so the thresholds bound the false-failure probability
// of a correct source: the byte χ² test (255 df) fails with probability
// 10⁻¹⁰, and each of the 64 per-bit z-tests with |z| ≥ 7.3 with probability
// < 3·10⁻¹³; the union bound gives < 1.3·10⁻¹⁰ < 10⁻⁹ in all. With 2²⁰ words
// (8 Mi bytes, 2²⁰ trials per bit) a bias of 0.4% in a bit, or a byte
// distribution off by a comparable amount, would fail.
func TestCryptoSourceUniform(t *testing.T) {
	t.Run("shared", func(t *testing.T) { testUniformWords(t, CryptoSource()) })
	t.Run("local", func(t *testing.T) { testUniformWords(t, NewCryptoSource()) })
}

func testUniformWords(t *testing.T, src Source) {
	const n = 1 << 20
	var byteCounts [256]int64
	var bitCounts [64]int64
	for range n {
		w := src.Uint64()
		for b := 0; b < 64; b += 8 {
			byteCounts[byte(w>>b)]++
		}
		for b := range 64 {
			bitCounts[b] += int64(w >> b & 1)
		}
	}
	probs := make([]float64, 256)
	for i := range probs {
		probs[i] = 1.0 / 256
	}
	stat, p := chiSquarePValue(t, byteCounts[:], probs)
	if p < 1e-10 {
		t.Errorf("byte frequencies: χ² = %v (255 df), p = %v < 1e-10", stat, p)
	}
	for b, c := range bitCounts {
		if z := (float64(c) - n/2) / math.Sqrt(n/4); math.Abs(z) > 7.3 {
			t.Errorf("bit %d set in %d of %d words: z = %v", b, c, n, z)
		}
	}
}

// TestCryptoSourceConcurrent draws from several goroutines (run with -race to
// check the locking) and checks that no word repeats: for 80 000 uniform
// 64-bit words a repeat has probability < 2·10⁻¹⁰.
func TestCryptoSourceConcurrent(t *testing.T) {
	const goroutines, per = 4, 20000
	out := make([][]uint64, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := CryptoSource()
			w := make([]uint64, per)
			for i := range w {
				w[i] = src.Uint64()
			}
			out[g] = w
		}()
	}
	wg.Wait()
	seen := make(map[uint64]bool, goroutines*per)
	for _, ws := range out {
		for _, w := range ws {
			if seen[w] {
				t.Fatalf("word %#x drawn twice", w)
			}
			seen[w] = true
		}
	}
}

// TestCryptoSourceWipes checks that a word handed out no longer sits in the
// buffer.
func TestCryptoSourceWipes(t *testing.T) {
	c := theCryptoSource
	for range 3 {
		_ = c.Uint64()
		c.mu.Lock()
		w := c.buf[c.off-8 : c.off]
		for _, b := range w {
			if b != 0 {
				t.Errorf("consumed bytes %v still in the buffer", w)
				break
			}
		}
		c.mu.Unlock()
	}
	if CryptoSource() != CryptoSource() {
		t.Error("CryptoSource should return the process-wide source")
	}
}

func TestSeededSourceDeterministic(t *testing.T) {
	a, b, c := NewSeededSource(42), NewSeededSource(42), NewSeededSource(43)
	differ := false
	for range 100 {
		x, y, z := a.Uint64(), b.Uint64(), c.Uint64()
		if x != y {
			t.Fatal("same seed gave different words")
		}
		differ = differ || x != z
	}
	if !differ {
		t.Error("seeds 42 and 43 gave identical streams")
	}
}

func TestFloat64(t *testing.T) {
	if got := Float64(script(t, 0)); got != 0 {
		t.Errorf("Float64(0) = %v, want 0", got)
	}
	if got, want := Float64(script(t, math.MaxUint64)), 1-0x1p-53; got != want {
		t.Errorf("Float64(max) = %v, want 1-2^-53 = %v", got, want)
	}
	if got, want := Float64(script(t, 1<<11)), 0x1p-53; got != want {
		t.Errorf("Float64(2^11) = %v, want 2^-53", got)
	}
	// Distribution: 100 equiprobable bins, 10⁵ seeded draws; p < 10⁻⁶ fails.
	const n, bins = 100000, 100
	src := NewSeededSource(1)
	counts := make([]int64, bins)
	probs := make([]float64, bins)
	for i := range probs {
		probs[i] = 1.0 / bins
	}
	for range n {
		u := Float64(src)
		if u < 0 || u >= 1 {
			t.Fatalf("Float64 = %v outside [0, 1)", u)
		}
		counts[int(u*bins)]++
	}
	if stat, p := chiSquarePValue(t, counts, probs); p < 1e-6 {
		t.Errorf("Float64 histogram: χ² = %v, p = %v", stat, p)
	}
}

func TestIntN(t *testing.T) {
	// χ² against the uniform law on {0..n−1}, seeded; p < 10⁻⁶ fails.
	for _, m := range []int{1, 2, 3, 7, 10, 1000} {
		src := NewSeededSource(uint64(m))
		draws := 20000 * min(m, 10)
		counts := make([]int64, m)
		for range draws {
			v := IntN(src, m)
			if v < 0 || v >= m {
				t.Fatalf("IntN(%d) = %d", m, v)
			}
			counts[v]++
		}
		if m == 1 {
			continue
		}
		probs := make([]float64, m)
		for i := range probs {
			probs[i] = 1 / float64(m)
		}
		if stat, p := chiSquarePValue(t, counts, probs); p < 1e-6 {
			t.Errorf("IntN(%d): χ² = %v, p = %v", m, stat, p)
		}
	}
	// The rejection path: for n = 3, 2⁶⁴ mod 3 = 1, so the word 0 (the only
	// one whose low product word is < 1) is rejected and a second is drawn.
	s := script(t, 0, 1<<63)
	if got := IntN(s, 3); got != 1 || s.used != 2 {
		t.Errorf("IntN(3) with words (0, 2^63) = %d after %d words, want 1 after 2", got, s.used)
	}
	// Largest word maps to n−1, smallest accepted to 0.
	if got := IntN(script(t, math.MaxUint64), 10); got != 9 {
		t.Errorf("IntN(10) of max word = %d, want 9", got)
	}
	for _, bad := range []int{0, -1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("IntN(%d) did not panic", bad)
				}
			}()
			IntN(NewSeededSource(0), bad)
		}()
	}
}

func TestBernoulliScripted(t *testing.T) {
	cases := []struct {
		p     float64
		words []uint64
		want  bool
	}{
		{0.75, []uint64{0xC000000000000000 - 1}, true},
		{0.75, []uint64{0xC000000000000000}, false}, // U ≥ p once p's bits run out
		{0.75, []uint64{0xC000000000000001}, false},
		{0.5, []uint64{1<<63 - 1}, true},
		// p = 2⁻⁷⁰: the first word of p is 0, the second 2⁵⁸.
		{0x1p-70, []uint64{1}, false},
		{0x1p-70, []uint64{0, 1<<58 - 1}, true},
		{0x1p-70, []uint64{0, 1 << 58}, false},
		// The smallest subnormal, 2⁻¹⁰⁷⁴: sixteen zero words, then 2¹⁴.
		{math.SmallestNonzeroFloat64, append(make([]uint64, 16), 1<<14-1), true},
		{math.SmallestNonzeroFloat64, append(make([]uint64, 16), 1<<14), false},
		// 1 − 2⁻⁵³: the first word is all ones except the last 11 bits.
		{1 - 0x1p-53, []uint64{math.MaxUint64&^(1<<11-1) - 1}, true},
		{1 - 0x1p-53, []uint64{math.MaxUint64}, false},
		{0, nil, false},
		{-1, nil, false},
		{1, nil, true},
		{2, nil, true},
	}
	for _, c := range cases {
		s := script(t, c.words...)
		if got := Bernoulli(s, c.p); got != c.want || s.used != len(c.words) {
			t.Errorf("Bernoulli(%v) with words %#x = %v using %d words, want %v using %d", c.p, c.words, got, s.used, c.want, len(c.words))
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Bernoulli(NaN) did not panic")
		}
	}()
	Bernoulli(NewSeededSource(0), math.NaN())
}

// TestBernoulliFrequency: 2·10⁵ seeded draws per p; |z| > 5 fails (two-sided
// probability 6·10⁻⁷ for a correct sampler).
func TestBernoulliFrequency(t *testing.T) {
	const n = 200000
	src := NewSeededSource(7)
	for _, p := range []float64{0.5, 1.0 / 3, 0.1, 1e-3, 0.999, 0x1p-9 + 0x1p-60} {
		var k int
		for range n {
			if Bernoulli(src, p) {
				k++
			}
		}
		if z := (float64(k) - n*p) / math.Sqrt(n*p*(1-p)); math.Abs(z) > 5 {
			t.Errorf("Bernoulli(%v): %d of %d, z = %v", p, k, n, z)
		}
	}
}

func BenchmarkCryptoSourceUint64(b *testing.B) {
	src := CryptoSource()
	var x uint64
	for b.Loop() {
		x ^= src.Uint64()
	}
	_ = bits.OnesCount64(x)
}

func BenchmarkCryptoSourceUint64Parallel(b *testing.B) {
	b.RunParallel(func(pb *testing.PB) {
		src := CryptoSource()
		var x uint64
		for pb.Next() {
			x ^= src.Uint64()
		}
		_ = x
	})
}

func BenchmarkSeededSourceUint64(b *testing.B) {
	src := NewSeededSource(1)
	var x uint64
	for b.Loop() {
		x ^= src.Uint64()
	}
	_ = x
}

// TestLocalCryptoSourceWipes: as TestCryptoSourceWipes, for a NewCryptoSource, across a refill of its
// buffer.
func TestLocalCryptoSourceWipes(t *testing.T) {
	local := NewCryptoSource().(*localCryptoSource)
	for i := 0; i < localCryptoBufSize/8+5; i++ { // one refill, then 5 words of the second buffer
		local.Uint64()
	}
	if local.off != 40 {
		t.Fatalf("offset %d after 5 words of a fresh buffer", local.off)
	}
	for i, b := range local.buf[:local.off] {
		if b != 0 {
			t.Fatalf("byte %d of a handed-out word is %#x, not wiped", i, b)
		}
	}
	nonzero := 0
	for _, b := range local.buf[local.off:] {
		if b != 0 {
			nonzero++
		}
	}
	// 4,056 random bytes: all but about 16 are nonzero.
	if nonzero < 3900 {
		t.Fatalf("only %d of the unread bytes are nonzero: the buffer was not filled", nonzero)
	}
}
