// Package udf implements ldpsql's SQL functions on go-mysql-server: FLIP_LABEL (k-ary randomised
// response), LDP_LAPLACE (secure Laplace on a clipped scalar) and the aggregate RR_FREQUENCY (Warner
// debiasing of randomised-response labels). The mathematics lives in package mechanisms; this package
// only validates SQL arguments, calls it, and draws all randomness from crypto/rand.
//
// Every randomising function is marked non-deterministic so GMS never folds, caches or deduplicates it:
// each row gets fresh noise — except where the privacy ledger memoises a release (below).
//
// The privacy ledger (ledger.go, ledger_agg.go, ledger_prov.go, budget.go, roles.go). On a table a DBA
// protected with CALL ldp_set_budget, LDP_ENCODE, LDP_ENCODE_JSON, FLIP_LABEL, LDP_LAPLACE and the
// aggregates PRIVATE_ACCURACY and RR_FREQUENCY (which release each row's bit or label by k-RR) are bound
// by an analyzer rule to the ledger (engine.Ledger) with the row's unit key — also when they read the
// table through a derived table, view or CTE — and a gate at the top of the statement charges all its
// releases in one transaction before any row leaves; a statement that would over-spend a unit fails
// and returns nothing, and in memoise mode a repeated release — the same column (or expression) of the
// same row through the same mechanism and parameters, whatever its value — is returned from the record
// without a new charge. ldp_privatize and TRAIN_NOISY_CLASSIFIER's private validation on a protected table charge
// before anything derived from their releases leaves. The same rule enforces the roles: a DBA is root or
// a holder of SUPER; an analyst may reference a protected table's unit columns, and its other columns
// only as the released argument of those functions.
//
// The short forms (short_forms.go): LDP_ENCODE(col, eps) and LDP_ENCODE_JSON(col, eps) release a column
// with the default mechanism and randomiser a DBA set for it (CALL ldp_set_default_mechanism); an
// analyzer rule rewrites them into the four-argument form just before the ledger binds, so the ledger
// and everything else see only the long form. TRAIN_NOISY_CLASSIFIER('table') takes its params from
// the table's ldp_privatize metadata.
package udf
