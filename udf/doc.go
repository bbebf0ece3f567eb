// Package udf implements ldpsql's SQL functions on go-mysql-server: FLIP_LABEL (k-ary randomised
// response), LDP_LAPLACE (secure Laplace on a clipped scalar) and the aggregate RR_FREQUENCY (Warner
// debiasing of randomised-response labels). The mathematics lives in package mechanisms; this package
// only validates SQL arguments, calls it, and draws all randomness from crypto/rand.
//
// Every randomising function is marked non-deterministic so GMS never folds, caches or deduplicates it:
// each row gets fresh noise — except where the privacy ledger memoises a release (below).
//
// The privacy ledger. On a table a DBA protected with CALL ldp_set_budget, package udf/boundary binds
// LDP_ENCODE, LDP_ENCODE_JSON, FLIP_LABEL, LDP_LAPLACE and the aggregates PRIVATE_ACCURACY and
// RR_FREQUENCY to the ledger, enforces the analyst's roles and charges every release before any row
// leaves (its doc comment states the guarantee and what lies outside it). This package registers its
// analyzer rules (ledger.go), implements the interfaces it recognises the functions by, encodes the
// releases it hands them, and holds the ledger's procedures (budget.go: ldp_set_budget, and
// ldp_privatize's charged releases through a boundary.Collector).
//
// The short forms (short_forms.go): LDP_ENCODE(col, eps) and LDP_ENCODE_JSON(col, eps) release a column
// with the default mechanism and randomiser a DBA set for it (CALL ldp_set_default_mechanism); an
// analyzer rule rewrites them into the four-argument form just before the ledger binds, so the ledger
// and everything else see only the long form. TRAIN_NOISY_CLASSIFIER('table') takes its params from
// the table's ldp_privatize metadata.
package udf
