//go:build amd64 && !purego

package sgemm

import "golang.org/x/sys/cpu"

// hasAVX2 reports whether the CPU (and OS) support AVX2, which the assembly kernel needs.
var hasAVX2 = cpu.X86.HasAVX2

// gonumIsFaster: without AVX2, gonum's SSE kernels beat the pure-Go one.
const gonumIsFaster = true

//go:noescape
func kernel6x16(kc int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, load bool)
