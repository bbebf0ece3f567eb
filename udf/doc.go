// Package udf implements ldpsql's SQL functions on go-mysql-server: FLIP_LABEL (k-ary randomised
// response), LDP_LAPLACE (secure Laplace on a clipped scalar) and the aggregate RR_FREQUENCY (Warner
// debiasing of randomised-response labels). The mathematics lives in package mechanisms; this package
// only validates SQL arguments, calls it, and draws all randomness from crypto/rand.
//
// Every randomising function is marked non-deterministic so GMS never folds, caches or deduplicates it:
// each row gets fresh noise.
package udf
