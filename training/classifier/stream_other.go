//go:build !amd64 || purego

package classifier

// useAVX2 is false off amd64 (and with -tags purego): the pure-Go
// reference kernels of stream.go run.
const useAVX2 = false

func probSumAVX2(aux *float32, stride int, z *float32, d int, c, invb float32, q *float32, n int, acc *[8]float64) {
	panic("classifier: no assembly kernel in this build")
}

func probAxpyAVX2(aux *float32, stride int, z *float32, d int, c, invb, f float32, h *float32, n int) {
	panic("classifier: no assembly kernel in this build")
}

func logSumAVX2(aux *float32, stride int, z *float32, d int, c, invb float32, a *float32, shift float32, n int, acc *[8]float64) {
	panic("classifier: no assembly kernel in this build")
}

func logAxpyAVX2(aux *float32, stride int, z *float32, d int, c, invb float32, a *float32, shift, f float32, h *float32, n int) {
	panic("classifier: no assembly kernel in this build")
}

func dot8AVX2(x, y *float32, n int, acc *[8]float64) {
	panic("classifier: no assembly kernel in this build")
}

func distMinAVX2(aux *float32, stride int, z *float32, d int, dst *float32, n int) float32 {
	panic("classifier: no assembly kernel in this build")
}

func logTableAVX2(w, a *float32, shift float32, dst *float32, n int, acc *[8]float64) {
	panic("classifier: no assembly kernel in this build")
}
