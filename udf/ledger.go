package udf

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/analyzer"
	"github.com/dolthub/go-mysql-server/sql/expression"
	"github.com/dolthub/go-mysql-server/sql/plan"
	"github.com/dolthub/go-mysql-server/sql/transform"
	"github.com/dolthub/go-mysql-server/sql/types"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/mechanisms"
)

// The ledger in SQL. engine.Ledger keeps the budgets and the record of releases; this file makes every
// LDP_ENCODE, LDP_ENCODE_JSON, FLIP_LABEL and LDP_LAPLACE — and, with ledger_agg.go, every
// PRIVATE_ACCURACY and RR_FREQUENCY — of a protected table's data go through it:
//
//  1. ledgerBindRule (analyzer, before the default rules, on the whole statement) finds the calls whose
//     released argument reads columns of a protected table — directly, or through derived tables,
//     views and CTEs (ledger_prov.go) — and replaces each by a ledgerRelease (an aggregate: a
//     ledgerAggregate) that also carries the unit key of the row: the table's unit columns, appended as
//     hidden arguments, or the DBA's explicit unit_key argument. Such a call must read one row of one
//     table (one row per release) and must stand in a SELECT list (an aggregate: in its GROUP BY's
//     aggregation); anything else is refused. The same pass enforces the roles (roles.go).
//  2. ledgerGateRule (analyzer, after all others) puts a ledgerGate at the top of the statement (below
//     SELECT … INTO; at the source of INSERT … SELECT and CREATE TABLE … AS SELECT). The gate runs its
//     child to the end before returning a single row: the ledgerRelease expressions compute the
//     releases (in batches of 4,096, through BatchRule) and the ledgerAggregates' buffers theirs (at the
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
//     digest: see ledger_agg.go), the row within the unit (its primary key, where the unit columns do
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

// Rule ids, far from GMS's own.
const (
	shortFormsRuleID analyzer.RuleId = 100_009
	ledgerBindRuleID analyzer.RuleId = 100_010
	ledgerGateRuleID analyzer.RuleId = 100_011
)

func init() {
	// The short forms are expanded first, so that the ledger binds (and charges) the long forms they
	// stand for, exactly as if they had been written (short_forms.go).
	analyzer.AlwaysBeforeDefault = append(analyzer.AlwaysBeforeDefault,
		analyzer.Rule{Id: shortFormsRuleID, Apply: shortFormsRule},
		analyzer.Rule{Id: ledgerBindRuleID, Apply: ledgerBindRule})
	analyzer.OnceAfterAll = append(analyzer.OnceAfterAll, analyzer.Rule{Id: ledgerGateRuleID, Apply: ledgerGateRule})
}

// assignExecIndexesID is the id of GMS's rule that assigns execution indexes (unexported by GMS).
var assignExecIndexesID = func() analyzer.RuleId {
	for _, r := range analyzer.OnceAfterAll {
		if r.Id.String() == "assignExecIndexes" {
			return r.Id
		}
	}
	panic("udf: GMS has no assignExecIndexes rule")
}()

// assignsExecIndexes reports whether the analysis that runs a rule assigns execution indexes. GMS
// analyses a UNION's branches without (the whole statement's analysis does it afterwards); rules that
// rely on final indexes (BatchRule, the ledger's gate) wait for that one.
func assignsExecIndexes(sel analyzer.RuleSelector) bool {
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

func withInternalRead(ctx *sql.Context) *sql.Context {
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

// walkPlan calls f on every node of n: opaque ones (subquery aliases, views), the plans of subquery
// expressions (inSubquery true) and the source of INSERT.
func walkPlan(ctx *sql.Context, n sql.Node, inSubquery bool, f func(n sql.Node, inSubquery bool) error) error {
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
						err = walkPlan(ctx, sq.Query, true, f)
					}
					return err != nil
				})
			}
		}
		if ins, ok := n.(*plan.InsertInto); ok && ins.Source != nil && err == nil {
			err = walkPlan(ctx, ins.Source, inSubquery, f)
		}
		return err == nil
	})
	return err
}

// findTables collects the protected tables that n reads and the ledger tables it names.
func findTables(ctx *sql.Context, l *engine.Ledger, n sql.Node) (*planTables, error) {
	pt := &planTables{byTable: map[sql.TableId]*tableInstance{}, byCol: map[sql.ColumnId]*tableInstance{}}
	err := walkPlan(ctx, n, false, func(n sql.Node, _ bool) error {
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
		cols, err := columnsByID(ctx, rt)
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
		pk := primaryKey(ctx, rt.UnderlyingTable())
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
		inst.unitIsRow = len(inst.pk) > 0 && unitIsRow(b.UnitColumns, pk)
		pt.byTable[rt.Id()] = inst
		return nil
	})
	return pt, err
}

