//go:build !openblas

package graph

// BLAS names the BLAS implementation in use: gonum's pure-Go one (build with
// -tags openblas for OpenBLAS).
var BLAS = "gonum (pure Go)"
