package boundary

// How it works. engine.Ledger keeps the budgets and the record of releases; this package makes every
// LDP_ENCODE, LDP_ENCODE_JSON, FLIP_LABEL and LDP_LAPLACE — and, with aggregate.go, every
// PRIVATE_ACCURACY and RR_FREQUENCY — of a protected table's data go through it:
//
//  1. BindRule (analyzer, before the default rules, on the whole statement) finds the calls whose
//     released argument reads columns of a protected table — directly, or through derived tables,
//     views and CTEs (provenance.go) — and replaces each by a ledgerRelease (an aggregate: a
//     ledgerAggregate) that also carries the unit key of the row: the table's unit columns, appended as
//     hidden arguments, or the DBA's explicit unit_key argument. Such a call must read one row of one
//     table (one row per release) and must stand in a SELECT list (an aggregate: in its GROUP BY's
//     aggregation); anything else is refused. The same pass enforces the roles (roles.go).
//  2. GateRule (analyzer, after all others) puts a ledgerGate at the top of the statement (below
//     SELECT … INTO; at the source of INSERT … SELECT and CREATE TABLE … AS SELECT). The gate runs its
//     child to the end before returning a single row: the ledgerRelease expressions compute the
//     releases (in batches of 4,096, through udf's BatchRule) and the ledgerAggregates' buffers theirs (at the
//     latest when the aggregation evaluates them, which is below the gate, before their rows reach it),
//     all collecting their charges; then the gate charges them all in one ledger transaction, and only
//     then hands the rows out. A statement that would take any unit over its budget fails with the
//     ledger's error and returns nothing. Under INSERT … SELECT and CREATE TABLE … AS SELECT the gate
//     only checks the charges against the budgets and hands them to the write, which commits them
//     with its rows (engine/ledger_tx.go).
//  3. In 'memoise' mode a release asked for again is looked up first, in the statement's own releases
//     and then in ldp_releases; a hit is returned as it was and charged nothing. The memo key names
//     what is released, never its value (engine.ReleaseDigest): the unit, the released column(s) by
//     name (for LDP_VECTOR the list of columns; for an aggregate over an expression, the expression's
//     digest: see aggregate.go), the row within the unit (its primary key, where the unit columns do
//     not include it: hidden arguments like the unit key), the mechanism's identity, the randomiser, ε,
//     K and LDP_LAPLACE's [lo, hi]. So whether a release is a hit depends on what was asked before and
//     never on the data: keyed by value, a hit after the budget is spent would say that the value equals
//     one released before (LDP_VECTOR(y, 34), a column equal to another, an invalid value's default).
//     The price: a value changed since its release is not released again in memoise mode. A release
//     whose source or row cannot be named (an expression the ledger cannot pin down, a table without a
//     primary key, a derived table that does not select the key) is never memoised: fresh and charged.
//
// A protected value that is NULL is released as if it were the default input (the zero vector; for
// FLIP_LABEL, PRIVATE_ACCURACY and RR_FREQUENCY a label or bit drawn uniformly, which is eps-LDP with
// respect to every label; for LDP_LAPLACE the midpoint of [lo, hi]), never as NULL (an aggregate does
// not skip it): a NULL out would tell whether the value is NULL. For an analyst (roles.go) an invalid
// value is treated the same way rather than raising an error that would quote it. Either is memoised
// under the same key as a valid value of the same column would be, so it shares nothing with any other
// column's release.

import (
	"context"
	"fmt"
	"strings"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/analyzer"
	"github.com/dolthub/go-mysql-server/sql/expression"
	"github.com/dolthub/go-mysql-server/sql/plan"
	"github.com/dolthub/go-mysql-server/sql/transform"

	"github.com/ldpsql/ldpsql/engine"
)

// assignExecIndexesID is the id of GMS's rule that assigns execution indexes (unexported by GMS).
var assignExecIndexesID = func() analyzer.RuleId {
	for _, r := range analyzer.OnceAfterAll {
		if r.Id.String() == "assignExecIndexes" {
			return r.Id
		}
	}
	panic("boundary: GMS has no assignExecIndexes rule")
}()

// AssignsExecIndexes reports whether the analysis that runs a rule assigns execution indexes. GMS
// analyses a UNION's branches without (the whole statement's analysis does it afterwards); rules that
// rely on final indexes (BatchRule, the ledger's gate) wait for that one.
func AssignsExecIndexes(sel analyzer.RuleSelector) bool {
	return sel == nil || sel(assignExecIndexesID)
}

