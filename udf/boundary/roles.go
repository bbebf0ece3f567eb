package boundary

import (
	"fmt"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/analyzer"
	"github.com/dolthub/go-mysql-server/sql/expression"
	"github.com/dolthub/go-mysql-server/sql/plan"
	"github.com/dolthub/go-mysql-server/sql/transform"

	"github.com/ldpsql/ldpsql/engine"
)

// Roles.
//
// A DBA is root or any user (or role) holding the global SUPER privilege:
//
//	CREATE USER dba@'%' IDENTIFIED BY '…';
//	GRANT SUPER ON *.* TO dba@'%';            -- also: GRANT ALL ON *.* …
//
// A DBA reads raw tables, sets budgets (CALL ldp_set_budget), registers and fits mechanisms (the
// AdminOnly procedures, which also accept an explicit GRANT EXECUTE ON PROCEDURE to a single user),
// reads the ledger (ldp_budget, ldp_budget_units, ldp_releases) and may pass an explicit unit_key.
//
// Every other user is an analyst. GMS's grants decide which tables an analyst may read at all, e.g.
//
//	CREATE USER analyst@'%' IDENTIFIED BY '…';
//	GRANT SELECT, EXECUTE ON ldpsql.* TO analyst@'%';                     -- query; call LDP functions and ldp_privatize
//	GRANT SELECT, INSERT, CREATE, DROP, ALTER ON scratch.* TO analyst@'%'; -- where ldp_privatize / CREATE TABLE AS write
//
// and on top of them, for a protected table (one with a budget), an analyst may reference its unit
// columns (they identify units and are not released data) anywhere, and its other columns only as the
// released argument of a release:
//
//   - LDP_ENCODE, LDP_ENCODE_JSON, FLIP_LABEL, LDP_LAPLACE: a column, or LDP_VECTOR of columns (a
//     literal there is refused for everyone: keyed by the columns alone, LDP_VECTOR(y, 34) would be
//     another release of y whatever 34 is; keyed by value, a test of whether y's row holds 34);
//   - PRIVATE_ACCURACY, RR_FREQUENCY (aggregate.go): any pure expression of the row (pureExpression:
//     its columns, literals, comparisons (IN, BETWEEN, LIKE), arithmetic, logic, CASE/IF/COALESCE,
//     CAST, LDP_VECTOR and PREDICT of a named model), e.g. PRIVATE_ACCURACY(PREDICT('m', f) = y, 1),
//     because only the k-RR release of its value leaves the row, and each distinct expression is
//     charged as its own release. It is bounded (checkAnalystExpression: 1,000 expressions, 1,024-byte
//     literals) and evaluated after the budget check, in fixed time slots (slots.go), so that how long
//     the statement takes does not tell its value.
//
// The argument is evaluated with its errors turned into the default input and its warnings dropped, so
// neither quotes the row. Every other reference — in a SELECT list (SELECT * included), in WHERE,
// JOIN … ON, GROUP BY, HAVING, ORDER BY, another aggregate, a subquery, a view, a CTE, INSERT … SELECT,
// CREATE TABLE … AS SELECT, UPDATE or DELETE — fails with "access denied". Releases are charged to the
// ledger, so an analyst can learn about a unit no more than its budget allows.

// IsDBA reports whether the session's user is a DBA: root, or a holder of the global SUPER privilege.
// Without user accounts (privileges disabled) everyone is.
func IsDBA(ctx *sql.Context, a *analyzer.Analyzer) bool {
	return engine.HasGlobalPrivilege(ctx, a.Catalog.MySQLDb, sql.PrivilegeType_Super)
}

func errRawColumn(col, table string) error {
	return fmt.Errorf("access denied: column %s of protected table %s is raw data; release it with LDP_ENCODE, FLIP_LABEL, LDP_LAPLACE, RR_FREQUENCY or PRIVATE_ACCURACY", col, table)
}

// checkAnalystArgument limits what an analyst may release to a column or LDP_VECTOR of columns:
// expressions that cannot fail or warn in ways that would quote the raw value (a literal beside a column
// is refused for everyone: checkReleasedVector).
func checkAnalystArgument(fn string, inst *tableInstance, arg sql.Expression) error {
	if columnsOnly(arg) {
		return nil
	}
	return fmt.Errorf("access denied: %s on protected table %s: an analyst may release a column or LDP_VECTOR(columns), not %s",
		fn, inst.budget.TableRef, arg)
}

