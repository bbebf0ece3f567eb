package boundary

import (
	"fmt"
	"strings"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/expression"
	"github.com/dolthub/go-mysql-server/sql/plan"
	"github.com/dolthub/go-mysql-server/sql/transform"
)

// Column provenance. A release's argument may read a protected table's column through a derived table,
// a view or a CTE (SELECT FLIP_LABEL(y, 1, 2) FROM (SELECT id, y FROM t) AS d): the column it names is
// the derived table's, with an id of its own. The bind rule follows such columns to where their values
// come from, so the release is charged to the unit of the protected row it reads, whatever the path.
//
// A column of a derived table (SubqueryAlias: derived tables, views, CTEs) is, row for row, one
// expression of one row of its query (a SELECT list entry, through WHERE, ORDER BY, LIMIT, DISTINCT);
// such a path is "row-wise" and a release over it is bound like a direct one, its unit key read from the
// derived table's columns that carry the protected table's unit columns (select them in the derived
// table). An aggregate's or a window function's result, a column of a UNION, and a column of anything
// else (a recursive CTE, JSON_TABLE) is not one row's value: a release that reads a protected raw
// column that way cannot be charged to a unit and is refused.

// provenance is where the values of a column that is not a table's come from.
type provenance struct {
	alts    []sql.Expression // the expression(s) that compute it, over the source's columns
	rowwise bool             // one expression of one source row per row (else an aggregate or a union of several)
	opaque  *tableInstance   // where unknown: a protected table its source reads (nil: none)
}

// buildProvenance maps the columns of every derived table, set operation, aggregation, window and
// SELECT-list alias of the statement to their provenance.
func buildProvenance(ctx *sql.Context, pt *planTables, n sql.Node) (map[sql.ColumnId]*provenance, error) {
	prov := map[sql.ColumnId]*provenance{}
	add := func(id sql.ColumnId, p *provenance) {
		if id != 0 {
			prov[id] = p
		}
	}
	err := WalkPlan(ctx, n, false, func(n sql.Node, _ bool) error {
		switch n := n.(type) {
		case *plan.Project:
			for _, e := range n.Projections {
				if a, ok := e.(*expression.Alias); ok {
					add(a.Id(), &provenance{alts: []sql.Expression{a.Child}, rowwise: true})
				}
			}
		case *plan.GroupBy:
			for _, e := range n.SelectDeps {
				if _, ok := e.(*expression.GetField); ok {
					continue // a grouping column: its own id
				}
				if ide, ok := e.(sql.IdExpression); ok {
					add(ide.Id(), &provenance{alts: []sql.Expression{unalias(e)}})
				}
			}
		case *plan.Window:
			for _, e := range n.SelectExprs {
				if _, ok := e.(*expression.GetField); ok {
					continue
				}
				if ide, ok := e.(sql.IdExpression); ok {
					add(ide.Id(), &provenance{alts: []sql.Expression{unalias(e)}})
				}
			}
		case *plan.ResolvedTable, *plan.TableAlias, *plan.IndexedTableAccess:
			// a table's own columns
		case plan.TableIdNode:
			cols := n.Columns()
			outs, ok := rowProvenance(ctx, n)
			if !ok || len(outs) != cols.Len() {
				// Unknown: taint every column with a protected table the node reads, if any.
				if inst := readsProtected(ctx, pt, n); inst != nil {
					cols.ForEach(func(id sql.ColumnId) { add(id, &provenance{opaque: inst}) })
				}
				return nil
			}
			i := 0
			cols.ForEach(func(id sql.ColumnId) {
				add(id, outs[i])
				i++
			})
		}
		return nil
	})
	return prov, err
}

func unalias(e sql.Expression) sql.Expression {
	if a, ok := e.(*expression.Alias); ok {
		return a.Child
	}
	return e
}

