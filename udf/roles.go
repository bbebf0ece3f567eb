package udf

import (
	"fmt"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/analyzer"
	"github.com/dolthub/go-mysql-server/sql/expression"
	"github.com/dolthub/go-mysql-server/sql/plan"
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
//   - LDP_ENCODE, LDP_ENCODE_JSON, FLIP_LABEL, LDP_LAPLACE: a column, or LDP_VECTOR of columns and
//     literals;
//   - PRIVATE_ACCURACY, RR_FREQUENCY (ledger_agg.go): any pure expression of the row (pureExpression:
//     its columns, literals, comparisons (IN, BETWEEN, LIKE), arithmetic, logic, CASE/IF/COALESCE,
//     CAST, LDP_VECTOR and PREDICT of a named model), e.g. PRIVATE_ACCURACY(PREDICT('m', f) = y, 1),
//     because only the k-RR release of its value leaves the row, and each distinct expression is
//     charged as its own release.
//
// The argument is evaluated with its errors turned into the default input and its warnings dropped, so
// neither quotes the row. Every other reference — in a SELECT list (SELECT * included), in WHERE,
// JOIN … ON, GROUP BY, HAVING, ORDER BY, another aggregate, a subquery, a view, a CTE, INSERT … SELECT,
// CREATE TABLE … AS SELECT, UPDATE or DELETE — fails with "access denied". Releases are charged to the
// ledger, so an analyst can learn about a unit no more than its budget allows.

// isDBA reports whether the session's user is a DBA: root, or a holder of the global SUPER privilege.
// Without user accounts (privileges disabled) everyone is.
func isDBA(ctx *sql.Context, a *analyzer.Analyzer) bool {
	mdb := a.Catalog.MySQLDb
	if mdb == nil || !mdb.Enabled() {
		return true
	}
	return mdb.UserActivePrivilegeSet(ctx).Has(sql.PrivilegeType_Super)
}

func errRawColumn(col, table string) error {
	return fmt.Errorf("access denied: column %s of protected table %s is raw data; release it with LDP_ENCODE, FLIP_LABEL, LDP_LAPLACE, RR_FREQUENCY or PRIVATE_ACCURACY", col, table)
}

// checkAnalystArgument limits what an analyst may release to a column or LDP_VECTOR of columns and
// literals: expressions that cannot fail or warn in ways that would quote the raw value.
func checkAnalystArgument(fn string, inst *tableInstance, arg sql.Expression) error {
	ok := func(e sql.Expression) bool {
		switch e.(type) {
		case *expression.GetField, *expression.Literal:
			return true
		}
		return false
	}
	if ok(arg) {
		return nil
	}
	if v, isVec := arg.(*LDPVector); isVec {
		all := true
		for _, c := range v.args {
			all = all && ok(c)
		}
		if all {
			return nil
		}
	}
	return fmt.Errorf("access denied: %s on protected table %s: an analyst may release a column or LDP_VECTOR(columns), not %s",
		fn, inst.budget.TableRef, arg)
}

// checkRawAccess refuses, for an analyst, any reference to a raw column of a protected table outside
// the released argument of a bound release (see the comment at the top of this file).
func checkRawAccess(ctx *sql.Context, pt *planTables, n sql.Node) error {
	var check func(e sql.Expression) error
	check = func(e sql.Expression) error {
		switch x := e.(type) {
		case *ledgerRelease, *ledgerAggregate:
			for _, c := range x.Children()[1:] { // its parameters and unit key: not released
				if err := check(c); err != nil {
					return err
				}
			}
			return nil
		case *expression.GetField:
			if inst := pt.byCol[x.Id()]; inst != nil && !inst.unit[x.Id()] {
				return errRawColumn(inst.cols[x.Id()].Name, inst.budget.TableRef.String())
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
	return walkPlan(ctx, n, false, func(n sql.Node, _ bool) error {
		ex, ok := n.(sql.Expressioner)
		if !ok {
			return nil
		}
		for _, e := range ex.Expressions() {
			if err := check(e); err != nil {
				return err
			}
		}
		return nil
	})
}
