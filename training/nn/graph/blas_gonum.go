//go:build !openblas

package graph

import (
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/ldpsql/ldpsql/training/nn/sgemm"
)

// Without -tags openblas, gonum's blas32 runs its untransposed float32 products (the encoders'
// forward passes: ForwardBatch, so the VLM's and CLM's Encode on the server, in its plugins and in
// package client alike) through package sgemm's kernels: AVX2 assembly on amd64 CPUs that have it,
// pure Go elsewhere (WebAssembly included). Every element is the chain of roundings gonum's own
// Sgemm computes, so encodings are bit for bit what gonum gives, on any of them. Everything else
// (the transposed products of DP training, blas64) is gonum's.
func init() {
	blas32.Use(sgemm.Implementation{})
}

// BLAS names the BLAS implementation in use: gonum's, with package sgemm's float32 product and the
// kernel it runs here, no cgo (build with -tags openblas for OpenBLAS).
var BLAS = "gonum with sgemm (" + sgemm.Kernel + " kernel, no cgo)"
