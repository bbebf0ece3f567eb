//go:build openblas

package graph

/*
#cgo LDFLAGS: -lopenblas
#include <stdlib.h>
#include <string.h>

char *openblas_get_corename(void);
void openblas_set_num_threads(int);
void gotoblas_dynamic_init(void);
void gotoblas_dynamic_quit(void);

// graph_fix_openblas_core re-selects OpenBLAS's kernels when its run-time CPU
// detection (DYNAMIC_ARCH builds, as Debian's) did not recognise the CPU and
// fell back to the generic "Prescott" SSE3 kernels, as OpenBLAS 0.3.21 does on
// Intel CPUs newer than it (e.g. family 6 model 207): it then picks the
// SkylakeX (AVX-512) or Haswell (AVX2+FMA) kernels the CPU supports, through
// OpenBLAS's own OPENBLAS_CORETYPE mechanism. It does nothing when
// OPENBLAS_CORETYPE is set, when the detected core is not the fallback, or in
// builds without dynamic architecture selection (the symbols are then
// missing and linking fails: build without -tags openblas there). It runs
// from a Go init, before any BLAS call. Returns the core name in use.
static const char *graph_fix_openblas_core(void) {
	const char *core = openblas_get_corename();
	if (getenv("OPENBLAS_CORETYPE") != NULL || core == NULL || strcasecmp(core, "prescott") != 0) {
		return core;
	}
	const char *want = NULL;
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
	    __builtin_cpu_supports("avx512cd")) {
		want = "SkylakeX";
	} else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
		want = "Haswell";
	}
	if (want == NULL) {
		return core;
	}
	setenv("OPENBLAS_CORETYPE", want, 1);
	gotoblas_dynamic_quit();
	gotoblas_dynamic_init();
	unsetenv("OPENBLAS_CORETYPE");
	return openblas_get_corename();
}
*/
import "C"

import (
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/netlib/blas/netlib"
	G "gorgonia.org/gorgonia"
)

// With -tags openblas, gonum's blas32/blas64 (the VLM's Encode and Decode) and
// gorgonia (every graph-trained model) use OpenBLAS through gonum.org/v1/netlib (Debian:
// libopenblas-dev). This changes the process-wide BLAS of gonum and gorgonia.
//
// OpenBLAS is set to one thread: its idle worker threads spin (sched_yield)
// for a while after every call, which on a small machine starves the
// goroutines that run everything else (Adam, the element-wise ops, the other
// half of Encode's rows); this package parallelises across rows itself.
// Measured on 2 cores: 9.4 s per epoch with one thread, 12.8 s with two.
func init() {
	BLAS = "openblas (" + C.GoString(C.graph_fix_openblas_core()) + ", 1 thread)"
	C.openblas_set_num_threads(1)
	blas32.Use(netlib.Implementation{})
	blas64.Use(netlib.Implementation{})
	G.Use(parallelSgemm{})
}

// parallelSgemm is OpenBLAS (through netlib) with Sgemm split by columns of C
// across GOMAXPROCS goroutines, each calling single-threaded OpenBLAS, when
// the product is large enough to be worth it. Gorgonia runs the training
// graph's operations one at a time, so this is what lets a training step's
// GEMMs use every core without OpenBLAS's own (spinning) threads. The split
// depends only on the shape and GOMAXPROCS, so results are reproducible.
type parallelSgemm struct{ netlib.Implementation }

// parallelSgemmMin is the number of multiply-adds (m·n·k) from which Sgemm
// is split: below it the goroutine hand-off costs more than it saves.
const parallelSgemmMin = 1 << 18

func (p parallelSgemm) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	parts := min(runtime.GOMAXPROCS(0), n/32)
	if parts < 2 || m*n*k < parallelSgemmMin {
		p.Implementation.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	// Column blocks, multiples of 16 (one AVX-512 register of float32).
	step := (n/parts + 15) &^ 15
	var wg sync.WaitGroup
	for j0 := 0; j0 < n; j0 += step {
		j1 := min(j0+step, n)
		bj := b[j0:] // columns j0.. of B (k×n, row-major)
		if tB != blas.NoTrans {
			bj = b[j0*ldb:] // rows j0.. of the stored n×k B
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.Implementation.Sgemm(tA, tB, m, j1-j0, k, alpha, a, lda, bj, ldb, beta, c[j0:], ldc)
		}()
	}
	wg.Wait()
}

// BLAS names the BLAS implementation in use, with OpenBLAS's kernel set.
var BLAS = "openblas"
