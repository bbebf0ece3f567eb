//go:build !amd64 || purego

package sgemm

// hasAVX2 is false off amd64 (and with -tags purego): the pure-Go kernel runs.
const hasAVX2 = false

// gonumIsFaster is false: gonum's pure-Go Sgemm is slower than the pure-Go kernel.
const gonumIsFaster = false

func kernel6x16(kc int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, load bool) {
	panic("sgemm: no assembly kernel in this build")
}
