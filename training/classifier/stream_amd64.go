//go:build amd64 && !purego

package classifier

import "golang.org/x/sys/cpu"

// useAVX2 reports whether the CPU (and OS) support AVX2, which the
// assembly kernels of stream_amd64.s need; without it the pure-Go
// reference runs (same results).
var useAVX2 = cpu.X86.HasAVX2

//go:noescape
func probSumAVX2(aux *float32, stride int, z *float32, d int, c, invb float32, q *float32, n int, acc *[8]float64)

//go:noescape
func probAxpyAVX2(aux *float32, stride int, z *float32, d int, c, invb, f float32, h *float32, n int)

//go:noescape
func logSumAVX2(aux *float32, stride int, z *float32, d int, c, invb float32, a *float32, shift float32, n int, acc *[8]float64)

//go:noescape
func logAxpyAVX2(aux *float32, stride int, z *float32, d int, c, invb float32, a *float32, shift, f float32, h *float32, n int)

//go:noescape
func dot8AVX2(x, y *float32, n int, acc *[8]float64)

//go:noescape
func distMinAVX2(aux *float32, stride int, z *float32, d int, dst *float32, n int) float32

//go:noescape
func logTableAVX2(w, a *float32, shift float32, dst *float32, n int, acc *[8]float64)
