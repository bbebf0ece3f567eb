package boundary

import (
	"fmt"
	"strings"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/expression"

	"github.com/ldpsql/ldpsql/engine"
)

// ledgerRelease is a release call bound to the ledger: LDP_ENCODE, LDP_ENCODE_JSON, FLIP_LABEL or
// LDP_LAPLACE on a protected table, with the row's unit key as hidden arguments. It is evaluated in batches (BatchRule)
// inside a ledgerGate, which charges what it releases.
type ledgerRelease struct {
	fn       string           // upper-case function name
	args     []sql.Expression // the function's arguments (no unit key); args[0] is the protected value
	units    []sql.Expression // the unit key
	row      []sql.Expression // the row's primary key, where the unit key does not identify the row (memoisation)
	keyTypes keyTypes         // the types units and row are keyed by
	table    engine.TableRef
	strict   bool // analyst: invalid values are released as the default input, never quoted in an error
	ledger   *engine.Ledger
	key      bindKey // what is released, for memoisation

	call Release // the function, which parses its parameters and encodes its releases
}

var _ sql.FunctionExpression = (*ledgerRelease)(nil)
var _ sql.NonDeterministicExpression = (*ledgerRelease)(nil)

func (r *ledgerRelease) FunctionName() string         { return strings.ToLower(r.fn) }
func (r *ledgerRelease) Description() string          { return "a release charged to the privacy ledger" }
func (r *ledgerRelease) IsNullable(*sql.Context) bool { return true }
func (r *ledgerRelease) IsNonDeterministic() bool     { return true }
func (r *ledgerRelease) Children() []sql.Expression {
	return append(append(append([]sql.Expression{}, r.args...), r.units...), r.row...)
}
func (r *ledgerRelease) BatchArgs() []sql.Expression { return r.Children() }

func (r *ledgerRelease) Type(ctx *sql.Context) sql.Type { return r.call.Type(ctx) }

func (r *ledgerRelease) Resolved() bool {
	for _, c := range r.Children() {
		if !c.Resolved() {
			return false
		}
	}
	return true
}

func (r *ledgerRelease) String() string {
	parts := make([]string, len(r.args))
	for i, a := range r.args {
		parts[i] = a.String()
	}
	units := make([]string, len(r.units))
	for i, u := range r.units {
		units[i] = u.String()
	}
	return fmt.Sprintf("%s(%s) [ledger %s, unit %s]", r.fn, strings.Join(parts, ", "), r.table, strings.Join(units, ", "))
}

func (r *ledgerRelease) WithChildren(_ *sql.Context, children ...sql.Expression) (sql.Expression, error) {
	na, nu := len(r.args), len(r.units)
	if len(children) != na+nu+len(r.row) {
		return nil, sql.ErrInvalidChildrenNumber.New(r, len(children), na+nu+len(r.row))
	}
	nr := *r
	nr.args = append([]sql.Expression{}, children[:na]...)
	nr.units = append([]sql.Expression{}, children[na:na+nu]...)
	nr.row = append([]sql.Expression{}, children[na+nu:]...)
	return &nr, nil
}

