// Package sgemm is a float32 matrix product C = A·B (row-major, no transposes) with an AVX2
// assembly kernel on amd64 and a pure-Go kernel elsewhere (GOARCH=wasm included, or with
// -tags purego), packaged as a gonum BLAS ([Implementation]) so that blas32.Use routes the
// forward passes of the encoders through it.
//
// The product is blocked and packed as in GotoBLAS: B in panels of 16 columns, A in panels of 6
// rows, and a 6×16 register-blocked kernel (12 AVX2 accumulators). Every element of C is the same
// chain of roundings whichever kernel runs, however the product is blocked or split and whatever
// row of a batch it is: c = (…((c₀ + a₀b₀) + a₁b₁) + …) + a_{k−1}b_{k−1}, each product rounded to
// float32 and then each sum (a multiply then an add, no fused multiply-add). That is also the
// chain gonum's Sgemm computes, so the results are bit for bit gonum's (for finite B: gonum skips
// a zero element of A, which matters only when it meets an infinite or NaN B), the encoders'
// releases do not change with this package, and a client on any architecture (the pure-Go kernel
// in a browser) releases exactly what a server on another computes.
package sgemm

import (
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Block sizes: a packed B block (kc × nc, ≤ 1 MiB) stays in L2, a packed 16-column panel of it
// (kc × 16, ≤ 16 KiB) in L1 while the kernel runs down a packed A block (mc × kc, ≤ 120 KiB).
const (
	mr    = 6
	nr    = 16
	kcMax = 256
	mcMax = 20 * mr
	ncMax = 64 * nr
)

// kernel computes one 6×16 tile of C from a packed A panel (a[p·6+r]) and a packed B panel
// (b[p·16+j]), p < kc: c[r·ldc+j] = (load ? c[r·ldc+j] : 0) + Σ_p a[p·6+r]·b[p·16+j], in order of p.
type kernel func(kc int, a, b, c []float32, ldc int, load bool)

// Kernel names the kernel that [Implementation] runs on this machine: "avx2" or "go".
var Kernel = "go"

var useKernel kernel = goKernel

func init() {
	if hasAVX2 {
		Kernel, useKernel = "avx2", avx2Kernel
	}
}

func avx2Kernel(kc int, a, b, c []float32, ldc int, load bool) {
	_, _, _ = a[:mr*kc], b[:nr*kc], c[(mr-1)*ldc+nr-1] // the assembly reads and writes within these
	kernel6x16(kc, &a[0], &b[0], &c[0], ldc, load)
}

// avx2FMAKernel is the assembly kernel with fused multiply-adds: not used (it rounds differently
// from gonum and from the pure-Go kernel), kept to measure what the separate rounding costs.
func avx2FMAKernel(kc int, a, b, c []float32, ldc int, load bool) {
	_, _, _ = a[:mr*kc], b[:nr*kc], c[(mr-1)*ldc+nr-1]
	kernel6x16fma(kc, &a[0], &b[0], &c[0], ldc, load)
}

// goKernel is the pure-Go kernel: each half row of the tile in eight scalar accumulators. The
// conversions float32(x·y) round each product before its sum, so that no compiler fuses them.
func goKernel(kc int, a, b, c []float32, ldc int, load bool) {
	a, b = a[:mr*kc], b[:nr*kc]
	for r := range mr {
		for h := 0; h < nr; h += 8 {
			cr := c[r*ldc+h : r*ldc+h+8 : r*ldc+h+8]
			var c0, c1, c2, c3, c4, c5, c6, c7 float32
			if load {
				c0, c1, c2, c3, c4, c5, c6, c7 = cr[0], cr[1], cr[2], cr[3], cr[4], cr[5], cr[6], cr[7]
			}
			for p := range kc {
				x := a[p*mr+r]
				bp := b[p*nr+h : p*nr+h+8 : p*nr+h+8]
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

// packs are the packing buffers of one goroutine's product.
type packs struct {
	a, b []float32
	tile [mr * nr]float32
}

var packPool = sync.Pool{New: func() any {
	return &packs{a: make([]float32, mcMax*kcMax), b: make([]float32, kcMax*ncMax)}
}}

// gemm sets C (m × n, stride ldc) to (load ? C : 0) + (alpha·A)·B for A m × k (stride lda) and
// B k × n (stride ldb), with kernel f, on one goroutine. m, n, k ≥ 1 and the slices are long enough.
func gemm(f kernel, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, load bool) {
	ps := packPool.Get().(*packs)
	defer packPool.Put(ps)
	// Equal k blocks of at most kcMax (784 = 4 × 196, not 3 × 256 + 16).
	kb := (k + kcMax - 1) / kcMax
	kcStep := (k + kb - 1) / kb
	for jc := 0; jc < n; jc += ncMax {
		nc := min(ncMax, n-jc)
		for pc := 0; pc < k; pc += kcStep {
			kc := min(kcStep, k-pc)
			packB(ps.b, b[pc*ldb+jc:], ldb, kc, nc)
			ld := load || pc > 0
			for ic := 0; ic < m; ic += mcMax {
				mc := min(mcMax, m-ic)
				packA(ps.a, a[ic*lda+pc:], lda, mc, kc, alpha)
				for jr := 0; jr < nc; jr += nr {
					bp := ps.b[jr*kc : (jr+nr)*kc]
					w := min(nr, nc-jr)
					for ir := 0; ir < mc; ir += mr {
						ap := ps.a[ir*kc : (ir+mr)*kc]
						h := min(mr, mc-ir)
						c0 := (ic+ir)*ldc + jc + jr
						if h == mr && w == nr {
							f(kc, ap, bp, c[c0:c0+(mr-1)*ldc+nr], ldc, ld)
							continue
						}
						// An edge tile: through a full 6×16 tile, copied in and out.
						t := ps.tile[:]
						if ld {
							for r := range h {
								copy(t[r*nr:r*nr+w], c[c0+r*ldc:c0+r*ldc+w])
							}
						}
						f(kc, ap, bp, t, nr, ld)
						for r := range h {
							copy(c[c0+r*ldc:c0+r*ldc+w], t[r*nr:r*nr+w])
						}
					}
				}
			}
		}
	}
}

// packB copies the kc × nc block of b (stride ldb) into dst as 16-column panels, each kc × 16
// row-major, the last one padded with zeros.
func packB(dst, b []float32, ldb, kc, nc int) {
	for jr := 0; jr < nc; jr += nr {
		w := min(nr, nc-jr)
		d := dst[jr*kc : (jr+nr)*kc]
		for p := range kc {
			dp := d[p*nr : p*nr+nr]
			copy(dp, b[p*ldb+jr:p*ldb+jr+w])
			clear(dp[w:])
		}
	}
}

// packA copies alpha times the mc × kc block of a (stride lda) into dst as 6-row panels, each
// stored by columns (6 values per p), the last one padded with zero rows. The product alpha·a is
// gonum's first rounding too.
func packA(dst, a []float32, lda, mc, kc int, alpha float32) {
	for ir := 0; ir < mc; ir += mr {
		d := dst[ir*kc : (ir+mr)*kc]
		for r := range mr {
			if ir+r >= mc {
				for p := range kc {
					d[p*mr+r] = 0
				}
				continue
			}
			row := a[(ir+r)*lda : (ir+r)*lda+kc]
			if alpha == 1 {
				for p, v := range row {
					d[p*mr+r] = v
				}
			} else {
				for p, v := range row {
					d[p*mr+r] = alpha * v
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
	if tA != blas.NoTrans || tB != blas.NoTrans || m <= 0 || n <= 0 || k <= 0 || alpha == 0 ||
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
