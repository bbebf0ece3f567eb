// Package sgemm is a float32 matrix product C = A·B (row-major, no transposes) with an AVX2
// assembly kernel on amd64 and a pure-Go kernel elsewhere (GOARCH=wasm included, or with
// -tags purego), packaged as a gonum BLAS ([Implementation]) so that blas32.Use routes the
// forward passes of the encoders through it.
//
// The product is blocked as in GotoBLAS around a 6×16 register-blocked kernel (12 AVX2
// accumulators), reading A and B in place. Every element of C is the same chain of roundings whichever kernel runs, however the product is blocked or split and whatever
// row of a batch it is: c = (…((c₀ + a₀b₀) + a₁b₁) + …) + a_{k−1}b_{k−1}, each product rounded to
// float32 and then each sum (a multiply then an add, no fused multiply-add). That is also the
// chain gonum's Sgemm computes, so the results are bit for bit gonum's (for finite B: gonum skips
// a zero element of A, which matters only when it meets an infinite or NaN B), the encoders'
// releases do not change with this package, and the products agree bit for bit whichever kernel
// a machine runs (the pure-Go one in a browser, the AVX2 one on a server). Large products are split
// by columns across goroutines, which changes no element's chain.
package sgemm

import (
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Block sizes: the kernel runs down a block of A (mc × kc, ≤ 240 KiB, in L2) with one 16-column
// panel of B (kc × 16, ≤ 16 KiB) staying in L1, for each panel of a block of B (kc × nc). A and B
// are read in place (no packing), except a last panel of fewer than 6 rows or 16 columns, copied
// into a zero-padded one; α ≠ 1 scales a copy of A.
const (
	mr    = 6
	nr    = 16
	kcMax = 256
	mcMax = 40 * mr
	ncMax = 64 * nr
)

// kernel computes one 6×16 tile of C from A (6 × kc, row stride lda) and B (kc × 16, row stride
// ldb): c[r·ldc+j] = (load ? c[r·ldc+j] : 0) + Σ_p a[r·lda+p]·b[p·ldb+j], summed in order of p.
type kernel func(kc int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, load bool)

// Kernel names the kernel that [Implementation] runs on this machine: "avx2"; "gonum" on amd64
// without AVX2, where gonum's SSE assembly is faster than the pure-Go kernel (6.7 against 9
// GFLOP/s here) and computes the same bits; "go" elsewhere (4 times gonum's speed in WebAssembly).
var Kernel = "go"

// useKernel is the kernel Implementation runs, nil for gonum's Sgemm.
var useKernel kernel = goKernel

func init() {
	switch {
	case hasAVX2:
		Kernel, useKernel = "avx2", avx2Kernel
	case gonumIsFaster:
		Kernel, useKernel = "gonum", nil
	}
}

// checkTile panics unless a, b and c hold the tile's operands (the assembly does not check).
func checkTile(kc int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	_, _, _ = a[(mr-1)*lda+kc-1], b[(kc-1)*ldb+nr-1], c[(mr-1)*ldc+nr-1] // within len, not only cap
}

func avx2Kernel(kc int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, load bool) {
	if kc < 1 {
		goKernel(kc, a, lda, b, ldb, c, ldc, load)
		return
	}
	checkTile(kc, a, lda, b, ldb, c, ldc)
	kernel6x16(kc, &a[0], lda, &b[0], ldb, &c[0], ldc, load)
}

// goKernel is the pure-Go kernel: each half row of the tile in eight scalar accumulators. The
// conversions float32(x·y) round each product before its sum, so that no compiler fuses them.
func goKernel(kc int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, load bool) {
	for r := range mr {
		ar := a[r*lda : r*lda+kc]
		for h := 0; h < nr; h += 8 {
			cr := c[r*ldc+h : r*ldc+h+8 : r*ldc+h+8]
			var c0, c1, c2, c3, c4, c5, c6, c7 float32
			if load {
				c0, c1, c2, c3, c4, c5, c6, c7 = cr[0], cr[1], cr[2], cr[3], cr[4], cr[5], cr[6], cr[7]
			}
			for p, x := range ar {
				bp := b[p*ldb+h : p*ldb+h+8 : p*ldb+h+8]
				c0 += float32(x * bp[0])
				c1 += float32(x * bp[1])
				c2 += float32(x * bp[2])
				c3 += float32(x * bp[3])
				c4 += float32(x * bp[4])
				c5 += float32(x * bp[5])
				c6 += float32(x * bp[6])
				c7 += float32(x * bp[7])
			}
			cr[0], cr[1], cr[2], cr[3], cr[4], cr[5], cr[6], cr[7] = c0, c1, c2, c3, c4, c5, c6, c7
		}
	}
}

// scratch is one goroutine's edge panels and tile, and α·A.
type scratch struct {
	a      [mr * kcMax]float32
	b      [kcMax * nr]float32
	tile   [mr * nr]float32
	scaled []float32
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// gemm sets C (m × n, stride ldc) to (load ? C : 0) + (alpha·A)·B for A m × k (stride lda) and
// B k × n (stride ldb), with kernel f, on one goroutine. m, n, k ≥ 1 and the slices are long enough.
func gemm(f kernel, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, load bool) {
	s := scratchPool.Get().(*scratch)
	defer scratchPool.Put(s)
	if alpha != 1 {
		// gonum's first rounding too: it multiplies each element of A by alpha.
		if cap(s.scaled) < m*k {
			s.scaled = make([]float32, m*k)
		}
		sa := s.scaled[:m*k]
		for i := range m {
			for p, v := range a[i*lda : i*lda+k] {
				sa[i*k+p] = alpha * v
			}
		}
		a, lda = sa, k
	}
	// Equal k blocks of at most kcMax (784 = 4 × 196, not 3 × 256 + 16).
	kb := (k + kcMax - 1) / kcMax
	kcStep := (k + kb - 1) / kb
	mFull, nFull := m-m%mr, n-n%nr
	for jc := 0; jc < n; jc += ncMax {
		nc := min(ncMax, n-jc)
		for pc := 0; pc < k; pc += kcStep {
			kc := min(kcStep, k-pc)
			ld := load || pc > 0
			if jc+nc > nFull {
				// The last, narrower panel of B, zero-padded to 16 columns.
				w := n - nFull
				for p := range kc {
					d := s.b[p*nr : p*nr+nr]
					copy(d, b[(pc+p)*ldb+nFull:(pc+p)*ldb+n])
					clear(d[w:])
				}
			}
			for ic := 0; ic < m; ic += mcMax {
				mc := min(mcMax, m-ic)
				if ic+mc > mFull {
					// The last, shorter panel of A, zero-padded to 6 rows.
					for r := range mr {
						d := s.a[r*kc : r*kc+kc]
						if i := mFull + r; i < m {
							copy(d, a[i*lda+pc:i*lda+pc+kc])
						} else {
							clear(d)
						}
					}
				}
				for jr := jc; jr < jc+nc; jr += nr {
					w := min(nr, n-jr)
					bp, ldbp := b[pc*ldb+jr:], ldb
					if w < nr {
						bp, ldbp = s.b[:kc*nr], nr
					}
					for ir := ic; ir < ic+mc; ir += mr {
						h := min(mr, m-ir)
						ap, ldap := a[ir*lda+pc:], lda
						if h < mr {
							ap, ldap = s.a[:mr*kc], kc
						}
						c0 := ir*ldc + jr
						if h == mr && w == nr {
							f(kc, ap, ldap, bp, ldbp, c[c0:], ldc, ld)
							continue
						}
						// An edge tile: through a full 6×16 tile, copied in and out.
						t := s.tile[:]
						if ld {
							for r := range h {
								copy(t[r*nr:r*nr+w], c[c0+r*ldc:c0+r*ldc+w])
							}
						}
						f(kc, ap, ldap, bp, ldbp, t, nr, ld)
						for r := range h {
							copy(c[c0+r*ldc:c0+r*ldc+w], t[r*nr:r*nr+w])
						}
					}
				}
			}
		}
	}
}

// parallelMin is the number of multiply-adds (m·n·k) from which a product is split by columns
// across GOMAXPROCS goroutines: below it the hand-off costs more than it saves. The split does
// not change any element's chain of roundings.
const parallelMin = 1 << 18

// product is gemm split by blocks of columns (multiples of 16) across up to GOMAXPROCS goroutines.
func product(f kernel, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, load bool) {
	parts := min(runtime.GOMAXPROCS(0), n/(2*nr))
	if parts < 2 || m*n*k < parallelMin {
		gemm(f, m, n, k, alpha, a, lda, b, ldb, c, ldc, load)
		return
	}
	step := (n/parts + nr - 1) &^ (nr - 1)
	var wg sync.WaitGroup
	for j0 := 0; j0 < n; j0 += step {
		j1 := min(j0+step, n)
		wg.Go(func() { gemm(f, m, j1-j0, k, alpha, a, lda, b[j0:], ldb, c[j0:], ldc, load) })
	}
	wg.Wait()
}

// Implementation is gonum's BLAS with Sgemm's untransposed products (C = αA·B + βC) computed
// by this package's kernels; every other case and every other routine is gonum's.
type Implementation struct{ gonum.Implementation }

var _ blas.Float32 = Implementation{}

// Sgemm computes C = alpha·op(A)·op(B) + beta·C. Untransposed products with valid arguments
// and m, n, k, alpha nonzero run here (C scaled by beta first, as gonum does); the rest,
// argument errors and their panics included, are gonum's.
func (impl Implementation) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if useKernel == nil || tA != blas.NoTrans || tB != blas.NoTrans || m <= 0 || n <= 0 || k <= 0 || alpha == 0 ||
		lda < k || ldb < n || ldc < n || len(a) < (m-1)*lda+k || len(b) < (k-1)*ldb+n || len(c) < (m-1)*ldc+n {
		impl.Implementation.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	if beta != 0 && beta != 1 {
		for i := range m {
			for j, v := range c[i*ldc : i*ldc+n] {
				c[i*ldc+j] = beta * v
			}
		}
	}
	product(useKernel, m, n, k, alpha, a, lda, b, ldb, c, ldc, beta != 0)
}
