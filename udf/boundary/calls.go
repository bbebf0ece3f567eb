package boundary

import (
	"github.com/dolthub/go-mysql-server/sql"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/mechanisms"
)

// What the boundary needs from the SQL functions (package udf), which implement these interfaces: it
// recognises the calls it governs by them, and leaves how a function parses its parameters and encodes
// its releases to the function.

// Call is a SQL function whose first argument is released: the boundary binds it on a protected table.
type Call interface {
	sql.Expression
	// ReleaseCall returns the function's upper-case name and its arguments; args[0] is the released one.
	ReleaseCall() (fn string, args []sql.Expression)
}

// Release is a Call evaluated row by row: LDP_ENCODE, LDP_ENCODE_JSON, FLIP_LABEL, LDP_LAPLACE.
type Release interface {
	Call
	// CheckBindable fails where the call cannot be released as written (a short form not yet expanded).
	CheckBindable() error
	// ReleaseBatch releases the rows of a batch through the statement's collector (see Batch).
	ReleaseBatch(ctx *sql.Context, b *Batch) ([]any, error)
}

// Aggregate is a Call that aggregates releases it makes by k-RR: PRIVATE_ACCURACY, RR_FREQUENCY.
type Aggregate interface {
	Call
	sql.Aggregation
	// KRRParams checks one row's parameters (its arguments after the released one): on the first row
	// (first nil) it returns the k-RR the group's rows are released with and the class it counts; on
	// every later row it fails unless they repeat the first row's.
	KRRParams(ctx *sql.Context, params []any, first *KRRParams) (*KRRParams, error)
	// KRRInput is the k-RR input (a label or bit in 0..k-1) for the released argument's value v, which
	// is neither NULL nor invalid; an error says why v is not one.
	KRRInput(ctx *sql.Context, v any, k int) (int, error)
}

// KRRParams are an Aggregate's parameters, the same on every row of a group.
type KRRParams struct {
	KRR   *mechanisms.KRR
	Class int64 // the class counted (1 for PRIVATE_ACCURACY: a correct row)
	First []any // the first row's parameters as given, for the error messages
}

// Vector is LDP_VECTOR: its children are its elements.
type Vector interface {
	sql.Expression
	IsLDPVector()
}

// ModelCall is PREDICT('name', features [, 'mechanism']): its children are its arguments, and its value
// depends on the model besides the row.
type ModelCall interface {
	sql.Expression
	// ModelIdentity names the model called name by what decides its value (its checksum and its
	// mechanism's identity), never by its name.
	ModelIdentity(ctx *sql.Context, name string) string
}

// Batched is a plan node that evaluates expressions over batches of rows (udf's batchEval), which it
// holds outside Expressions().
type Batched interface {
	sql.Node
	BatchedExpressions() []sql.Expression
}

// Batch is one batch of rows of a bound Release, for the function to release through the statement's
// collector: Args[i] are row i's own arguments evaluated (Args[i][0], the released value, is NULL or
// invalid — IsDefault — where the default input is to be released), Units[i] its unit, and What what is
// released (for the memo keys). Strict: an analyst's statement, where an invalid value is released as
// the default input rather than quoted in an error.
type Batch struct {
	Args      [][]any
	Units     []string
	What      What
	Strict    bool
	Budget    engine.Budget
	Collector *Collector
}
