//go:build openblas

package graph

import (
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/netlib/blas/netlib"
)

func TestParallelSgemmMatchesOpenBLAS(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	rnd := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(r.NormFloat64())
		}
		return s
	}
	for _, sh := range [][3]int{{64, 400, 784}, {400, 784, 64}, {64, 150, 400}, {7, 33, 5}, {64, 8, 50}, {1, 1000, 300}} {
		m, n, k := sh[0], sh[1], sh[2]
		for _, tA := range []blas.Transpose{blas.NoTrans, blas.Trans} {
			for _, tB := range []blas.Transpose{blas.NoTrans, blas.Trans} {
				lda, ldb := k, n
				if tA == blas.Trans {
					lda = m
				}
				if tB == blas.Trans {
					ldb = k
				}
				a, b := rnd(m*k), rnd(k*n)
				c0 := rnd(m * n)
				c1 := append([]float32(nil), c0...)
				netlib.Implementation{}.Sgemm(tA, tB, m, n, k, 1.5, a, lda, b, ldb, 0.5, c0, n)
				parallelSgemm{}.Sgemm(tA, tB, m, n, k, 1.5, a, lda, b, ldb, 0.5, c1, n)
				for i := range c0 {
					if d := c0[i] - c1[i]; d > 1e-3 || d < -1e-3 {
						t.Fatalf("%v %v %dx%dx%d: element %d: %v vs %v", tA, tB, m, n, k, i, c0[i], c1[i])
					}
				}
			}
		}
	}
}
