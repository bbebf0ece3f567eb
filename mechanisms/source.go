package mechanisms

import (
	cryptorand "crypto/rand"
	"encoding/binary"
	"math"
	"math/bits"
	mathrand "math/rand/v2"
	"sync"
)

// Source is a source of independent, uniformly distributed 64-bit words.
//
// Every random choice in this package is derived from a Source and nothing
// else, so the distributions are exact functions of uniform bits. Production
// code passes [CryptoSource] or, in a loop on one goroutine, [NewCryptoSource];
// tests pass [NewSeededSource].
type Source interface {
	Uint64() uint64
}

// cryptoBufSize is the size of the buffer in front of crypto/rand, as in
// Google's differential-privacy rand package (bufio, 64 KiB).
const cryptoBufSize = 64 << 10

// cryptoSource is a mutex-guarded buffer of bytes from crypto/rand.
type cryptoSource struct {
	mu sync.Mutex
	cryptoBuffer
}

var theCryptoSource = &cryptoSource{cryptoBuffer: newCryptoBuffer(cryptoBufSize)}

// cryptoBuffer hands out the words of a buffer of bytes from crypto/rand, wiping each as it goes, and
// refills the buffer when it is spent.
type cryptoBuffer struct {
	off int // next unread byte of buf; len(buf) means empty
	buf []byte
}

func newCryptoBuffer(size int) cryptoBuffer { return cryptoBuffer{off: size, buf: make([]byte, size)} }

func (c *cryptoBuffer) next() uint64 {
	buf := c.buf
	if c.off > len(buf)-8 {
		// Documented never to return an error; it crashes the program
		// irrecoverably instead, which is what we want.
		_, _ = cryptorand.Read(buf)
		c.off = 0
	}
	w := buf[c.off : c.off+8 : c.off+8]
	v := binary.LittleEndian.Uint64(w)
	binary.LittleEndian.PutUint64(w, 0)
	c.off += 8
	return v
}

// localCryptoBufSize is the buffer of a [NewCryptoSource]: a batch of releases draws many times this.
const localCryptoBufSize = 4 << 10

// localCryptoSource is a buffer of bytes from crypto/rand owned by one goroutine.
type localCryptoSource struct{ cryptoBuffer }

func (c *localCryptoSource) Uint64() uint64 { return c.next() }

// NewCryptoSource returns a cryptographically secure [Source] for one goroutine: words from crypto/rand
// through a 4 KiB buffer of its own, wiped as they are handed out, like [CryptoSource] but without its
// lock. Code that draws many words in a loop (a batch of releases) takes one: with several batches
// randomised at once, the shared source's lock cost more than the draws themselves. It is not safe for
// concurrent use. Words left in the buffer when it is dropped were never handed out, so they reveal no
// noise.
func NewCryptoSource() Source {
	return &localCryptoSource{newCryptoBuffer(localCryptoBufSize)}
}

// CryptoSource returns the process-wide cryptographically secure [Source].
//
// It is safe for concurrent use by multiple goroutines and cheap to call
// repeatedly (it always returns the same source). Words come from
// crypto/rand, read 64 KiB at a time into a buffer guarded by a mutex, so a
// draw costs a lock and a copy rather than a system call. Each word is wiped
// from the buffer as it is handed out, so a later memory disclosure does not
// reveal the noise already drawn.
//
// crypto/rand.Read never fails (Go ≥ 1.24 crashes the program instead of
// returning an error), so neither does Uint64.
func CryptoSource() Source { return theCryptoSource }

func (c *cryptoSource) Uint64() uint64 {
	c.mu.Lock()
	v := c.next()
	c.mu.Unlock()
	return v
}

// NewSeededSource returns a deterministic [Source] (ChaCha8 from
// math/rand/v2, keyed by seed) FOR TESTS ONLY: anyone who knows the seed can
// reproduce the noise and undo it, so a mechanism driven by it is not
// private. The returned Source is not safe for concurrent use.
func NewSeededSource(seed uint64) Source {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:8], seed)
	copy(key[8:], "ldpsql/mechanisms/test-seed")
	return mathrand.NewChaCha8(key)
}

// Float64 returns a uniform float64 in [0, 1): a uniformly chosen multiple of
// 2⁻⁵³, built from the top 53 bits of one word.
func Float64(src Source) float64 {
	return float64(src.Uint64()>>11) * 0x1p-53
}

// IntN returns an integer uniformly distributed on {0, …, n−1}, exactly (no
// modulo bias), by Lemire's multiply-and-reject method ("Fast random integer
// generation in an interval", ACM TOMACS 2019). It panics if n ≤ 0, which is
// a programming error (as in math/rand/v2).
func IntN(src Source, n int) int {
	if n <= 0 {
		panic("mechanisms: IntN called with n <= 0")
	}
	un := uint64(n)
	hi, lo := bits.Mul64(src.Uint64(), un)
	if lo < un {
		// Reject the 2⁶⁴ mod n words that would make some values more likely.
		thresh := -un % un
		for lo < thresh {
			hi, lo = bits.Mul64(src.Uint64(), un)
		}
	}
	return int(hi)
}

// Bernoulli returns true with probability exactly p (for the float64 value p;
// p ≤ 0 gives false and p ≥ 1 gives true). It panics if p is NaN, which is a
// programming error.
//
// The draw is exact, not merely 2⁻⁵³-accurate: it compares an infinite
// string of uniform bits U = 0.u₁u₂u₃… with the binary expansion of p, 64
// bits at a time, and returns U < p. A float64 in (0, 1) has a finite
// expansion (at most 1074 bits), so the comparison ends after at most 17
// words, and after one word with probability 1 − 2⁻⁶⁴. Hence Pr[true] = p
// even for p as small as 2⁻¹⁰⁷⁴.
func Bernoulli(src Source, p float64) bool {
	switch {
	case math.IsNaN(p):
		panic("mechanisms: Bernoulli called with p = NaN")
	case p <= 0:
		return false
	case p >= 1:
		return true
	}
	x := p
	for {
		// All three steps are exact: scaling by a power of two, the floor of
		// a float, and a float minus its integer part.
		x *= 0x1p64
		w := math.Floor(x)
		x -= w
		pw := uint64(w) // the next 64 bits of p; w < 2⁶⁴
		if u := src.Uint64(); u != pw {
			return u < pw
		}
		if x == 0 {
			return false // U agrees with all of p's bits so far, so U ≥ p
		}
	}
}