// Eval evaluates the release on one row, as a batch of one (where udf's BatchRule does not batch it).
func (r *ledgerRelease) Eval(ctx *sql.Context, row sql.Row) (any, error) {
	children := r.Children()
	args := make([]any, len(children))
	for i, c := range children {
		v, err := c.Eval(ctx, row)
		if err != nil {
			return nil, err
		}
		args[i] = v
	}
	out, err := r.EvalBatch(ctx, [][]any{args})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// EvalBatch implements udf's BatchExpression: the releases of a batch of rows (each its BatchArgs
// evaluated), memoised or charged.
func (r *ledgerRelease) EvalBatch(ctx *sql.Context, rows [][]any) ([]any, error) {
	c := collectorFrom(ctx)
	if c == nil {
		return nil, fmt.Errorf("%s on protected table %s has no ledger here: releases of protected data are allowed in SELECT, "+
			"INSERT … SELECT and CREATE TABLE … AS SELECT; nothing was released", r.fn, r.table)
	}
	b, ok := r.ledger.Budget(r.table)
	if !ok {
		return nil, fmt.Errorf("%s: table %s is no longer protected; run the statement again", r.fn, r.table)
	}
	units := make([]string, len(rows))
	own := make([][]any, len(rows))
	what := What{Source: r.key.sourceOf(ctx)}
	if len(r.row) > 0 {
		what.Rows = make([]string, len(rows))
	}
	na, nu := len(r.args), len(r.units)
	for i, a := range rows {
		u, err := engine.UnitKey(r.keyTypes.unit, a[na:na+nu]...)
		if err != nil {
			return nil, fmt.Errorf("%s on protected table %s: %w (a NULL unit_key names no unit)", r.fn, r.table, err)
		}
		units[i], own[i] = u, a[:na]
		if what.Rows != nil {
			if what.Rows[i], err = engine.UnitKey(r.keyTypes.row, a[na+nu:]...); err != nil {
				return nil, fmt.Errorf("%s on protected table %s: the row's primary key: %w", r.fn, r.table, err)
			}
		}
	}
	return r.call.ReleaseBatch(ctx, &Batch{Args: own, Units: units, What: what, Strict: r.strict, Budget: b, Collector: c})
}

// What is what a call releases, for the memo keys (engine.ReleaseDigest): the Source — the
// released column(s) or expression by identity, "" where the releases cannot be memoised — and each
// release's row within its unit (nil where every unit is one row).
type What struct {
	Source string
	Rows   []string
}

func (w What) row(i int) string {
	if w.Rows == nil {
		return ""
	}
	return w.Rows[i]
}

// Pick is w for the releases at positions idx.
func (w What) Pick(idx []int) What {
	if w.Rows == nil {
		return w
	}
	out := What{Source: w.Source, Rows: make([]string, len(idx))}
	for k, i := range idx {
		out.Rows[k] = w.Rows[i]
	}
	return out
}

// Digests are the memo keys' digests of n releases of w through mechanism (all "" where w is not
// memoisable).
func (w What) Digests(n int, mechanism, randomiser string, eps float64, k int, params ...float64) []string {
	out := make([]string, n)
	if w.Source == "" {
		return out // not memoisable: never looked up, never recorded for reuse
	}
	for i := range out {
		out[i] = engine.ReleaseDigest(w.Source, w.row(i), mechanism, randomiser, eps, k, params...)
	}
	return out
}

// invalidValue is what guarded evaluates to when the protected argument fails: an analyst gets the
// default release, not an error that would quote the value.
type invalidValue struct{}

// guarded wraps an analyst's protected argument: an error (or a panic) evaluating it becomes
// invalidValue, and the warnings it raises are dropped (a warning such as "truncated incorrect value
// 'abc'" would quote the row's data).
type guarded struct{ inner sql.Expression }

func (g *guarded) Resolved() bool                   { return g.inner.Resolved() }
func (g *guarded) String() string                   { return g.inner.String() }
func (g *guarded) Type(ctx *sql.Context) sql.Type   { return g.inner.Type(ctx) }
func (g *guarded) IsNullable(ctx *sql.Context) bool { return true }
func (g *guarded) Children() []sql.Expression       { return []sql.Expression{g.inner} }
func (g *guarded) Eval(ctx *sql.Context, row sql.Row) (v any, err error) {
	switch g.inner.(type) {
	case *expression.GetField, *expression.Literal: // neither fails nor warns
	default:
		quiet := *ctx
		quiet.Session = quietSession{ctx.Session}
		ctx = &quiet
		defer func() {
			if recover() != nil {
				v, err = invalidValue{}, nil
			}
		}()
	}
	v, err = g.inner.Eval(ctx, row)
	if err != nil {
		return invalidValue{}, nil
	}
	return v, nil
}
func (g *guarded) WithChildren(_ *sql.Context, children ...sql.Expression) (sql.Expression, error) {
	if len(children) != 1 {
		return nil, sql.ErrInvalidChildrenNumber.New(g, len(children), 1)
	}
	return &guarded{inner: children[0]}, nil
}

// quietSession is a session whose warnings are dropped.
type quietSession struct{ sql.Session }

func (quietSession) Warn(*sql.Warning) {}

// IsDefault reports whether a released value is to be released as the default input: NULL, or an
// analyst's argument that failed to evaluate.
func IsDefault(v any) bool {
	_, invalid := v.(invalidValue)
	return v == nil || invalid
}
