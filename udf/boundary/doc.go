// Package boundary is ldpsql's privacy boundary in SQL: on a table a DBA protected with
// CALL ldp_set_budget, it decides what an analyst's statement may read, and charges every release of
// the table's data to the privacy ledger (engine.Ledger) before any of it leaves the engine. As package
// mechanisms makes each release ε-LDP, this package makes sure that no unit is released for more than
// its budget.
//
// # What it guarantees
//
// Every LDP_ENCODE, LDP_ENCODE_JSON, FLIP_LABEL and LDP_LAPLACE whose released argument reads a
// protected table, and every row that PRIVATE_ACCURACY or RR_FREQUENCY aggregates from one, in any
// statement (a SELECT, a view, a derived table or CTE, INSERT … SELECT, CREATE TABLE … AS SELECT), is
// bound by [BindRule] to the unit of the row it reads (the table's unit columns, keyed by
// engine.UnitKey as their collation compares them; a DBA may name the unit_key) and charged by the gate that [GateRule] puts at the top of the statement: the statement
// runs to its end with its output held back, all its releases are charged in one ledger transaction,
// and only then are rows returned or written. A statement that would take any unit past its budget
// fails and returns and writes nothing; one that writes its releases into a table commits them with
// their charges (engine/ledger_tx.go). Go code that releases on its own (ldp_privatize) charges
// through a [Collector] before anything derived from its releases leaves; TRAIN_NOISY_CLASSIFIER's
// private validation is a PRIVATE_ACCURACY statement, charged like any other.
//
// # What an analyst can and cannot learn
//
// A DBA is root or a holder of the global SUPER privilege ([IsDBA]); everyone else is an analyst. On
// a protected table an analyst may reference the unit columns anywhere (they identify units and are
// not released data), and the other columns only as the released argument of a release: a column or
// LDP_VECTOR of columns for the row functions, a bounded pure expression of the row for the aggregates
// (roles.go). Every other reference — SELECT *, WHERE, JOIN … ON, GROUP BY, ORDER BY, another
// aggregate, a subquery, a view or CTE that does more than pass a column on to a release, INSERT …
// SELECT, CREATE TABLE … AS SELECT, ANALYZE TABLE, the ledger's catalog tables — fails with "access
// denied". An analyst's invalid or NULL value is released from the default input rather than quoted
// in an error, and the warnings its evaluation raises are dropped. Whether a statement is refused,
// and what it costs, is decided from what the analyst knows without the data (the statement, the
// units and rows it selects by their unit columns and primary key, and the record of earlier
// releases); the values enter only the randomisers. So an analyst learns about a unit no more than its
// budget allows.
//
// # Memoisation
//
// In a table's 'memoise' mode (the default) a release asked for again — the same column or expression
// of the same row, through the same mechanism, randomiser, ε and K — is returned as recorded, without
// fresh noise and without a charge. The memo key (engine.ReleaseDigest) names what is released, never
// its value, so whether a release is a hit never depends on the data. The price: a value changed
// after its release is not released again. A release the ledger cannot name (an expression it cannot
// pin down, a table without a primary key) is never memoised: fresh and charged every time.
//
// # Time slots
//
// An analyst's expression inside PRIVATE_ACCURACY or RR_FREQUENCY could be made slow on one branch,
// and the statement's running time would then tell the branch. It is evaluated only after the
// statement's budget and parameters are checked, and then in fixed time slots (slots.go, after
// Haeberlen, Pierce and Narayan, "Differential privacy under fire"): each fresh release gets
// ldp_release_slot_us of wall time ([SlotVariable]), and a row whose evaluation does not end within
// its slot is released from the default input, so the statement takes (fresh releases) × slot
// whatever the values.
//
// # What lies outside
//
//   - A DBA's reads of raw data are not charged, nor a release of a copy the DBA made.
//   - A value changed after its release, in memoise mode, is not released again.
//   - An evaluation that runs past its slot cannot be stopped: while it finishes, the statement's next
//     rows are released from the default input without being evaluated, so their releases (charged to
//     their own units, at their own ε) carry whether an earlier row ran late, and it competes for the
//     CPU with the statements after it. The bounds on an analyst's expression (1,000 operators, columns
//     and values; literals of 1,024 bytes) narrow this; they do not close it.
//   - On an overloaded server rows run late for want of CPU and are released from the default input,
//     which biases PRIVATE_ACCURACY towards 1/K silently (the server log tells the DBA).
//   - A DBA's statements, the row functions' released arguments (a column or LDP_VECTOR of columns)
//     and encoder plugins are not slotted.
//   - The number of rows of a table and of each unit, the schema and the unit columns are public to an
//     analyst, by design.
//
// README ("Privacy model") states these for users, and docs/security.md lists every attack tried.
//
// # What it needs from the SQL functions
//
// The boundary knows no SQL function by type: package udf implements [Release], [Aggregate],
// [Vector], [ModelCall] and [Batched] (calls.go), registers [BindRule] and [GateRule] with the
// analyzer (after its short forms are expanded), and encodes each release itself, through the
// [Batch] the boundary hands it. This package never imports udf, and engine never imports it.
package boundary
