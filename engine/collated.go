package engine

import (
	"bytes"
	"encoding/hex"
	"fmt"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/expression"
	"github.com/dolthub/go-mysql-server/sql/expression/function/aggregation"
	"github.com/dolthub/go-mysql-server/sql/plan"
	"github.com/dolthub/go-mysql-server/sql/types"
)

// Distinctness by collation where GMS hashes string values by their bytes (collatedRule in mysql8.go
// applies these): count(DISTINCT …) counts the collation's weight strings (collationKey), sum/avg/…
// (DISTINCT …) skip a value whose weight was seen (collatedDistinct), and SELECT DISTINCT and UNION's
// distinct hash each row's insensitive strings by their weights (collatedDistinctNode, collatedUnion).

// collationKey is its child's weight string under the child's collation, hex-encoded: two values the
// collation equates have one key. It only feeds CountDistinct, which counts distinct texts of its
// arguments joined by commas (hex has none).
type collationKey struct {
	expression.UnaryExpressionStub
	collation sql.CollationID
}

var _ sql.Expression = (*collationKey)(nil)

func newCollationKey(child sql.Expression, collation sql.CollationID) *collationKey {
	return &collationKey{UnaryExpressionStub: expression.UnaryExpressionStub{Child: child}, collation: collation}
}

func (k *collationKey) Type(*sql.Context) sql.Type       { return types.LongText }
func (k *collationKey) IsNullable(ctx *sql.Context) bool { return k.Child.IsNullable(ctx) }
func (k *collationKey) String() string                   { return fmt.Sprintf("collation_key(%s)", k.Child) }
func (k *collationKey) WithChildren(_ *sql.Context, children ...sql.Expression) (sql.Expression, error) {
	if len(children) != 1 {
		return nil, sql.ErrInvalidChildrenNumber.New(k, len(children), 1)
	}
	return newCollationKey(children[0], k.collation), nil
}

func (k *collationKey) Eval(ctx *sql.Context, row sql.Row) (any, error) {
	v, err := k.Child.Eval(ctx, row)
	if err != nil {
		return nil, err
	}
	return keyOf(ctx, k.collation, v)
}

// keyOf is v's weight string under collation c, hex-encoded; NULL for NULL.
func keyOf(ctx *sql.Context, c sql.CollationID, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	s, _, err := types.ConvertToCollatedString(ctx, v, types.LongText)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := c.WriteWeightString(&b, s); err != nil {
		return nil, err
	}
	return hex.EncodeToString(b.Bytes()), nil
}

// collatedDistinct is GMS's DistinctExpression under its child's collation: its child's value the first
// time a value of its weight comes, NULL after (an aggregate ignores NULLs). The aggregation clones it
// for each group's buffer (WithChildren makes a fresh one), so what it has seen is per group.
type collatedDistinct struct {
	expression.UnaryExpressionStub
	collation sql.CollationID
	seen      map[string]struct{}
}

var _ sql.Expression = (*collatedDistinct)(nil)
var _ sql.Disposable = (*collatedDistinct)(nil)

func newCollatedDistinct(child sql.Expression, collation sql.CollationID) *collatedDistinct {
	return &collatedDistinct{UnaryExpressionStub: expression.UnaryExpressionStub{Child: child}, collation: collation}
}

func (d *collatedDistinct) Type(ctx *sql.Context) sql.Type { return d.Child.Type(ctx) }
func (d *collatedDistinct) IsNullable(*sql.Context) bool   { return true }
func (d *collatedDistinct) String() string                 { return fmt.Sprintf("DISTINCT %s", d.Child) }
func (d *collatedDistinct) Dispose(*sql.Context)           { d.seen = nil }
func (d *collatedDistinct) WithChildren(_ *sql.Context, children ...sql.Expression) (sql.Expression, error) {
	if len(children) != 1 {
		return nil, sql.ErrInvalidChildrenNumber.New(d, len(children), 1)
	}
	return newCollatedDistinct(children[0], d.collation), nil
}

func (d *collatedDistinct) Eval(ctx *sql.Context, row sql.Row) (any, error) {
	v, err := d.Child.Eval(ctx, row)
	if err != nil || v == nil {
		return nil, err
	}
	key, err := keyOf(ctx, d.collation, v)
	if err != nil {
		return nil, err
	}
	if d.seen == nil {
		d.seen = make(map[string]struct{})
	}
	if _, ok := d.seen[key.(string)]; ok {
		return nil, nil
	}
	d.seen[key.(string)] = struct{}{}
	return v, nil
}

