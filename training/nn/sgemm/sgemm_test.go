package sgemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// kernels are the kernels this machine can run, by name.
func kernels() map[string]kernel {
	ks := map[string]kernel{"go": goKernel}
	if hasAVX2 {
		ks["avx2"] = avx2Kernel
	}
	return ks
}

// matrix returns r × c values (stride ld ≥ c) with about one in five zero, some negative, of
// magnitudes over a few binades; the padding past c holds NaN, which must never be read.
func matrix(rng *rand.Rand, r, c, ld int) []float32 {
	m := make([]float32, (r-1)*ld+c)
	for i := range m {
		if i%ld >= c {
			m[i] = float32(math.NaN())
			continue
		}
		if rng.IntN(5) > 0 {
			m[i] = float32(rng.NormFloat64() * math.Exp2(float64(rng.IntN(7)-3)))
		}
	}
	return m
}

type shape struct{ m, n, k, lda, ldb, ldc int }

func shapes() []shape {
	var ss []shape
	for _, m := range []int{1, 5, 6, 7, 13, 121, 256} {
		for _, n := range []int{1, 8, 15, 16, 17, 50, 150} {
			for _, k := range []int{1, 7, 16, 257, 784} {
				ss = append(ss, shape{m, n, k, k, n, n})
			}
		}
	}
	// Strides past the row lengths, a B wider than one block of columns, an A taller than one block of rows, and the VLM's first layer.
	return append(ss, shape{9, 19, 23, 31, 20, 25}, shape{70, 1100, 300, 300, 1103, 1100}, shape{250, 33, 600, 611, 40, 37}, shape{256, 400, 784, 784, 400, 400})
}

// Untransposed products agree bit for bit with gonum's Sgemm, for every kernel, α and β, odd
// sizes, strides and block edges included; C's padding is left alone.
func TestSgemmMatchesGonumBitForBit(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range shapes() {
		a := matrix(rng, s.m, s.k, s.lda)
		b := matrix(rng, s.k, s.n, s.ldb)
		c0 := matrix(rng, s.m, s.n, s.ldc)
		for _, ab := range [][2]float32{{1, 0}, {1, 1}, {-0.7, 0.3}} {
			want := append([]float32(nil), c0...)
			gonum.Implementation{}.Sgemm(blas.NoTrans, blas.NoTrans, s.m, s.n, s.k, ab[0], a, s.lda, b, s.ldb, ab[1], want, s.ldc)
			for name, f := range kernels() {
				saved := useKernel
				useKernel = f
				got := append([]float32(nil), c0...)
				Implementation{}.Sgemm(blas.NoTrans, blas.NoTrans, s.m, s.n, s.k, ab[0], a, s.lda, b, s.ldb, ab[1], got, s.ldc)
				useKernel = saved
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s kernel, %+v, α %v β %v: C[%d] = %v, gonum %v", name, s, ab[0], ab[1], i, got[i], want[i])
					}
				}
			}
		}
	}
}

// The product is numerically sound on its own terms: within k·2⁻²³ of the exact product relative
// to Σ|a||b| (the standard bound for recursive summation), against a float64 reference.
func TestSgemmAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, s := range []shape{{7, 17, 1000, 1000, 17, 17}, {256, 150, 784, 784, 150, 150}, {13, 50, 3, 3, 50, 50}} {
		a := matrix(rng, s.m, s.k, s.lda)
		b := matrix(rng, s.k, s.n, s.ldb)
		for name, f := range kernels() {
			c := make([]float32, s.m*s.n)
			gemm(f, s.m, s.n, s.k, 1, a, s.lda, b, s.ldb, c, s.ldc, false)
			for i := range s.m {
				for j := range s.n {
					var ref, mag float64
					for p := range s.k {
						x := float64(a[i*s.lda+p]) * float64(b[p*s.ldb+j])
						ref += x
						mag += math.Abs(x)
					}
					if e := math.Abs(float64(c[i*s.ldc+j]) - ref); e > float64(s.k)*0x1p-23*mag+1e-30 {
						t.Fatalf("%s kernel, %+v: C[%d,%d] = %v, exact %v (Σ|ab| %v)", name, s, i, j, c[i*s.ldc+j], ref, mag)
					}
				}
			}
		}
	}
}