// columnsByID maps the column ids a table node gives its columns to the columns.
func columnsByID(ctx *sql.Context, n plan.TableIdNode) (map[sql.ColumnId]*sql.Column, error) {
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

// ledgerBindRule binds the release functions that read protected tables to the ledger, and enforces
// the roles, on the whole statement (it runs on the outermost plan only: GMS analyses subqueries and
// views again on their own, with column ids that the outer plan defines).
func ledgerBindRule(ctx *sql.Context, a *analyzer.Analyzer, n sql.Node, scope *plan.Scope, _ analyzer.RuleSelector, _ *sql.QueryFlags) (sql.Node, transform.TreeIdentity, error) {
	l := ledgerOf(a)
	if l == nil || scope.RecursionDepth() > 0 || isInternalRead(ctx) || !l.AnyProtected() {
		return n, transform.SameTree, nil
	}
	if at, ok := n.(*plan.AnalyzeTable); ok && !isDBA(ctx, a) {
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
	dba := isDBA(ctx, a)
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

// primaryKey returns the names of table t's primary key columns, in key order (none without one).
func primaryKey(ctx *sql.Context, t sql.Table) []string {
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

// unitIsRow reports whether unit columns identify one row of a table with primary key pk: they include
// every column of a (non-empty) primary key.
func unitIsRow(units, pk []string) bool {
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
	prov map[sql.ColumnId]*provenance // columns of derived tables, aggregates, aliases (ledger_prov.go)
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

// releaseCall describes a release function call: its protected argument is args[0].
func releaseCall(e sql.Expression) (name string, args []sql.Expression, ok bool) {
	switch f := e.(type) {
	case *LDPEncode:
		return strings.ToUpper(f.name), f.args, true
	case *FlipLabel:
		return "FLIP_LABEL", f.args, true
	case *LDPLaplace:
		return "LDP_LAPLACE", f.args, true
	}
	return "", nil, false
}

// aggregateCall describes a governed aggregate (ledger_agg.go): its released argument is args[0].
func aggregateCall(e sql.Expression) (name string, args []sql.Expression, ok bool) {
	switch f := e.(type) {
	case *PrivateAccuracy:
		return "PRIVATE_ACCURACY", f.args, true
	case *RRFrequency:
		return "RR_FREQUENCY", f.args, true
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

// bindUnit splits a call's arguments into its own and the unit key: the DBA's explicit unit_key
// argument, or the unit columns of the protected row it reads (in node's scope). It also returns the
// expressions that identify the row within its unit (none where the unit is the row), and noRow when the
// row cannot be identified (no primary key, or a derived table that does not select it): such a release
// is never memoised.
func (b *binder) bindUnit(fn string, node sql.Node, inst *tableInstance, direct *expression.GetField, args []sql.Expression) (own, units, row []sql.Expression, noRow bool, err error) {
	at := explicitUnitAt(fn)
	explicit := len(args) > at
	if explicit {
		if !b.dba {
			return nil, nil, nil, false, fmt.Errorf("access denied: %s: only a DBA may choose the privacy unit of protected table %s (releases are charged to its unit columns %s)",
				fn, inst.budget.TableRef, strings.Join(inst.budget.UnitColumns, ", "))
		}
		own, units = args[:at], args[at:]
	} else {
		refs, missing := b.columnRefs(node, inst, direct, inst.units)
		if missing {
			return nil, nil, nil, false, fmt.Errorf("%s reads protected table %s through a derived table or view that does not select its unit columns (%s): "+
				"select them there too, so that the release can be charged to its unit", fn, inst.budget.TableRef, strings.Join(inst.budget.UnitColumns, ", "))
		}
		own, units = args, refs
	}
	if inst.unitIsRow && !explicit {
		return own, units, nil, false, nil
	}
	if len(inst.pk) == 0 {
		return own, units, nil, true, nil
	}
	row, missing := b.columnRefs(node, inst, direct, inst.pk)
	if missing {
		return own, units, nil, true, nil
	}
	return own, units, row, false, nil
}

// checkReleasedVector refuses an LDP_VECTOR released from a protected table unless every element is a
// column: a literal beside a column (LDP_VECTOR(y, 34)) would be a question about the column's value.
func checkReleasedVector(fn string, inst *tableInstance, arg sql.Expression) error {
	v, ok := arg.(*LDPVector)
	if !ok {
		return nil
	}
	for _, c := range v.args {
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
	if f, ok := e.(*LDPEncode); ok && f.short() {
		return nil, transform.SameTree, errShortNotExpanded(fn) // shortFormsRule runs first; never release without it
	}
	own, unitArgs, rowArgs, noRow, err := b.bindUnit(fn, node, inst, direct, args)
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
	r := &ledgerRelease{fn: fn, args: append([]sql.Expression{}, own...), units: unitArgs, row: rowArgs, table: inst.budget.TableRef, strict: !b.dba, ledger: b.l}
	r.key = b.keyOf(inst, args[0])
	r.key.noRow = noRow
	switch f := e.(type) {
	case *LDPEncode:
		r.encode = f
	case *FlipLabel:
		r.flip = f
	case *LDPLaplace:
		r.laplace = f
	}
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
	own, unitArgs, rowArgs, noRow, err := b.bindUnit(fn, node, inst, direct, args)
	if err != nil {
		return nil, transform.SameTree, err
	}
	a := &ledgerAggregate{fn: fn, args: append([]sql.Expression{}, own...), units: unitArgs, row: rowArgs, table: inst.budget.TableRef, strict: !b.dba, ledger: b.l}
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
	return walkPlan(b.ctx, n, false, func(n sql.Node, inSubquery bool) error {
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

// ---------------------------------------------------------------------------------------------------
// The release expression

// ledgerRelease is a release call bound to the ledger: LDP_ENCODE, LDP_ENCODE_JSON, FLIP_LABEL or
// LDP_LAPLACE on a protected table, with the row's unit key as hidden arguments. It is evaluated in batches (BatchRule)
// inside a ledgerGate, which charges what it releases.
type ledgerRelease struct {
	fn     string           // upper-case function name
	args   []sql.Expression // the function's arguments (no unit key); args[0] is the protected value
	units  []sql.Expression // the unit key
	row    []sql.Expression // the row's primary key, where the unit key does not identify the row (memoisation)
	table  engine.TableRef
	strict bool // analyst: invalid values are released as the default input, never quoted in an error
	ledger *engine.Ledger
	key    bindKey // what is released, for memoisation

	encode  *LDPEncode // the function, for its configuration: one of the three is set
	flip    *FlipLabel
	laplace *LDPLaplace
}

var _ BatchExpression = (*ledgerRelease)(nil)
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

func (r *ledgerRelease) Type(ctx *sql.Context) sql.Type {
	if r.encode != nil {
		return r.encode.Type(ctx)
	}
	if r.laplace != nil {
		return types.Float64
	}
	return types.Int64
}

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

func (r *ledgerRelease) Eval(ctx *sql.Context, row sql.Row) (any, error) { return evalOne(ctx, r, row) }

// EvalBatch implements BatchExpression: the releases of a batch of rows, memoised or charged.
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
	what := releaseWhat{source: r.key.sourceOf(ctx)}
	if len(r.row) > 0 {
		what.rows = make([]string, len(rows))
	}
	na, nu := len(r.args), len(r.units)
	for i, a := range rows {
		u, err := engine.UnitKey(a[na : na+nu]...)
		if err != nil {
			return nil, fmt.Errorf("%s on protected table %s: %w (a NULL unit_key names no unit)", r.fn, r.table, err)
		}
		units[i] = u
		if what.rows != nil {
			if what.rows[i], err = engine.UnitKey(a[na+nu:]...); err != nil {
				return nil, fmt.Errorf("%s on protected table %s: the row's primary key: %w", r.fn, r.table, err)
			}
		}
	}
	switch {
	case r.encode != nil:
		return r.evalEncode(ctx, c, b, rows, units, what)
	case r.laplace != nil:
		return r.evalLaplace(ctx, c, b, rows, units, what)
	}
	return r.evalFlip(ctx, c, b, rows, units, what)
}

// releaseWhat is what a call releases, for the memo keys (engine.ReleaseDigest): the source — the
// released column(s) or expression by identity, "" where the releases cannot be memoised — and each
// release's row within its unit (nil where every unit is one row).
type releaseWhat struct {
	source string
	rows   []string
}

func (w releaseWhat) row(i int) string {
	if w.rows == nil {
		return ""
	}
	return w.rows[i]
}

// pick is w for the releases at positions idx.
func (w releaseWhat) pick(idx []int) releaseWhat {
	if w.rows == nil {
		return w
	}
	out := releaseWhat{source: w.source, rows: make([]string, len(idx))}
	for k, i := range idx {
		out.rows[k] = w.rows[i]
	}
	return out
}

// digests are the memo keys' digests of n releases of w through mechanism (all "" where w is not
// memoisable).
func (w releaseWhat) digests(n int, mechanism, randomiser string, eps float64, k int, params ...float64) []string {
	out := make([]string, n)
	if w.source == "" {
		return out // not memoisable: never looked up, never recorded for reuse
	}
	for i := range out {
		out[i] = engine.ReleaseDigest(w.source, w.row(i), mechanism, randomiser, eps, k, params...)
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

func isDefault(v any) bool {
	_, invalid := v.(invalidValue)
	return v == nil || invalid
}

func (r *ledgerRelease) evalEncode(ctx *sql.Context, c *collector, b engine.Budget, rows [][]any, units []string, what releaseWhat) ([]any, error) {
	fn := r.fn
	out := make([]any, len(rows))
	groups := map[encodeGroup][]int{}
	var order []encodeGroup
	for i, a := range rows {
		if a[1] == nil || a[2] == nil || (len(r.args) == 4 && a[3] == nil) {
			continue // NULL parameters (not data): NULL out, nothing released
		}
		eps, err := toEpsilon(ctx, fn, a[1])
		if err != nil {
			return nil, err
		}
		g := encodeGroup{mechanism: fmt.Sprint(a[2]), randomiser: mechanisms.RandomiserLaplace, eps: eps}
		if len(r.args) == 4 {
			g.randomiser = strings.ToLower(fmt.Sprint(a[3]))
		}
		if _, seen := groups[g]; !seen {
			order = append(order, g)
		}
		groups[g] = append(groups[g], i)
	}
	for _, g := range order {
		mech, err := r.encode.mechs.resolve(ctx, g.mechanism)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fn, err)
		}
		idx := groups[g]
		vecs := make([][]float32, len(idx))
		gunits := make([]string, len(idx))
		for k, i := range idx {
			gunits[k] = units[i]
			v := rows[i][0]
			if isDefault(v) {
				continue // the default input
			}
			vec, err := toVector(ctx, fn, "features", v)
			if err == nil && len(vec) != mech.desc.InputDim {
				err = fmt.Errorf("%s: features have %d values, mechanism %q expects %d", fn, len(vec), g.mechanism, mech.desc.InputDim)
			}
			if err == nil {
				err = checkFinite(fn, "features", vec)
			}
			if err != nil {
				if r.strict {
					continue
				}
				return nil, err
			}
			vecs[k] = vec
		}
		released, err := c.releaseVectors(ctx, b, fn, mech, g.randomiser, g.eps, gunits, what.pick(idx), vecs)
		if err != nil {
			return nil, err
		}
		for k, i := range idx {
			if r.encode.asJSON {
				out[i] = types.MustJSON(formatJSONVector(released[k]))
			} else {
				out[i] = PackVector(toFloat32(released[k]))
			}
		}
	}
	return out, nil
}

func (r *ledgerRelease) evalFlip(ctx *sql.Context, c *collector, b engine.Budget, rows [][]any, units []string, what releaseWhat) ([]any, error) {
	const fn = "FLIP_LABEL"
	out := make([]any, len(rows))
	type group struct {
		krr   *mechanisms.KRR
		idx   []int
		ys    []int
		units []string
	}
	groups := map[[2]float64]*group{}
	var order []*group
	for i, a := range rows {
		if a[1] == nil || a[2] == nil {
			continue // NULL parameters: NULL out, nothing released
		}
		krr, err := r.flip.randomiser(ctx, a[1], a[2])
		if err != nil {
			return nil, err
		}
		y := -1 // the default: a uniformly drawn label
		if v := a[0]; !isDefault(v) {
			n, err := toInt(ctx, fn, "y", v)
			if err == nil && (n < 0 || n >= int64(krr.K())) {
				err = argError(fn, "y", v, "the label must be an integer in 0..K-1 (K = "+itoa(krr.K())+")")
			}
			switch {
			case err == nil:
				y = int(n)
			case !r.strict:
				return nil, err
			}
		}
		key := [2]float64{krr.Epsilon(), float64(krr.K())}
		g := groups[key]
		if g == nil {
			g = &group{krr: krr}
			groups[key] = g
			order = append(order, g)
		}
		g.idx, g.ys, g.units = append(g.idx, i), append(g.ys, y), append(g.units, units[i])
	}
	for _, g := range order {
		released, err := c.releaseLabels(ctx, b, fn, g.krr, g.units, what.pick(g.idx), g.ys)
		if err != nil {
			return nil, err
		}
		for k, i := range g.idx {
			out[i] = int64(released[k])
		}
	}
	return out, nil
}

// evalLaplace releases LDP_LAPLACE(x, eps, lo, hi): the input is x clipped to [lo, hi] (a NULL x, or an
// analyst's invalid one, is the midpoint).
func (r *ledgerRelease) evalLaplace(ctx *sql.Context, c *collector, b engine.Budget, rows [][]any, units []string, what releaseWhat) ([]any, error) {
	const fn = "LDP_LAPLACE"
	out := make([]any, len(rows))
	type group struct {
		key   *laplaceKey
		idx   []int
		xs    []float64
		units []string
	}
	groups := map[[3]float64]*group{}
	var order []*group
	for i, a := range rows {
		if a[1] == nil || a[2] == nil || a[3] == nil {
			continue // NULL parameters: NULL out, nothing released
		}
		key, err := r.laplace.params(ctx, a[1], a[2], a[3])
		if err != nil {
			return nil, err
		}
		x := (key.lo + key.hi) / 2 // the default input
		if v := a[0]; !isDefault(v) {
			f, err := toFloat(ctx, fn, "x", v)
			if err == nil && (math.IsNaN(f) || math.IsInf(f, 0)) {
				err = argError(fn, "x", v, "the value must be a finite number")
			}
			switch {
			case err == nil:
				x = math.Min(math.Max(f, key.lo), key.hi)
			case !r.strict:
				return nil, err
			}
		}
		k := [3]float64{key.eps, key.lo, key.hi}
		g := groups[k]
		if g == nil {
			g = &group{key: key}
			groups[k] = g
			order = append(order, g)
		}
		g.idx, g.xs, g.units = append(g.idx, i), append(g.xs, x), append(g.units, units[i])
	}
	for _, g := range order {
		w := what.pick(g.idx)
		digests := w.digests(len(g.xs), "laplace", "laplace", g.key.eps, 0, g.key.lo, g.key.hi)
		src := mechanisms.NewCryptoSource()
		rels, err := c.releaseKeyed(ctx, b, fn, "laplace", "laplace", g.key.eps, g.units, digests, w.source != "", eachFresh(func(k int) ([]byte, error) {
			y, err := g.key.mech.AddNoiseScalar(g.xs[k], src)
			if err != nil {
				return nil, err
			}
			return binary.LittleEndian.AppendUint64(nil, math.Float64bits(y)), nil
		}))
		if err != nil {
			return nil, err
		}
		for k, i := range g.idx {
			if len(rels[k]) != 8 {
				return nil, fmt.Errorf("%s: memoised release of unit %s of %s has %d bytes, not 8", fn, g.units[k], b.TableRef, len(rels[k]))
			}
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(rels[k]))
		}
	}
	return out, nil
}

// ---------------------------------------------------------------------------------------------------
// Collecting charges

// collector gathers one statement's releases until they are charged together. Safe for concurrent use.
//
// Go code in this package that releases a protected table's data outside the SQL functions (the
// private validation of TRAIN_NOISY_CLASSIFIER, for example) uses one too:
//
//	b, protected := p.e.Ledger.Budget(engine.TableRef{Database: db, Table: table})
//	c := newCollector(p.e.Ledger, user(ctx))
//	what := releaseWhat{source: columnsSource(columnCanon("y")), rows: rowKeys}     // what is released, never its value
//	bits, err := c.releaseLabels(ctx, b, "TRAIN_NOISY_CLASSIFIER", krr2, units, what, correct) // k-RR, K = 2; memoised in memoise mode
//	...                                                                                 // nothing derived from bits leaves yet
//	err = c.commit(ctx)                                                                 // a *engine.BudgetError: return nothing
//
// with units from engine.UnitKey(values of b.UnitColumns...) and, where the unit columns do not include
// the primary key, rowKeys from engine.UnitKey(values of the primary key...).
type collector struct {
	ledger *engine.Ledger
	by     string

	mu      sync.Mutex
	charges []engine.Charge
	memo    map[memoID][]byte              // releases this statement made or found recorded in memoise mode, reused within it
	queues  map[*ledgerAggregate]*aggQueue // the aggregates' releases not yet made (ledger_agg.go)
}

type memoID struct {
	table        string
	unit, digest string
}

type collectorKey struct{}

func newCollector(l *engine.Ledger, by string) *collector {
	return &collector{ledger: l, by: by, memo: map[memoID][]byte{}}
}

func collectorFrom(ctx *sql.Context) *collector {
	c, _ := ctx.Value(collectorKey{}).(*collector)
	return c
}

// commit charges everything collected, in one ledger transaction.
func (c *collector) commit(ctx context.Context) error {
	c.mu.Lock()
	charges := c.charges
	c.charges = nil
	c.mu.Unlock()
	return c.ledger.Charge(ctx, c.by, charges)
}

// commitOrDefer is commit, unless the statement's rows commit with their charges (a CREATE TABLE … AS
// SELECT or INSERT … SELECT: engine/ledger_tx.go), whose write then takes them; they are checked
// against the budgets now.
func (c *collector) commitOrDefer(ctx context.Context, stmt context.Context) error {
	c.mu.Lock()
	charges := c.charges
	c.mu.Unlock()
	if len(charges) > 0 {
		if deferred, err := c.ledger.Defer(stmt, c.by, charges); deferred {
			c.mu.Lock()
			c.charges = nil
			c.mu.Unlock()
			return err
		}
	}
	return c.commit(ctx)
}

// take returns the charges collected, leaving none.
func (c *collector) take() []engine.Charge {
	c.mu.Lock()
	defer c.mu.Unlock()
	charges := c.charges
	c.charges = nil
	return charges
}

// mechanismID identifies a mechanism in memo keys: a mechanism registered again (another binary or
// model under the same name) does not return the releases of the old one.
func mechanismID(m *resolvedMechanism) string {
	return m.record.Name + "@" + m.record.SHA256 + "@" + m.record.Model + "@" + m.record.RegisteredAt.UTC().Format(time.RFC3339Nano)
}

// lookup splits keys into those already released (in this statement, then in the ledger) and the
// misses; hits maps the position to the recorded release bytes. Only for releases memoised in memoise
// mode.
func (c *collector) lookup(ctx context.Context, b engine.Budget, units, digests []string) (map[int][]byte, error) {
	hits := map[int][]byte{}
	tk := strings.ToLower(b.TableRef.String())
	var ask []engine.MemoKey
	var askAt []int
	c.mu.Lock()
	for i := range units {
		if rel, ok := c.memo[memoID{tk, units[i], digests[i]}]; ok {
			hits[i] = rel
			continue
		}
		ask, askAt = append(ask, engine.MemoKey{Unit: units[i], Digest: digests[i]}), append(askAt, i)
	}
	c.mu.Unlock()
	if len(ask) == 0 {
		return hits, nil
	}
	found, err := c.ledger.Memo(ctx, b.TableRef, ask)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, key := range ask {
		if rel, ok := found[key]; ok {
			hits[askAt[k]] = rel
			// Kept for the statement: the analyst aggregates look their releases up twice, to check the
			// budget before evaluating anything and to release (ledger_agg.go), and ask the ledger once.
			c.memo[memoID{tk, key.Unit, key.Digest}] = rel
		}
	}
	return hits, nil
}

// record adds fresh releases to the statement's charges (and, in memoise mode, those it may return
// again to its memo).
func (c *collector) record(b engine.Budget, charges []engine.Charge) {
	tk := strings.ToLower(b.TableRef.String())
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range charges {
		if b.Mode == engine.BudgetMemoise && ch.Release != nil {
			c.memo[memoID{tk, ch.Unit, ch.Digest}] = ch.Release
		}
	}
	c.charges = append(c.charges, charges...)
}

// releaseVectors releases one feature vector per row of protected table b through mech at eps (a nil
// row is the default input, the zero vector), reusing memoised releases of what (in memoise mode) and
// collecting the charges of fresh ones.
func (c *collector) releaseVectors(ctx context.Context, b engine.Budget, fn string, mech *resolvedMechanism, randomiser string, eps float64,
	units []string, what releaseWhat, rows [][]float32) ([][]float64, error) {
	if _, err := mech.randomiser(randomiser, eps); err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	for i, v := range rows {
		if v == nil {
			rows[i] = make([]float32, mech.desc.InputDim)
		}
	}
	digests := what.digests(len(rows), mechanismID(mech), randomiser, eps, 0)
	rels, err := c.releaseKeyed(ctx, b, fn, mech.record.Name, randomiser, eps, units, digests, what.source != "", func(fresh []int) ([][]byte, error) {
		in := make([][]float32, len(fresh))
		for k, i := range fresh {
			in[k] = rows[i]
		}
		released, err := mech.privatise(ctx, in, randomiser, eps)
		if err != nil {
			return nil, err
		}
		out := make([][]byte, len(released))
		for k, v := range released {
			out[k] = packFloat64s(v)
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	out := make([][]float64, len(rows))
	for i, rel := range rels {
		if out[i], err = unpackFloat64s(rel, mech.desc.OutputDim); err != nil {
			return nil, fmt.Errorf("%s: memoised release of unit %s of %s: %w", fn, units[i], b.TableRef, err)
		}
	}
	return out, nil
}

// releaseLabels releases one label per row of protected table b by k-RR (a negative label is the
// default: a label drawn uniformly from 0..K-1), like releaseVectors.
func (c *collector) releaseLabels(ctx context.Context, b engine.Budget, fn string, krr *mechanisms.KRR, units []string, what releaseWhat, ys []int) ([]int, error) {
	digests := what.digests(len(ys), "k-rr", "k-rr", krr.Epsilon(), krr.K())
	src := mechanisms.NewCryptoSource()
	rels, err := c.releaseKeyed(ctx, b, fn, "k-rr", "k-rr", krr.Epsilon(), units, digests, what.source != "", eachFresh(func(i int) ([]byte, error) {
		var out int
		if ys[i] < 0 {
			out = mechanisms.IntN(src, krr.K())
		} else {
			var err error
			if out, err = krr.Randomise(ys[i], src); err != nil {
				return nil, err
			}
		}
		return binary.LittleEndian.AppendUint64(nil, uint64(int64(out))), nil
	}))
	if err != nil {
		return nil, err
	}
	out := make([]int, len(ys))
	for i, rel := range rels {
		if len(rel) != 8 {
			return nil, fmt.Errorf("%s: memoised release of unit %s of %s has %d bytes, not 8", fn, units[i], b.TableRef, len(rel))
		}
		out[i] = int(int64(binary.LittleEndian.Uint64(rel)))
	}
	return out, nil
}

// eachFresh makes a draw function for releaseKeyed from one that draws the release at position i.
func eachFresh(draw func(i int) ([]byte, error)) func(fresh []int) ([][]byte, error) {
	return func(fresh []int) ([][]byte, error) {
		out := make([][]byte, len(fresh))
		for k, i := range fresh {
			rel, err := draw(i)
			if err != nil {
				return nil, err
			}
			out[k] = rel
		}
		return out, nil
	}
}

// releaseKeyed releases one value per row of protected table b. Where the releases are memoisable (their
// digests name what is released: see releaseWhat) and the table is in memoise mode, a release whose unit
// and digest were released before (in this statement or in the ledger) is returned as recorded, a
// repeated one within the call is made once, and the others are drawn fresh; otherwise every release
// is drawn fresh. draw(fresh) makes the releases at positions fresh; their charges (eps, mechanism and
// randomiser as given) are collected, with their bytes where they are memoisable (so that memoise mode
// returns them later, also after a switch from charge mode) and without otherwise.
//
// Whether a release is looked up, and what it is looked up under, never depends on the released value:
// the digests name the column and the row, not the value in it.
func (c *collector) releaseKeyed(ctx context.Context, b engine.Budget, fn, mechanism, randomiser string, eps float64, units, digests []string, memoisable bool,
	draw func(fresh []int) ([][]byte, error)) ([][]byte, error) {
	hits, fresh, dups, err := c.split(ctx, b, units, digests, memoisable)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	out := make([][]byte, len(units))
	for i, rel := range hits {
		out[i] = rel
	}
	if len(fresh) > 0 {
		rels, err := draw(fresh)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fn, err)
		}
		if len(rels) != len(fresh) {
			return nil, fmt.Errorf("%s: %d releases for %d inputs", fn, len(rels), len(fresh))
		}
		charges := make([]engine.Charge, len(fresh))
		for k, i := range fresh {
			out[i] = rels[k]
			charges[k] = engine.Charge{Table: b.TableRef, Unit: units[i], Eps: eps, Function: fn, Mechanism: mechanism,
				Randomiser: randomiser, Digest: digests[i], Release: rels[k]}
			if !memoisable {
				charges[k].Release = nil
			}
		}
		c.record(b, charges)
	}
	for _, d := range dups {
		out[d[0]] = out[d[1]]
	}
	return out, nil
}

// split sorts releases keyed by units and digests into the memoised ones (hits: position → the recorded
// release; only where they are memoisable and b is in memoise mode), the fresh ones to draw, and the
// repeats within the call of a fresh one (dups: {position, position of the first}).
func (c *collector) split(ctx context.Context, b engine.Budget, units, digests []string, memoisable bool) (hits map[int][]byte, fresh []int, dups [][2]int, err error) {
	memoise := memoisable && b.Mode == engine.BudgetMemoise
	hits = map[int][]byte{}
	if memoise {
		if hits, err = c.lookup(ctx, b, units, digests); err != nil {
			return nil, nil, nil, err
		}
	}
	first := map[[2]string]int{}
	for i := range units {
		if _, hit := hits[i]; hit {
			continue
		}
		if memoise {
			k := [2]string{units[i], digests[i]}
			if j, ok := first[k]; ok {
				dups = append(dups, [2]int{i, j})
				continue
			}
			first[k] = i
		}
		fresh = append(fresh, i)
	}
	return hits, fresh, dups, nil
}

// check refuses (with the ledger's *BudgetError) releases whose charges, with those the statement has
// collected so far, would take a unit over its budget now; it charges nothing (engine.Ledger.Check).
func (c *collector) check(charges []engine.Charge) error {
	c.mu.Lock()
	all := append(append([]engine.Charge{}, c.charges...), charges...)
	c.mu.Unlock()
	return c.ledger.Check(all)
}

func packFloat64s(v []float64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
	}
	return b
}

func unpackFloat64s(b []byte, dim int) ([]float64, error) {
	if len(b) != 8*dim {
		return nil, fmt.Errorf("%d bytes, not %d values", len(b), dim)
	}
	v := make([]float64, dim)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v, nil
}

// ---------------------------------------------------------------------------------------------------
// The gate

// ledgerGateRule puts a ledgerGate above the part of the statement that releases protected data.
func ledgerGateRule(ctx *sql.Context, a *analyzer.Analyzer, n sql.Node, scope *plan.Scope, sel analyzer.RuleSelector, _ *sql.QueryFlags) (sql.Node, transform.TreeIdentity, error) {
	l := ledgerOf(a)
	if l == nil || scope.RecursionDepth() > 0 || !assignsExecIndexes(sel) || !l.AnyProtected() || !containsRelease(ctx, n) {
		return n, transform.SameTree, nil
	}
	if containsGate(ctx, n) {
		if ins, ok := n.(*plan.InsertInto); ok {
			// An INSERT's source is analysed on its own first, and has its gate already: the rows
			// commit with their charges (engine.ChargeWithRows), which the gate checks and defers to
			// the destination's editor.
			return engine.ChargeWithRows(ins), transform.NewTree, nil
		}
		return n, transform.SameTree, nil
	}
	switch root := n.(type) {
	case *plan.CreateView:
		return n, transform.SameTree, nil // nothing runs: the view's query is planned again where it is used
	case *plan.InsertInto:
		// The rows commit with their charges (engine.ChargeWithRows): the gate checks them and defers
		// them to the destination's editor.
		return engine.ChargeWithRows(root.WithSource(&ledgerGate{UnaryNode: plan.UnaryNode{Child: root.Source}, ledger: l})), transform.NewTree, nil
	case *plan.Into:
		nn, err := root.WithChildren(ctx, &ledgerGate{UnaryNode: plan.UnaryNode{Child: root.Child}, ledger: l})
		return nn, transform.NewTree, err
	}
	if !n.IsReadOnly() {
		return nil, transform.SameTree, errors.New("releases of protected data are allowed in SELECT, INSERT … SELECT and CREATE TABLE … AS SELECT only; nothing was released")
	}
	return &ledgerGate{UnaryNode: plan.UnaryNode{Child: n}, ledger: l}, transform.NewTree, nil
}

func containsRelease(ctx *sql.Context, n sql.Node) bool {
	found := false
	_ = walkPlan(ctx, n, false, func(n sql.Node, _ bool) error {
		if be, ok := n.(*batchEval); ok {
			for _, e := range be.exprs {
				if hasRelease(ctx, e) {
					found = true
				}
			}
		}
		if ex, ok := n.(sql.Expressioner); ok {
			for _, e := range ex.Expressions() {
				if hasRelease(ctx, e) {
					found = true
				}
			}
		}
		return nil
	})
	return found
}

func hasRelease(ctx *sql.Context, e sql.Expression) bool {
	return transform.InspectExpr(ctx, e, func(ctx *sql.Context, e sql.Expression) bool {
		switch e.(type) {
		case *ledgerRelease, *ledgerAggregate:
			return true
		}
		return false
	})
}

func containsGate(ctx *sql.Context, n sql.Node) bool {
	found := false
	_ = walkPlan(ctx, n, false, func(n sql.Node, _ bool) error {
		if _, ok := n.(*ledgerGate); ok {
			found = true
		}
		return nil
	})
	return found
}

// ledgerGate runs its child to completion, charges every release the child made in one ledger
// transaction, and only then returns the child's rows; when the charge fails it returns the error and
// no row. The rows are held in memory meanwhile.
type ledgerGate struct {
	plan.UnaryNode
	ledger *engine.Ledger
}

var _ sql.ExecBuilderNode = (*ledgerGate)(nil)

func (g *ledgerGate) IsReadOnly() bool { return g.Child.IsReadOnly() }

func (g *ledgerGate) String() string {
	tp := sql.NewTreePrinter()
	_ = tp.WriteNode("LedgerGate(charge every release, then return the rows)")
	_ = tp.WriteChildren(g.Child.String())
	return tp.String()
}

func (g *ledgerGate) WithChildren(_ *sql.Context, children ...sql.Node) (sql.Node, error) {
	if len(children) != 1 {
		return nil, sql.ErrInvalidChildrenNumber.New(g, len(children), 1)
	}
	ng := *g
	ng.Child = children[0]
	return &ng, nil
}

// BuildRowIter implements sql.ExecBuilderNode: the child runs with the statement's collector in its
// context, where the ledgerRelease expressions find it.
func (g *ledgerGate) BuildRowIter(ctx *sql.Context, builder sql.NodeExecBuilder, r sql.Row) (sql.RowIter, error) {
	if collectorFrom(ctx) != nil {
		return builder.Build(ctx, g.Child, r) // inside another gate: that one charges
	}
	c := newCollector(g.ledger, user(ctx))
	cctx := ctx.WithContext(context.WithValue(ctx.Context, collectorKey{}, c))
	child, err := builder.Build(cctx, g.Child, r)
	if err != nil {
		return nil, err
	}
	return &gateIter{child: child, cctx: cctx, c: c}, nil
}

type gateIter struct {
	child  sql.RowIter
	cctx   *sql.Context
	c      *collector
	closed bool

	drained bool
	err     error
	rows    []sql.Row
	pos     int
}

func (it *gateIter) Next(ctx *sql.Context) (sql.Row, error) {
	if !it.drained {
		it.drained = true
		it.err = it.drain(ctx)
		if it.err != nil {
			it.rows = nil
		}
	}
	if it.err != nil {
		return nil, it.err
	}
	if it.pos >= len(it.rows) {
		return nil, io.EOF
	}
	r := it.rows[it.pos]
	it.rows[it.pos] = nil
	it.pos++
	return r, nil
}

// drain reads every row of the child, closes it (so no release is still being made), then charges.
func (it *gateIter) drain(ctx *sql.Context) error {
	for {
		r, err := it.child.Next(it.cctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		it.rows = append(it.rows, r)
	}
	it.closed = true
	if err := it.child.Close(it.cctx); err != nil {
		return err
	}
	return it.c.commitOrDefer(ctx, it.cctx)
}

func (it *gateIter) Close(*sql.Context) error {
	it.rows = nil
	if it.closed {
		return nil
	}
	it.closed = true
	return it.child.Close(it.cctx)
}
