package engine

import (
	"fmt"
	"strings"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/expression"
)

// The primary key of a table is exposed to GMS as an index, so that the planner pushes equality and range
// filters on it (WHERE id = 5, id BETWEEN 10 AND 20, id IN (...)) down into the DuckDB query instead of
// scanning the whole table. DuckDB's ART index on the primary key then answers them.

var _ sql.IndexAddressableTable = (*Table)(nil)
var _ sql.IndexedTable = (*indexedTable)(nil)

// primaryIndex is the PRIMARY index of a table.
type primaryIndex struct {
	t     *Table
	exprs []sql.Expression
}

var _ sql.Index = (*primaryIndex)(nil)

func (t *Table) primaryIndex() *primaryIndex {
	schema := t.def.schema
	if len(schema.PkOrdinals) == 0 {
		return nil
	}
	idx := &primaryIndex{t: t}
	for _, ord := range schema.PkOrdinals {
		col := schema.Schema[ord]
		idx.exprs = append(idx.exprs, expression.NewGetFieldWithTable(ord, 0, col.Type, t.db.name, t.def.name, col.Name, col.Nullable))
	}
	return idx
}

// GetIndexes implements sql.IndexAddressable.
func (t *Table) GetIndexes(*sql.Context) ([]sql.Index, error) {
	if idx := t.primaryIndex(); idx != nil {
		return []sql.Index{idx}, nil
	}
	return nil, nil
}

// IndexedAccess implements sql.IndexAddressable.
func (t *Table) IndexedAccess(_ *sql.Context, lookup sql.IndexLookup) sql.IndexedTable {
	if _, ok := lookup.Index.(*primaryIndex); !ok {
		return nil
	}
	return &indexedTable{Table: t, lookup: lookup}
}

// PreciseMatch implements sql.IndexAddressable: the rows are exactly the range's, so GMS need not filter
// them again (on a collated key, collatedLookup keeps those of DuckDB's that are).
func (t *Table) PreciseMatch() bool { return true }

// hasCollatedKey reports whether the primary key has an insensitive string column (mysql8.go).
func (t *Table) hasCollatedKey() bool {
	for _, i := range t.def.schema.PkOrdinals {
		if isInsensitiveString(t.def.schema.Schema[i].Type) {
			return true
		}
	}
	return false
}

// keyColumns are the primary key's columns.
func (t *Table) keyColumns() sql.Schema {
	var out sql.Schema
	for _, i := range t.def.schema.PkOrdinals {
		out = append(out, t.def.schema.Schema[i])
	}
	return out
}

// collatedLookup keeps the rows of a lookup by a collated key (read with the key's columns after the
// width the scan returns) whose key is in one of the lookup's ranges as GMS compares it: DuckDB's
// predicate (rangePredicate) is only a superset, and a join by the key trusts the lookup's rows.
type collatedLookup struct {
	rows   *rowIter
	lookup sql.IndexLookup
	keys   sql.Schema
	width  int
}

func (c *collatedLookup) Next(ctx *sql.Context) (sql.Row, error) {
	for {
		row, err := c.rows.Next(ctx)
		if err != nil {
			return nil, err
		}
		in, err := inRanges(ctx, c.lookup, c.keys, row[c.width:])
		if err != nil {
			return nil, err
		}
		if in {
			return row[:c.width], nil
		}
	}
}

func (c *collatedLookup) Close(ctx *sql.Context) error { return c.rows.Close(ctx) }

// inRanges reports whether key, the values of the key's columns, is in one of lookup's ranges, compared
// as the columns' types (and so collations) compare.
func inRanges(ctx *sql.Context, lookup sql.IndexLookup, keys sql.Schema, key sql.Row) (bool, error) {
	if lookup.IsEmptyRange {
		return false, nil
	}
	ranges, ok := lookup.Ranges.(sql.MySQLRangeCollection)
	if !ok {
		return false, fmt.Errorf("unsupported index lookup %T", lookup.Ranges)
	}
next:
	for _, r := range ranges {
		for j, col := range r {
			in, err := inColumnRange(ctx, keys[j].Type, col, key[j])
			if err != nil {
				return false, err
			}
			if !in {
				continue next
			}
		}
		return true, nil
	}
	return false, nil
}

