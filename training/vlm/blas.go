package vlm

import "github.com/ldpsql/ldpsql/training/nn/graph"

// BLAS names the BLAS implementation in use (chosen process-wide by package nn/graph's build: -tags
// openblas for OpenBLAS).
var BLAS = graph.BLAS