// ledgerOf returns the engine's ledger, or nil for an analyzer that serves no ldpsql engine.
func ledgerOf(a *analyzer.Analyzer) *engine.Ledger {
	if a == nil || a.Catalog == nil {
		return nil
	}
	if p, ok := a.Catalog.DbProvider.(*engine.Provider); ok {
		return p.Ledger()
	}
	return nil
}

// internalReadKey marks the context of a read that an ldpsql procedure makes on behalf of a release it
// charges to the ledger itself (ldp_privatize reading its source): the roles do not apply to it.
type internalReadKey struct{}

// WithInternalRead marks ctx as such a read.
func WithInternalRead(ctx *sql.Context) *sql.Context {
	return ctx.WithContext(context.WithValue(ctx.Context, internalReadKey{}, true))
}

func isInternalRead(ctx *sql.Context) bool { return ctx.Value(internalReadKey{}) != nil }

// ---------------------------------------------------------------------------------------------------
// Binding

// tableInstance is one occurrence of a protected table in a statement (FROM t a JOIN t b: two).
type tableInstance struct {
	id     sql.TableId
	budget engine.Budget
	cols   map[sql.ColumnId]*sql.Column
	unit   map[sql.ColumnId]bool // the unit columns: they identify a unit and are not raw data
	units  []sql.ColumnId        // the unit columns' ids, in the budget's order
	pk     []sql.ColumnId        // the primary key's columns, in key order (none: the table has no primary key)
	// unitIsRow: the unit columns include the primary key, so a unit is one row and the unit key
	// identifies the row a release reads. Otherwise a memoised release is keyed by the row's primary key
	// too (and without a primary key it is not memoised at all).
	unitIsRow bool
}

// planTables is what the bind rule knows about a statement's protected tables.
type planTables struct {
	byTable map[sql.TableId]*tableInstance
	byCol   map[sql.ColumnId]*tableInstance
	ledger  []string // ledger catalog tables read (DBA only)
}

// WalkPlan calls f on every node of n: opaque ones (subquery aliases, views), the plans of subquery
// expressions (inSubquery true) and the source of INSERT.
func WalkPlan(ctx *sql.Context, n sql.Node, inSubquery bool, f func(n sql.Node, inSubquery bool) error) error {
	var err error
	transform.InspectWithOpaque(ctx, n, func(ctx *sql.Context, n sql.Node) bool {
		if err != nil {
			return false
		}
		if err = f(n, inSubquery); err != nil {
			return false
		}
		if ex, ok := n.(sql.Expressioner); ok {
			for _, e := range ex.Expressions() {
				transform.InspectExpr(ctx, e, func(ctx *sql.Context, e sql.Expression) bool {
					if sq, ok := e.(*plan.Subquery); ok && err == nil && sq.Query != nil {
						err = WalkPlan(ctx, sq.Query, true, f)
					}
					return err != nil
				})
			}
		}
		if ins, ok := n.(*plan.InsertInto); ok && ins.Source != nil && err == nil {
			err = WalkPlan(ctx, ins.Source, inSubquery, f)
		}
		return err == nil
	})
	return err
}

// findTables collects the protected tables that n reads and the ledger tables it names.
func findTables(ctx *sql.Context, l *engine.Ledger, n sql.Node) (*planTables, error) {
	pt := &planTables{byTable: map[sql.TableId]*tableInstance{}, byCol: map[sql.ColumnId]*tableInstance{}}
	err := WalkPlan(ctx, n, false, func(n sql.Node, _ bool) error {
		rt, ok := n.(*plan.ResolvedTable)
		if !ok || rt.Database() == nil {
			return nil
		}
		ref := engine.TableRef{Database: rt.Database().Name(), Table: rt.Name()}
		if strings.EqualFold(ref.Database, engine.CatalogSchema) {
			for _, t := range engine.LedgerTables {
				if strings.EqualFold(ref.Table, t) {
					pt.ledger = append(pt.ledger, t)
				}
			}
			return nil
		}
		b, ok := l.Budget(ref)
		if !ok {
			return nil
		}
		if _, seen := pt.byTable[rt.Id()]; seen {
			return nil
		}
		cols, err := ColumnsByID(ctx, rt)
		if err != nil {
			return fmt.Errorf("ldp ledger: protected table %s: %w", ref, err)
		}
		inst := &tableInstance{id: rt.Id(), budget: b, cols: cols, unit: map[sql.ColumnId]bool{}}
		for id := range cols {
			pt.byCol[id] = inst
		}
		for _, name := range b.UnitColumns {
			found := false
			for id, c := range inst.cols {
				if strings.EqualFold(c.Name, name) {
					inst.unit[id], found = true, true
					inst.units = append(inst.units, id)
				}
			}
			if !found {
				return fmt.Errorf("ldp ledger: unit column %s of protected table %s does not exist (set the budget again with CALL ldp_set_budget)", name, ref)
			}
		}
		pk := PrimaryKey(ctx, rt.UnderlyingTable())
		for _, name := range pk {
			for id, c := range inst.cols {
				if strings.EqualFold(c.Name, name) {
					inst.pk = append(inst.pk, id)
				}
			}
		}
		if len(inst.pk) != len(pk) {
			inst.pk = nil // cannot map the key: treat the table as keyless (nothing memoised)
		}
		inst.unitIsRow = len(inst.pk) > 0 && UnitIsRow(b.UnitColumns, pk)
		pt.byTable[rt.Id()] = inst
		return nil
	})
	return pt, err
}