// inColumnRange reports whether v is in one column's range r (a NULL is below every value).
func inColumnRange(ctx *sql.Context, typ sql.Type, r sql.MySQLRangeColumnExpr, v any) (bool, error) {
	cmp := func(key any) (int, error) { return typ.Compare(ctx, v, key) }
	switch lo := r.LowerBound.(type) {
	case sql.BelowNull:
	case sql.AboveNull:
		if v == nil {
			return false, nil
		}
	case sql.Below:
		if c, err := cmp(lo.Key); err != nil || v == nil || c < 0 {
			return false, err
		}
	case sql.Above:
		if c, err := cmp(lo.Key); err != nil || v == nil || c <= 0 {
			return false, err
		}
	case sql.AboveAll:
		return false, nil
	default:
		return false, fmt.Errorf("unsupported range bound %T", lo)
	}
	switch hi := r.UpperBound.(type) {
	case sql.AboveAll:
		return true, nil
	case sql.AboveNull:
		return v == nil, nil
	case sql.BelowNull:
		return false, nil
	case sql.Below:
		c, err := cmp(hi.Key)
		return err == nil && (v == nil || c < 0), err
	case sql.Above:
		c, err := cmp(hi.Key)
		return err == nil && (v == nil || c <= 0), err
	default:
		return false, fmt.Errorf("unsupported range bound %T", hi)
	}
}

func (i *primaryIndex) ID() string       { return "PRIMARY" }
func (i *primaryIndex) Database() string { return i.t.db.name }
func (i *primaryIndex) Table() string    { return i.t.def.name }
func (i *primaryIndex) Expressions() []string {
	out := make([]string, len(i.exprs))
	for j, e := range i.exprs {
		out[j] = e.String()
	}
	return out
}
func (i *primaryIndex) IsUnique() bool                        { return true }
func (i *primaryIndex) IsSpatial() bool                       { return false }
func (i *primaryIndex) IsFullText() bool                      { return false }
func (i *primaryIndex) IsVector() bool                        { return false }
func (i *primaryIndex) Comment() string                       { return "" }
func (i *primaryIndex) IndexType() string                     { return "BTREE" }
func (i *primaryIndex) IsGenerated() bool                     { return false }
func (i *primaryIndex) PrefixLengths() []uint16               { return nil }
func (i *primaryIndex) CanSupportOrderBy(sql.Expression) bool { return false }
func (i *primaryIndex) CanSupport(_ *sql.Context, ranges ...sql.Range) bool {
	for _, r := range ranges {
		if _, ok := r.(sql.MySQLRange); !ok {
			return false
		}
	}
	return true
}
func (i *primaryIndex) ColumnExpressionTypes(ctx *sql.Context) []sql.ColumnExpressionType {
	out := make([]sql.ColumnExpressionType, len(i.exprs))
	for j, e := range i.exprs {
		out[j] = sql.ColumnExpressionType{Expression: e.String(), Type: e.Type(ctx)}
	}
	return out
}

// indexedTable is a Table scan restricted to an index lookup.
type indexedTable struct {
	*Table
	lookup sql.IndexLookup
}

// LookupPartitions implements sql.IndexedTable.
func (it *indexedTable) LookupPartitions(_ *sql.Context, lookup sql.IndexLookup) (sql.PartitionIter, error) {
	return sql.PartitionsToPartitionIter(lookupPartition{lookup}), nil
}

// WithProjections keeps the lookup when GMS prunes columns.
func (it *indexedTable) WithProjections(ctx *sql.Context, colNames []string) (sql.Table, error) {
	t, err := it.Table.WithProjections(ctx, colNames)
	if err != nil {
		return nil, err
	}
	return &indexedTable{Table: t.(*Table), lookup: it.lookup}, nil
}

type lookupPartition struct{ lookup sql.IndexLookup }

func (lookupPartition) Key() []byte { return []byte("lookup") }