// checkRawAccess refuses, for an analyst, any reference to a raw column of a protected table outside
// the released argument of a bound release (see the comment at the top of this file).
//
// A derived table, view or CTE may pass a raw column through (SELECT id AS i, y AS label FROM t, in its
// SELECT list, as the column itself or under an alias) so that a release outside it can read it
// (SELECT i, FLIP_LABEL(label, 1, 2) FROM v): the derived table's column is then raw data itself (a
// carrier), allowed only in a release's argument, like the column it carries. The pass-through is
// allowed only where every row of the derived table is consumed by the expressions of a SELECT list,
// GROUP BY or window above it (through WHERE, ORDER BY, LIMIT and joins), whose references to carriers
// are checked; not under DISTINCT (the number of rows would depend on the values), a UNION, or where
// the derived table's rows are the statement's output.
func (b *binder) checkRawAccess(n sql.Node) error {
	passThrough := b.passThroughProjections(n)
	// raw returns the protected table and column that a reference reads as raw data, if it does.
	raw := func(gf *expression.GetField) (string, string, bool) {
		id := gf.Id()
		if inst := b.pt.byCol[id]; inst != nil {
			return inst.cols[id].Name, inst.budget.TableRef.String(), !inst.unit[id]
		}
		if b.prov[id] == nil {
			return "", "", false
		}
		base := b.baseColumn(gf)
		if base == 0 {
			return "", "", false
		}
		inst := b.pt.byCol[base]
		return inst.cols[base].Name, inst.budget.TableRef.String(), !inst.unit[base]
	}
	var check func(e sql.Expression) error
	check = func(e sql.Expression) error {
		switch x := e.(type) {
		case *ledgerRelease:
			for _, c := range append(append([]sql.Expression{}, x.args[1:]...), x.units...) { // its parameters and unit key: not released
				if err := check(c); err != nil {
					return err
				}
			}
			return nil // (its row identity, x.row, is a hidden argument: only the memo key reads it)
		case *ledgerAggregate:
			for _, c := range append(append([]sql.Expression{}, x.args[1:]...), x.units...) {
				if err := check(c); err != nil {
					return err
				}
			}
			return nil
		case *expression.GetField:
			if col, table, isRaw := raw(x); isRaw {
				return errRawColumn(col, table)
			}
			return nil
		case *plan.Subquery:
			return nil // its plan is walked on its own
		}
		for _, c := range e.Children() {
			if err := check(c); err != nil {
				return err
			}
		}
		return nil
	}
	return WalkPlan(b.ctx, n, false, func(n sql.Node, _ bool) error {
		ex, ok := n.(sql.Expressioner)
		if !ok {
			return nil
		}
		p, isProject := n.(*plan.Project)
		for _, e := range ex.Expressions() {
			if isProject && passThrough[p] && isPassThrough(e) {
				continue
			}
			if err := check(e); err != nil {
				return err
			}
		}
		return nil
	})
}

// isPassThrough reports whether a SELECT list entry is a column as it is, or renamed.
func isPassThrough(e sql.Expression) bool {
	if a, ok := e.(*expression.Alias); ok {
		e = a.Child
	}
	_, ok := e.(*expression.GetField)
	return ok
}

// passThroughProjections returns the SELECT lists of derived tables (views, CTEs) that may pass raw
// columns through (see checkRawAccess).
func (b *binder) passThroughProjections(n sql.Node) map[*plan.Project]bool {
	out := map[*plan.Project]bool{}
	var visit func(n sql.Node, path []sql.Node)
	visit = func(n sql.Node, path []sql.Node) {
		if sa, ok := n.(*plan.SubqueryAlias); ok && consumedByExpressions(path) {
			for c := sa.Child; c != nil; {
				switch x := c.(type) {
				case *plan.Project:
					out[x] = true
					c = nil
				case *plan.Filter, *plan.Sort, *plan.Limit, *plan.Offset, *plan.TopN:
					c = x.Children()[0]
				default:
					c = nil
				}
			}
		}
		if ins, ok := n.(*plan.InsertInto); ok && ins.Source != nil {
			visit(ins.Source, nil) // its rows are written as they are
		}
		if ex, ok := n.(sql.Expressioner); ok {
			for _, e := range ex.Expressions() {
				transform.InspectExpr(b.ctx, e, func(ctx *sql.Context, e sql.Expression) bool {
					if sq, ok := e.(*plan.Subquery); ok && sq.Query != nil {
						visit(sq.Query, nil) // its rows are the expression's values
					}
					return false
				})
			}
		}
		inner := append(append([]sql.Node{}, path...), n)
		for _, c := range n.Children() {
			visit(c, inner)
		}
	}
	visit(n, nil)
	return out
}

// consumedByExpressions reports whether the rows of the node below path reach the expressions of a
// SELECT list, GROUP BY or window (through filters, sorts, limits and joins, which pass rows on as they
// are) rather than the statement's output, a DISTINCT or a set operation.
func consumedByExpressions(path []sql.Node) bool {
	for i := len(path) - 1; i >= 0; i-- {
		switch path[i].(type) {
		case *plan.Project, *plan.GroupBy, *plan.Window:
			return true
		case *plan.Filter, *plan.Having, *plan.Sort, *plan.Limit, *plan.Offset, *plan.TopN, *plan.JoinNode:
			continue
		}
		return false
	}
	return false
}