// ColumnsByID maps the column ids a table node gives its columns to the columns.
func ColumnsByID(ctx *sql.Context, n plan.TableIdNode) (map[sql.ColumnId]*sql.Column, error) {
	schema := n.Schema(ctx)
	ids := n.Columns()
	if ids.Len() != len(schema) {
		return nil, fmt.Errorf("cannot map the columns of %s (%d ids, %d columns)", n.Name(), ids.Len(), len(schema))
	}
	cols := make(map[sql.ColumnId]*sql.Column, len(schema))
	i := 0
	ids.ForEach(func(id sql.ColumnId) {
		cols[id] = schema[i]
		i++
	})
	return cols, nil
}

// BindRule binds the release functions that read protected tables to the ledger, and enforces
// the roles, on the whole statement (it runs on the outermost plan only: GMS analyses subqueries and
// views again on their own, with column ids that the outer plan defines).
func BindRule(ctx *sql.Context, a *analyzer.Analyzer, n sql.Node, scope *plan.Scope, _ analyzer.RuleSelector, _ *sql.QueryFlags) (sql.Node, transform.TreeIdentity, error) {
	l := ledgerOf(a)
	if l == nil || scope.RecursionDepth() > 0 || isInternalRead(ctx) || !l.AnyProtected() {
		return n, transform.SameTree, nil
	}
	if at, ok := n.(*plan.AnalyzeTable); ok && !IsDBA(ctx, a) {
		for _, t := range at.Tables {
			if _, protected := l.Budget(engine.TableRef{Database: at.Db, Table: t.Name()}); protected {
				return nil, transform.SameTree, fmt.Errorf("access denied: ANALYZE TABLE would compute statistics of protected table %s.%s", at.Db, t.Name())
			}
		}
	}
	pt, err := findTables(ctx, l, n)
	if err != nil {
		return nil, transform.SameTree, err
	}
	if len(pt.byTable) == 0 && len(pt.ledger) == 0 {
		return n, transform.SameTree, nil
	}
	dba := IsDBA(ctx, a)
	if !dba && len(pt.ledger) > 0 {
		return nil, transform.SameTree, fmt.Errorf("access denied: %s.%s is readable by a DBA only", engine.CatalogSchema, pt.ledger[0])
	}
	out := n
	same := transform.SameTree
	if len(pt.byTable) > 0 {
		prov, err := buildProvenance(ctx, pt, n)
		if err != nil {
			return nil, transform.SameTree, err
		}
		b := &binder{ctx: ctx, l: l, pt: pt, prov: prov, dba: dba}
		if out, same, err = b.bind(n); err != nil {
			return nil, transform.SameTree, err
		}
		if err := b.checkUnbound(out); err != nil {
			return nil, transform.SameTree, err
		}
		if !dba {
			if err := b.checkRawAccess(out); err != nil {
				return nil, transform.SameTree, err
			}
		}
	}
	return out, same, nil
}

// PrimaryKey returns the names of table t's primary key columns, in key order (none without one).
func PrimaryKey(ctx *sql.Context, t sql.Table) []string {
	if t == nil {
		return nil
	}
	if pkt, ok := sql.GetUnderlyingTable(t).(sql.PrimaryKeyTable); ok {
		s := pkt.PrimaryKeySchema(ctx)
		names := make([]string, 0, len(s.PkOrdinals))
		for _, i := range s.PkOrdinals {
			names = append(names, s.Schema[i].Name)
		}
		return names
	}
	var names []string
	for _, c := range t.Schema(ctx) {
		if c.PrimaryKey {
			names = append(names, c.Name)
		}
	}
	return names
}