// rowProvenance returns the provenance of each output column of n, the source of a derived table or a
// set operation; false where it cannot tell.
func rowProvenance(ctx *sql.Context, n sql.Node) ([]*provenance, bool) {
	switch n := n.(type) {
	case *plan.SubqueryAlias:
		return rowProvenance(ctx, n.Child)
	case *plan.Project:
		out := make([]*provenance, len(n.Projections))
		for i, e := range n.Projections {
			out[i] = &provenance{alts: []sql.Expression{unalias(e)}, rowwise: true}
		}
		return out, true
	case *plan.Filter, *plan.Having, *plan.Sort, *plan.Limit, *plan.Offset, *plan.TopN, *plan.Distinct, *plan.OrderedDistinct:
		return rowProvenance(ctx, n.Children()[0])
	case *plan.GroupBy:
		out := make([]*provenance, len(n.SelectDeps))
		for i, e := range n.SelectDeps {
			_, col := e.(*expression.GetField)
			out[i] = &provenance{alts: []sql.Expression{unalias(e)}, rowwise: col}
		}
		return out, true
	case *plan.Window:
		out := make([]*provenance, len(n.SelectExprs))
		for i, e := range n.SelectExprs {
			_, col := e.(*expression.GetField)
			out[i] = &provenance{alts: []sql.Expression{unalias(e)}, rowwise: col}
		}
		return out, true
	case *plan.SetOp:
		left, ok1 := rowProvenance(ctx, n.Left())
		right, ok2 := rowProvenance(ctx, n.Right())
		if !ok1 || !ok2 || len(left) != len(right) {
			return nil, false
		}
		out := make([]*provenance, len(left))
		for i := range left {
			out[i] = &provenance{alts: append(append([]sql.Expression{}, left[i].alts...), right[i].alts...)}
			if left[i].opaque != nil {
				out[i].opaque = left[i].opaque
			} else {
				out[i].opaque = right[i].opaque
			}
		}
		return out, true
	case *plan.ResolvedTable, *plan.TableAlias, *plan.IndexedTableAccess:
		return tableColumns(ctx, n.(plan.TableIdNode))
	}
	return nil, false
}

// tableColumns is the provenance of a table's columns: themselves.
func tableColumns(ctx *sql.Context, n plan.TableIdNode) ([]*provenance, bool) {
	schema := n.Schema(ctx)
	cols := n.Columns()
	if cols.Len() != len(schema) {
		return nil, false
	}
	out := make([]*provenance, 0, len(schema))
	i := 0
	cols.ForEach(func(id sql.ColumnId) {
		c := schema[i]
		gf := expression.NewGetFieldWithTable(int(id), int(n.Id()), c.Type, c.DatabaseSource, n.Name(), c.Name, c.Nullable).WithId(id)
		out = append(out, &provenance{alts: []sql.Expression{gf.(sql.Expression)}, rowwise: true})
		i++
	})
	return out, true
}

// readsProtected returns a protected table instance that n reads (in its subtree or its expressions), or
// nil.
func readsProtected(ctx *sql.Context, pt *planTables, n sql.Node) *tableInstance {
	var found *tableInstance
	_ = WalkPlan(ctx, n, false, func(n sql.Node, _ bool) error {
		if found != nil {
			return nil
		}
		if tn, ok := n.(plan.TableIdNode); ok {
			if inst := pt.byTable[tn.Id()]; inst != nil {
				found = inst
				return nil
			}
		}
		if ex, ok := n.(sql.Expressioner); ok {
			for _, e := range ex.Expressions() {
				transform.InspectExpr(ctx, e, func(ctx *sql.Context, e sql.Expression) bool {
					if gf, ok := e.(*expression.GetField); ok && found == nil {
						if inst := pt.byCol[gf.Id()]; inst != nil && !inst.unit[gf.Id()] {
							found = inst
						}
					}
					return found != nil
				})
			}
		}
		return nil
	})
	return found
}

// governedArgs returns the arguments of a release function or governed aggregate (bound or not) other
// than its released one: what the function's output depends on beyond the release.
func governedArgs(e sql.Expression) ([]sql.Expression, bool) {
	switch x := e.(type) {
	case *ledgerRelease:
		return x.args[1:], true
	case *ledgerAggregate:
		return x.args[1:], true
	}
	if _, args, ok := releaseCall(e); ok {
		return args[1:], true
	}
	if _, args, ok := aggregateCall(e); ok {
		return args[1:], true
	}
	return nil, false
}