// rangePredicate turns an index lookup into a DuckDB WHERE clause with parameters: OR over the ranges,
// AND over the key columns of each. On a key with an insensitive string column it gives a superset of the
// range's rows, which collatedLookup then filters: see collatedPoint. extra, when not "", is a
// second WHERE clause whose rows are added to the first's (they never overlap).
func (t *Table) rangePredicate(ctx *sql.Context, lookup sql.IndexLookup) (where string, args []any, extra string, extraArgs []any, err error) {
	if lookup.IsEmptyRange {
		return "FALSE", nil, "", nil, nil
	}
	ranges, ok := lookup.Ranges.(sql.MySQLRangeCollection)
	if !ok {
		return "", nil, "", nil, fmt.Errorf("unsupported index lookup %T on %q", lookup.Ranges, t.def.name)
	}
	schema := t.def.schema
	var ors []string
	collatedPoints := false
	for _, r := range ranges {
		var ands []string
		for j, colExpr := range r {
			if j >= len(schema.PkOrdinals) {
				return "", nil, "", nil, fmt.Errorf("index lookup on %q has more columns than its primary key", t.def.name)
			}
			col := schema.Schema[schema.PkOrdinals[j]]
			var cond string
			var condArgs []any
			if isInsensitiveString(col.Type) {
				cond, condArgs = collatedPoint(quoteIdent(col.Name), colExpr)
				collatedPoints = collatedPoints || cond != ""
			} else if cond, condArgs, err = cutPredicate(ctx, quoteIdent(col.Name), col.Type, colExpr); err != nil {
				return "", nil, "", nil, err
			}
			if cond != "" {
				ands = append(ands, cond)
				args = append(args, condArgs...)
			}
		}
		if len(ands) == 0 {
			return "", nil, "", nil, nil // this range is everything
		}
		ors = append(ors, "("+strings.Join(ands, " AND ")+")")
	}
	if len(ors) == 0 {
		return "FALSE", nil, "", nil, nil
	}
	where = strings.Join(ors, " OR ")
	if collatedPoints {
		var exotic []string
		for _, i := range schema.PkOrdinals {
			if col := schema.Schema[i]; isInsensitiveString(col.Type) {
				exotic = append(exotic, quoteIdent(col.Name)+" GLOB '*[! -~]*'") // 4x as fast as regexp_matches
			}
		}
		extra, extraArgs = "("+strings.Join(exotic, " OR ")+") AND NOT ("+where+")", args
	}
	return where, args, extra, extraArgs, nil
}

// collatedPoint is the DuckDB predicate for a point of an insensitive string key column, "" (all rows)
// for any other range. DuckDB answers lower(strip_accents(col)) = lower(strip_accents(?)) from the key's
// unique index (uniqueIndexFor); for a value of printable ASCII characters it finds every such row the
// collation equates with it (GMS's utf8mb4_0900_ai_ci weighs them as lower() does:
// TestASCIIWeighsAsLower). A row with other characters may equal it in ways that expression does not
// see ('ａ', full-width, is 'a'; control characters all weigh the same), so rangePredicate adds those
// rows, found by a scan inside DuckDB; the point of any other value is not narrowed at all.
func collatedPoint(col string, r sql.MySQLRangeColumnExpr) (string, []any) {
	lo, ok1 := r.LowerBound.(sql.Below)
	hi, ok2 := r.UpperBound.(sql.Above)
	if !ok1 || !ok2 {
		return "", nil
	}
	v, ok := lo.Key.(string)
	if w, ok2 := hi.Key.(string); !ok || !ok2 || v != w || !isPrintableASCII(v) {
		return "", nil
	}
	return "lower(strip_accents(" + col + ")) = lower(strip_accents(?))", []any{v}
}

func isPrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// cutPredicate is the predicate for one column's range, "" when it is unbounded.
func cutPredicate(ctx *sql.Context, col string, typ sql.Type, r sql.MySQLRangeColumnExpr) (string, []any, error) {
	var conds []string
	var args []any
	includesNull := false
	switch lo := r.LowerBound.(type) {
	case sql.BelowNull:
		includesNull = true
	case sql.AboveNull:
	case sql.Below:
		v, err := toDuck(ctx, typ, lo.Key)
		if err != nil {
			return "", nil, err
		}
		conds, args = append(conds, col+" >= ?"), append(args, param(v))
	case sql.Above:
		v, err := toDuck(ctx, typ, lo.Key)
		if err != nil {
			return "", nil, err
		}
		conds, args = append(conds, col+" > ?"), append(args, param(v))
	case sql.AboveAll:
		return "FALSE", nil, nil
	default:
		return "", nil, fmt.Errorf("unsupported range bound %T", lo)
	}
	switch hi := r.UpperBound.(type) {
	case sql.AboveAll:
		if includesNull {
			return "", nil, nil
		}
		if len(conds) == 0 {
			conds = append(conds, col+" IS NOT NULL")
		}
	case sql.AboveNull:
		if includesNull {
			return col + " IS NULL", nil, nil
		}
		return "FALSE", nil, nil
	case sql.BelowNull:
		return "FALSE", nil, nil
	case sql.Below:
		v, err := toDuck(ctx, typ, hi.Key)
		if err != nil {
			return "", nil, err
		}
		conds, args = append(conds, col+" < ?"), append(args, param(v))
	case sql.Above:
		v, err := toDuck(ctx, typ, hi.Key)
		if err != nil {
			return "", nil, err
		}
		conds, args = append(conds, col+" <= ?"), append(args, param(v))
	default:
		return "", nil, fmt.Errorf("unsupported range bound %T", hi)
	}
	cond := strings.Join(conds, " AND ")
	if includesNull {
		cond = "(" + col + " IS NULL OR " + cond + ")"
	}
	return cond, args, nil
}

// Secondary indexes are accepted and not kept: CREATE INDEX, ALTER TABLE … ADD INDEX and an INDEX
// clause of CREATE TABLE succeed with a warning, so that clients which create them as a matter of course
// (pandas' to_sql for its index column, sysbench, ORMs' migrations) work. DuckDB scans columns and
// answers a filter on any of them quickly without one. A UNIQUE index is refused, since ignoring it would silently drop a constraint.

var _ sql.IndexAlterableTable = (*Table)(nil)

// warnIndexIgnored is the warning's code: MySQL's ER_UNSUPPORTED_EXTENSION.
const warnIndexIgnored = 1112

// CreateIndex implements sql.IndexAlterableTable.
func (t *Table) CreateIndex(ctx *sql.Context, idx sql.IndexDef) error {
	if idx.Constraint != sql.IndexConstraint_None {
		kind := map[sql.IndexConstraint]string{sql.IndexConstraint_Unique: "UNIQUE", sql.IndexConstraint_Fulltext: "FULLTEXT",
			sql.IndexConstraint_Spatial: "SPATIAL", sql.IndexConstraint_Vector: "VECTOR", sql.IndexConstraint_Primary: "PRIMARY"}[idx.Constraint]
		return fmt.Errorf("table %q: %s index %q is not supported: ldpsql keeps no secondary indexes, and ignoring it would drop what it means (a PRIMARY KEY given with the table is kept)",
			t.def.name, kind, idx.Name)
	}
	cols := make([]string, len(idx.Columns))
	for i, c := range idx.Columns {
		cols[i] = c.Name
	}
	ctx.Session.Warn(&sql.Warning{Level: "Warning", Code: warnIndexIgnored, Message: fmt.Sprintf(
		"index %s on %s(%s) was not created: ldpsql keeps no secondary indexes (DuckDB scans the columns)", idx.Name, t.def.name, strings.Join(cols, ", "))})
	return nil
}

// DropIndex implements sql.IndexAlterableTable: there is no secondary index to drop.
func (t *Table) DropIndex(_ *sql.Context, name string) error {
	return sql.ErrIndexNotFound.New(name)
}

// RenameIndex implements sql.IndexAlterableTable: there is no secondary index to rename.
func (t *Table) RenameIndex(_ *sql.Context, from, _ string) error {
	return sql.ErrIndexNotFound.New(from)
}