// UnitIsRow reports whether unit columns identify one row of a table with primary key pk: they include
// every column of a (non-empty) primary key.
func UnitIsRow(units, pk []string) bool {
	if len(pk) == 0 {
		return false
	}
	for _, k := range pk {
		found := false
		for _, u := range units {
			found = found || strings.EqualFold(u, k)
		}
		if !found {
			return false
		}
	}
	return true
}

type binder struct {
	ctx  *sql.Context
	l    *engine.Ledger
	pt   *planTables
	prov map[sql.ColumnId]*provenance // columns of derived tables, aggregates, aliases (provenance.go)
	dba  bool
}

// bind replaces the release calls that read protected columns in SELECT lists (of the statement, its
// derived tables and views, and an INSERT's source) by ledgerReleases, and the governed aggregates
// that do by ledgerAggregates.
func (b *binder) bind(n sql.Node) (sql.Node, transform.TreeIdentity, error) {
	return transform.NodeWithOpaque(b.ctx, n, func(ctx *sql.Context, n sql.Node) (sql.Node, transform.TreeIdentity, error) {
		switch n := n.(type) {
		case *plan.Project:
			return transform.OneNodeExpressions(ctx, n, func(ctx *sql.Context, e sql.Expression) (sql.Expression, transform.TreeIdentity, error) {
				return b.bindCall(n, e)
			})
		case *plan.GroupBy:
			deps := make([]sql.Expression, len(n.SelectDeps))
			same := transform.SameTree
			for i, e := range n.SelectDeps {
				ne, s, err := transform.Expr(ctx, e, func(ctx *sql.Context, e sql.Expression) (sql.Expression, transform.TreeIdentity, error) {
					return b.bindAggregate(n, e)
				})
				if err != nil {
					return nil, transform.SameTree, err
				}
				deps[i] = ne
				if s == transform.NewTree {
					same = transform.NewTree
				}
			}
			if same == transform.SameTree {
				return n, same, nil
			}
			ng := *n
			ng.SelectDeps = deps
			return &ng, transform.NewTree, nil
		case *plan.InsertInto:
			if n.Source == nil {
				return n, transform.SameTree, nil
			}
			src, same, err := b.bind(n.Source)
			if err != nil || same == transform.SameTree {
				return n, transform.SameTree, err
			}
			return n.WithSource(src), transform.NewTree, nil
		}
		return n, transform.SameTree, nil
	})
}

// releaseCall describes a release function call (a Release): its protected argument is args[0].
func releaseCall(e sql.Expression) (name string, args []sql.Expression, ok bool) {
	if f, ok := e.(Release); ok {
		name, args = f.ReleaseCall()
		return name, args, true
	}
	return "", nil, false
}

// aggregateCall describes a governed aggregate (an Aggregate; aggregate.go): its released argument is
// args[0].
func aggregateCall(e sql.Expression) (name string, args []sql.Expression, ok bool) {
	if f, ok := e.(Aggregate); ok {
		name, args = f.ReleaseCall()
		return name, args, true
	}
	return "", nil, false
}

// explicitUnitAt is the position of a function's optional unit_key argument.
func explicitUnitAt(fn string) int {
	switch fn {
	case "PRIVATE_ACCURACY":
		return 2
	case "FLIP_LABEL":
		return 3
	}
	return 4 // LDP_ENCODE, LDP_ENCODE_JSON, LDP_LAPLACE, RR_FREQUENCY
}

// keyTypes are the SQL types by which engine.UnitKey keys a release's unit (the unit columns') and its
// row within the unit (the primary key's), so that a unit column's collation decides which spellings are
// one unit. A DBA's explicit unit_key of one value per unit column names a unit of the table and is keyed
// by the unit columns' types too: on an insensitive unit column, FLIP_LABEL(y, 1, 2, 'ALICE') charges
// the unit 'alice'.
type keyTypes struct{ unit, row []sql.Type }

// typesOf are the types of the instance's columns ids.
func (t *tableInstance) typesOf(ids []sql.ColumnId) []sql.Type {
	out := make([]sql.Type, len(ids))
	for i, id := range ids {
		out[i] = t.cols[id].Type
	}
	return out
}