// columnRef is a column of a protected table instance that an expression reads.
type columnRef struct {
	gf      *expression.GetField // the reference as written (direct) or where the path ends (through a derived table)
	inst    *tableInstance
	direct  bool // named in the expression itself
	rowwise bool // the value of one row (see provenance)
}

const maxProvenanceDepth = 64

// trace calls visit for every protected column e reads, following derived tables and aggregates; the
// released argument of a release function inside e is not followed (its output is a release). A
// subquery in e is an error.
func (b *binder) trace(fn string, e sql.Expression, visit func(columnRef) error) error {
	var walk func(e sql.Expression, direct, rowwise bool, depth int) error
	walk = func(e sql.Expression, direct, rowwise bool, depth int) error {
		if depth > maxProvenanceDepth {
			return fmt.Errorf("%s: the released argument's columns are nested too deeply in derived tables to trace", fn)
		}
		switch x := e.(type) {
		case *plan.Subquery:
			return fmt.Errorf("%s: a subquery in the released argument is not allowed when it may read a protected table; join the tables instead", fn)
		case *expression.GetField:
			if inst := b.pt.byCol[x.Id()]; inst != nil {
				return visit(columnRef{gf: x, inst: inst, direct: direct, rowwise: rowwise})
			}
			p := b.prov[x.Id()]
			if p == nil {
				return nil
			}
			if p.opaque != nil {
				return visit(columnRef{gf: x, inst: p.opaque})
			}
			for _, alt := range p.alts {
				if err := walk(alt, false, rowwise && p.rowwise && len(p.alts) == 1, depth+1); err != nil {
					return err
				}
			}
			return nil
		}
		children := e.Children()
		if params, ok := governedArgs(e); ok {
			children = params
		}
		for _, c := range children {
			if err := walk(c, direct, rowwise, depth); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(e, true, true, 0)
}

// readsInstance returns the protected table instance the released argument e reads row-wise (nil for
// none) and a direct reference to it (nil when it is read through a derived table only). It fails when
// e reads two instances, holds a subquery, or reads a protected raw column other than row-wise (through
// an aggregate or a union: no single unit to charge).
func (b *binder) readsInstance(fn string, e sql.Expression) (*tableInstance, *expression.GetField, error) {
	var inst *tableInstance
	var direct, sample *expression.GetField
	err := b.trace(fn, e, func(r columnRef) error {
		raw := r.gf == nil || !r.inst.unit[r.gf.Id()] || r.inst != b.pt.byCol[r.gf.Id()]
		if !r.rowwise {
			if !raw {
				return nil // a unit column aggregated: not a release of data
			}
			if !b.dba {
				return errRawColumn(r.inst.columnName(r.gf), r.inst.budget.TableRef.String())
			}
			return fmt.Errorf("%s: the released argument reads protected table %s through an aggregate, a window function, a UNION or a "+
				"recursive query, so its value is not one row's and cannot be charged to a unit; release the column in the query block that "+
				"reads the table, e.g. SELECT … FROM (SELECT id, %s(…) AS r FROM %s) AS released …", fn, r.inst.budget.TableRef, fn, r.inst.budget.Table)
		}
		if inst != nil && r.inst != inst {
			return fmt.Errorf("%s: the released argument reads two rows of protected tables (%s and %s); release each row's columns on their own",
				fn, r.gf.Table(), sample.Table())
		}
		inst, sample = r.inst, r.gf
		if r.direct && direct == nil {
			direct = r.gf
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return inst, direct, nil
}

// columnName names a column of the instance for a message ("?" when the reference is not one of its).
func (inst *tableInstance) columnName(gf *expression.GetField) string {
	if gf != nil {
		if c := inst.cols[gf.Id()]; c != nil {
			return c.Name
		}
	}
	return "?"
}

// columnOf is pureExpression's view of a column reference: the name of the protected column of inst it
// reads row-wise (through derived tables), or "". (The name alone: a memo key is looked up in its table's
// record, which follows the table through RENAME TABLE.)
func (b *binder) columnOf(inst *tableInstance) func(gf *expression.GetField) string {
	return func(gf *expression.GetField) string {
		if base := b.baseColumn(gf); base != 0 && b.pt.byCol[base] == inst {
			return strings.ToLower(inst.cols[base].Name)
		}
		return "" // an expression in a derived table: not followed (fresh releases, no harm)
	}
}

// columnRefs returns the expressions that read the columns ids of inst (its unit columns or its primary
// key) in the scope of node (the Project or GroupBy that holds the release): the columns themselves when
// the release reads inst directly, else the columns of a derived table (or view, CTE) in node's FROM
// that carry them row-wise; missing when a derived table does not carry one of them.
func (b *binder) columnRefs(node sql.Node, inst *tableInstance, direct *expression.GetField, ids []sql.ColumnId) (out []sql.Expression, missing bool) {
	if direct != nil {
		for _, id := range ids {
			c := inst.cols[id]
			out = append(out, expression.NewGetFieldWithTable(int(id), int(inst.id), c.Type, direct.Database(), direct.Table(), c.Name, c.Nullable))
		}
		return out, false
	}
	want := map[sql.ColumnId]bool{}
	for _, id := range ids {
		want[id] = true
	}
	// The visible columns of node's sources that resolve row-wise to each column.
	found := map[sql.ColumnId]sql.Expression{}
	for _, child := range node.Children() {
		transform.Inspect(child, func(n sql.Node) bool {
			sa, ok := n.(*plan.SubqueryAlias)
			if !ok {
				return true
			}
			outs, ok := tableColumns(b.ctx, sa)
			if !ok {
				return true
			}
			for _, p := range outs {
				gf := p.alts[0].(*expression.GetField)
				if base := b.baseColumn(gf); base != 0 && want[base] && b.pt.byCol[base] == inst && found[base] == nil {
					found[base] = gf
				}
			}
			return true
		})
	}
	for _, id := range ids {
		e := found[id]
		if e == nil {
			return nil, true
		}
		out = append(out, e)
	}
	return out, false
}

// baseColumn follows a column row-wise through derived tables to a protected table's column (0: none).
func (b *binder) baseColumn(gf *expression.GetField) sql.ColumnId {
	return RowwiseBase(b.prov, gf, func(id sql.ColumnId) bool { return b.pt.byCol[id] != nil })
}

// RowwiseBase follows the column gf row-wise — through derived tables, views, CTEs and SELECT-list
// aliases, by their provenance (buildProvenance) — to the first column that isBase accepts (a column of a
// table), and returns its id; 0 where the path is not one column of one row (an expression, an
// aggregate, a window function, a UNION, an unknown source) or ends elsewhere. The ledger uses it to name
// the protected column a release reads (memo keys, unit columns), and the short form LDP_ENCODE(col, eps)
// to find the column whose default mechanism applies (short_forms.go).
func RowwiseBase(prov map[sql.ColumnId]*provenance, gf *expression.GetField, isBase func(sql.ColumnId) bool) sql.ColumnId {
	var e sql.Expression = gf
	for depth := 0; depth < maxProvenanceDepth; depth++ {
		x, ok := e.(*expression.GetField)
		if !ok {
			return 0
		}
		if isBase(x.Id()) {
			return x.Id()
		}
		p := prov[x.Id()]
		if p == nil || !p.rowwise || len(p.alts) != 1 {
			return 0
		}
		e = p.alts[0]
	}
	return 0
}

// Provenance maps the derived columns of a statement (of derived tables, views, CTEs, aggregates and
// SELECT-list aliases) to where their values come from, for RowwiseBase.
type Provenance map[sql.ColumnId]*provenance

// DerivedColumns is the provenance of n's derived columns, as the bind rule builds it (without protected
// tables to taint with).
func DerivedColumns(ctx *sql.Context, n sql.Node) (Provenance, error) {
	return buildProvenance(ctx, &planTables{byTable: map[sql.TableId]*tableInstance{}, byCol: map[sql.ColumnId]*tableInstance{}}, n)
}
