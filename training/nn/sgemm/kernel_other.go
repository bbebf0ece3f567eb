//go:build !amd64 || purego

package sgemm

// hasAVX2 is false off amd64 (and with -tags purego): the pure-Go kernel runs.
const hasAVX2 = false

func kernel6x16(kc int, a *float32, b *float32, c *float32, ldc int, load bool) {
	panic("sgemm: no assembly kernel in this build")
}

func kernel6x16fma(kc int, a *float32, b *float32, c *float32, ldc int, load bool) {
	panic("sgemm: no assembly kernel in this build")
}