// bindUnit splits a call's arguments into its own and the unit key: the DBA's explicit unit_key
// argument, or the unit columns of the protected row it reads (in node's scope). It also returns the
// expressions that identify the row within its unit (none where the unit is the row), and noRow when the
// row cannot be identified (no primary key, or a derived table that does not select it): such a release
// is never memoised.
func (b *binder) bindUnit(fn string, node sql.Node, inst *tableInstance, direct *expression.GetField, args []sql.Expression) (own, units, row []sql.Expression, kt keyTypes, noRow bool, err error) {
	at := explicitUnitAt(fn)
	explicit := len(args) > at
	if explicit {
		if !b.dba {
			return nil, nil, nil, kt, false, fmt.Errorf("access denied: %s: only a DBA may choose the privacy unit of protected table %s (releases are charged to its unit columns %s)",
				fn, inst.budget.TableRef, strings.Join(inst.budget.UnitColumns, ", "))
		}
		own, units = args[:at], args[at:]
	} else {
		refs, missing := b.columnRefs(node, inst, direct, inst.units)
		if missing {
			return nil, nil, nil, kt, false, fmt.Errorf("%s reads protected table %s through a derived table or view that does not select its unit columns (%s): "+
				"select them there too, so that the release can be charged to its unit", fn, inst.budget.TableRef, strings.Join(inst.budget.UnitColumns, ", "))
		}
		own, units = args, refs
	}
	kt.unit = inst.typesOf(inst.units)
	if explicit && len(units) != len(inst.units) {
		// Not a value of each unit column: the DBA's own notion of unit, keyed by its own types.
		kt.unit = make([]sql.Type, len(units))
		for i, u := range units {
			kt.unit[i] = u.Type(b.ctx)
		}
	}
	kt.row = inst.typesOf(inst.pk)
	if inst.unitIsRow && !explicit {
		return own, units, nil, kt, false, nil
	}
	if len(inst.pk) == 0 {
		return own, units, nil, kt, true, nil
	}
	row, missing := b.columnRefs(node, inst, direct, inst.pk)
	if missing {
		return own, units, nil, kt, true, nil
	}
	return own, units, row, kt, false, nil
}

// checkReleasedVector refuses an LDP_VECTOR released from a protected table unless every element is a
// column: a literal beside a column (LDP_VECTOR(y, 34)) would be a question about the column's value.
func checkReleasedVector(fn string, inst *tableInstance, arg sql.Expression) error {
	v, ok := arg.(Vector)
	if !ok {
		return nil
	}
	for _, c := range v.Children() {
		if _, col := c.(*expression.GetField); !col {
			return fmt.Errorf("%s on protected table %s: the released LDP_VECTOR takes columns only, not %s", fn, inst.budget.TableRef, c)
		}
	}
	return nil
}

// bindCall replaces one release call that reads a protected table (in node, a Project).
func (b *binder) bindCall(node sql.Node, e sql.Expression) (sql.Expression, transform.TreeIdentity, error) {
	fn, args, ok := releaseCall(e)
	if !ok {
		return e, transform.SameTree, nil
	}
	inst, direct, err := b.readsInstance(fn, args[0])
	if err != nil || inst == nil {
		return e, transform.SameTree, err
	}
	call := e.(Release)
	if err := call.CheckBindable(); err != nil {
		return nil, transform.SameTree, err // udf's short forms are expanded first; never release without it
	}
	own, unitArgs, rowArgs, kt, noRow, err := b.bindUnit(fn, node, inst, direct, args)
	if err != nil {
		return nil, transform.SameTree, err
	}
	if err := checkReleasedVector(fn, inst, args[0]); err != nil {
		return nil, transform.SameTree, err
	}
	if !b.dba {
		if err := checkAnalystArgument(fn, inst, args[0]); err != nil {
			return nil, transform.SameTree, err
		}
	}
	r := &ledgerRelease{fn: fn, args: append([]sql.Expression{}, own...), units: unitArgs, row: rowArgs, keyTypes: kt, table: inst.budget.TableRef, strict: !b.dba, ledger: b.l, call: call}
	r.key = b.keyOf(inst, args[0])
	r.key.noRow = noRow
	if r.strict {
		r.args[0] = &guarded{inner: r.args[0]}
	}
	return r, transform.NewTree, nil
}