// insensitiveCollation is the collation of an insensitive string type (isInsensitiveString), ok false
// for any other type.
func insensitiveCollation(t sql.Type) (sql.CollationID, bool) {
	if !isInsensitiveString(t) {
		return 0, false
	}
	return t.(sql.StringType).Collation(), true
}

// collatedAggregate rewrites a DISTINCT aggregate over insensitive strings (nil when e is none): the
// arguments of count(DISTINCT …) become their collation keys, and sum/avg/min/max(DISTINCT …)'s
// DistinctExpression a collatedDistinct.
func collatedAggregate(ctx *sql.Context, e sql.Expression) sql.Expression {
	switch e := e.(type) {
	case *aggregation.CountDistinct:
		children := e.Children()
		changed := false
		keys := make([]sql.Expression, len(children))
		for i, c := range children {
			keys[i] = c
			if coll, ok := insensitiveCollation(c.Type(ctx)); ok {
				keys[i], changed = newCollationKey(c, coll), true
			}
		}
		if !changed {
			return nil
		}
		// WithChildren would drop the aggregation's column id and window.
		n := *e
		n.ChildExpressions = keys
		return &n
	case *expression.DistinctExpression:
		if coll, ok := insensitiveCollation(e.Child.Type(ctx)); ok {
			return newCollatedDistinct(e.Child, coll)
		}
	}
	return nil
}

// collatedUnion is a UNION DISTINCT over insensitive strings as a collated DISTINCT over a UNION ALL,
// then its ORDER BY, OFFSET and LIMIT; nil when n is no such union. GMS's union hashes rows without their
// types, so 'x' and 'X' stayed two rows.
func collatedUnion(ctx *sql.Context, n sql.Node) sql.Node {
	s, ok := n.(*plan.SetOp)
	if !ok || s.SetOpType != plan.UnionType || !s.Distinct {
		return nil
	}
	all := *s
	all.Distinct, all.Limit, all.Offset, all.SortFields = false, nil, nil, nil
	out := collatedDistinctNode(ctx, &all)
	if out == nil {
		return nil
	}
	if len(s.SortFields) > 0 {
		out = plan.NewSort(s.SortFields, out)
	}
	if s.Offset != nil {
		out = plan.NewOffset(s.Offset, out)
	}
	if s.Limit != nil {
		out = plan.NewLimit(s.Limit, out)
	}
	return out
}

// collatedDistinctNode is a DISTINCT over n's rows by its columns' collations, nil when none of them is
// an insensitive string: GMS's Distinct hashing, per column, the collation's weight of an insensitive
// string and any other value as it is (columnKey). It keeps a class's first row, as MySQL's DISTINCT
// keeps one of its spellings.
func collatedDistinctNode(ctx *sql.Context, n sql.Node) sql.Node {
	schema := n.Schema(ctx)
	insensitive := false
	keys := make([]sql.Expression, len(schema))
	for i, c := range schema {
		coll, ok := insensitiveCollation(c.Type)
		insensitive = insensitive || ok
		keys[i] = &columnKey{index: i, width: len(schema), collation: coll, collated: ok}
	}
	if !insensitive {
		return nil
	}
	return plan.NewDistinct(n, keys...)
}

// columnKey is what a collated DISTINCT hashes of its row's column index: the hex-encoded weight string
// of an insensitive string (collated), the value itself otherwise. It reads the row by position rather
// than being a field reference, because GMS assigns a subquery's field references their positions after
// collatedRule runs, by column id, and the DISTINCT's row is its child's, whatever the ids. The position
// counts from the row's end: in a subquery GMS puts the outer query's row before the child's width
// columns.
type columnKey struct {
	index     int
	width     int
	collation sql.CollationID
	collated  bool
}

var _ sql.Expression = (*columnKey)(nil)

func (k *columnKey) Resolved() bool               { return true }
func (k *columnKey) Children() []sql.Expression   { return nil }
func (k *columnKey) IsNullable(*sql.Context) bool { return true }
func (k *columnKey) Type(*sql.Context) sql.Type   { return types.LongText }
func (k *columnKey) String() string               { return fmt.Sprintf("collation_key(column %d)", k.index) }
func (k *columnKey) WithChildren(_ *sql.Context, children ...sql.Expression) (sql.Expression, error) {
	if len(children) != 0 {
		return nil, sql.ErrInvalidChildrenNumber.New(k, len(children), 0)
	}
	return k, nil
}

func (k *columnKey) Eval(ctx *sql.Context, row sql.Row) (any, error) {
	i := len(row) - k.width + k.index
	if i < 0 {
		return nil, fmt.Errorf("collated DISTINCT: a row of %d columns, fewer than its %d", len(row), k.width)
	}
	if !k.collated {
		return row[i], nil
	}
	return keyOf(ctx, k.collation, row[i])
}