// The assembly and pure-Go kernels agree bit for bit, tile by tile, with and without loading C,
// splits across goroutines included.
func TestKernelsAgree(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernel on this machine or build")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, kc := range []int{0, 1, 2, 5, 255, 256} {
		lda, ldb := kc+3, nr+5
		a := matrix(rng, mr, max(kc, 1), lda)
		b := matrix(rng, max(kc, 1), nr, ldb)
		for _, load := range []bool{false, true} {
			c0 := matrix(rng, mr, nr, 21)
			x, y := append([]float32(nil), c0...), append([]float32(nil), c0...)
			goKernel(kc, a, lda, b, ldb, x, 21, load)
			avx2Kernel(kc, a, lda, b, ldb, y, 21, load)
			for i := range x {
				if math.Float32bits(x[i]) != math.Float32bits(y[i]) && !(math.IsNaN(float64(x[i])) && math.IsNaN(float64(y[i]))) {
					t.Fatalf("kc %d, load %v: C[%d] Go %v, AVX2 %v", kc, load, i, x[i], y[i])
				}
			}
		}
	}
	for _, s := range []shape{{256, 400, 784, 784, 400, 400}, {33, 1000, 65, 65, 1000, 1000}} {
		a := matrix(rng, s.m, s.k, s.lda)
		b := matrix(rng, s.k, s.n, s.ldb)
		x, y := make([]float32, s.m*s.ldc), make([]float32, s.m*s.ldc)
		gemm(goKernel, s.m, s.n, s.k, 1, a, s.lda, b, s.ldb, x, s.ldc, false)
		product(avx2Kernel, s.m, s.n, s.k, 1, a, s.lda, b, s.ldb, y, s.ldc, false)
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
				t.Fatalf("%+v: C[%d] Go %v, AVX2 %v", s, i, x[i], y[i])
			}
		}
	}
}

// Transposed products, zero sizes, α = 0 and bad arguments are gonum's (its panics included).
func TestSgemmDelegates(t *testing.T) {
	a := []float32{1, 2, 3, 4, 5, 6}
	b := []float32{1, 0, -1, 2, 0.5, 3}
	for _, tr := range []struct {
		a, b     blas.Transpose
		lda, ldb int
	}{{blas.Trans, blas.NoTrans, 2, 2}, {blas.NoTrans, blas.Trans, 3, 3}} {
		want, got := make([]float32, 4), make([]float32, 4)
		gonum.Implementation{}.Sgemm(tr.a, tr.b, 2, 2, 3, 1, a, tr.lda, b, tr.ldb, 0, want, 2)
		Implementation{}.Sgemm(tr.a, tr.b, 2, 2, 3, 1, a, tr.lda, b, tr.ldb, 0, got, 2)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%v: %v, gonum %v", tr, got, want)
		}
	}
	c := []float32{7, 8}
	Implementation{}.Sgemm(blas.NoTrans, blas.NoTrans, 1, 2, 3, 0, a, 3, b, 2, 2, c, 2)
	if c[0] != 14 || c[1] != 16 {
		t.Errorf("α = 0, β = 2: %v", c)
	}
	defer func() {
		if r := recover(); r == nil {
			t.Error("a short A did not panic")
		}
	}()
	Implementation{}.Sgemm(blas.NoTrans, blas.NoTrans, 2, 2, 3, 1, a[:5], 3, b, 2, 0, c, 2)
}

var sink float32

// BenchmarkSgemm compares the kernels on the VLM encoder's first layer for one 256-row chunk
// (256 × 784 by 784 × 400): GFLOP/s is 2·m·n·k per second.
//
//	go test -run XXX -bench Sgemm -cpu 1 ./training/nn/sgemm/
func BenchmarkSgemm(b *testing.B) {
	const m, n, k = 256, 400, 784
	rng := rand.New(rand.NewPCG(7, 8))
	x, w, c := matrix(rng, m, k, k), matrix(rng, k, n, n), make([]float32, m*n)
	run := func(b *testing.B, f func()) {
		for range b.N {
			f()
		}
		b.ReportMetric(2*m*n*k*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		sink = c[0]
	}
	b.Run("gonum", func(b *testing.B) {
		run(b, func() {
			gonum.Implementation{}.Sgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, x, k, w, n, 0, c, n)
		})
	})
	ks := kernels()
	for _, name := range []string{"go", "avx2"} {
		if f, ok := ks[name]; ok {
			b.Run(name, func(b *testing.B) { run(b, func() { product(f, m, n, k, 1, x, k, w, n, c, n, false) }) })
		}
	}
}

// The assembly kernel's operands are checked against their lengths (not their capacities) first.
func TestAVX2KernelChecksLengths(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernel on this machine or build")
	}
	a, b, c := make([]float32, mr*4), make([]float32, 4*nr), make([]float32, mr*nr)
	for name, f := range map[string]func(){
		"short A": func() { avx2Kernel(4, a[:mr*4-1], 4, b, nr, c, nr, false) },
		"short B": func() { avx2Kernel(4, a, 4, b[:4*nr-1], nr, c, nr, false) },
		"short C": func() { avx2Kernel(4, a, 4, b, nr, c[:mr*nr-1], nr, false) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