// bindAggregate replaces one governed aggregate that reads a protected table (in node, a GroupBy).
func (b *binder) bindAggregate(node sql.Node, e sql.Expression) (sql.Expression, transform.TreeIdentity, error) {
	fn, args, ok := aggregateCall(e)
	if !ok {
		return e, transform.SameTree, nil
	}
	inst, direct, err := b.readsInstance(fn, args[0])
	if err != nil || inst == nil {
		return e, transform.SameTree, err
	}
	own, unitArgs, rowArgs, kt, noRow, err := b.bindUnit(fn, node, inst, direct, args)
	if err != nil {
		return nil, transform.SameTree, err
	}
	a := &ledgerAggregate{fn: fn, args: append([]sql.Expression{}, own...), units: unitArgs, row: rowArgs, keyTypes: kt, table: inst.budget.TableRef, strict: !b.dba, ledger: b.l,
		call: e.(Aggregate)}
	if ide, ok := e.(sql.IdExpression); ok {
		a.id = ide.Id()
	}
	if w, ok := e.(sql.WindowAdaptableExpression); ok {
		a.window = w.Window()
	}
	a.key = b.keyOf(inst, args[0])
	if a.key.source == "" && !a.key.pure && !b.dba {
		return nil, transform.SameTree, fmt.Errorf("access denied: %s on protected table %s: an analyst's argument may use the table's columns, literals, "+
			"comparisons (IN, BETWEEN, LIKE too), arithmetic, AND/OR/NOT, CASE, IF, COALESCE, CAST, LDP_VECTOR and PREDICT of a named model, and nothing else (no other "+
			"table, variable or function), not %s", fn, inst.budget.TableRef, args[0])
	}
	a.key.noRow = noRow
	if a.strict {
		if err := checkAnalystExpression(b.ctx, fn, inst, args[0]); err != nil {
			return nil, transform.SameTree, err
		}
		a.args[0] = &guarded{inner: a.args[0]}
	}
	return a, transform.NewTree, nil
}

// checkUnbound refuses release calls and governed aggregates on protected data that were not bound:
// outside a SELECT list (an aggregate: outside a GROUP BY's aggregation, e.g. OVER …), or in a
// subquery expression.
func (b *binder) checkUnbound(n sql.Node) error {
	return WalkPlan(b.ctx, n, false, func(n sql.Node, inSubquery bool) error {
		ex, ok := n.(sql.Expressioner)
		if !ok {
			return nil
		}
		_, isProject := n.(*plan.Project)
		_, isGroupBy := n.(*plan.GroupBy)
		for _, e := range ex.Expressions() {
			var err error
			transform.InspectExpr(b.ctx, e, func(ctx *sql.Context, e sql.Expression) bool {
				switch r := e.(type) {
				case *ledgerRelease:
					if inSubquery || !isProject {
						err = misplaced(r.fn, r.table, inSubquery)
					}
					return err != nil
				case *ledgerAggregate:
					if inSubquery || !isGroupBy {
						err = misplaced(r.fn, r.table, inSubquery)
					}
					return err != nil
				}
				fn, args, ok := releaseCall(e)
				if !ok {
					fn, args, ok = aggregateCall(e)
				}
				if !ok {
					return false
				}
				inst, _, ierr := b.readsInstance(fn, args[0])
				switch {
				case ierr != nil:
					err = ierr
				case inst != nil:
					err = misplaced(fn, inst.budget.TableRef, inSubquery)
				}
				return err != nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

func misplaced(fn string, t engine.TableRef, inSubquery bool) error {
	if fn == "PRIVATE_ACCURACY" || fn == "RR_FREQUENCY" {
		where := "as a window function (OVER …)"
		if inSubquery {
			where = "in a subquery expression"
		}
		return fmt.Errorf("%s on protected table %s is allowed only as an aggregate of a SELECT, not %s: aggregate in a derived table, "+
			"e.g. SELECT … FROM (SELECT %s(…) AS a FROM %s) AS released", fn, t, where, fn, t.Table)
	}
	where := "outside a SELECT list (in WHERE, GROUP BY, ORDER BY, a join condition, UPDATE …)"
	if inSubquery {
		where = "in a subquery expression"
	}
	return fmt.Errorf("%s on protected table %s is allowed only in a SELECT list, not %s: release in a derived table, "+
		"e.g. SELECT … FROM (SELECT id, %s(…) AS r FROM %s) AS released WHERE …", fn, t, where, fn, t.Table)
}
