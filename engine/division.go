package engine

import (
	"fmt"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/analyzer"
	"github.com/dolthub/go-mysql-server/sql/expression"
	"github.com/dolthub/go-mysql-server/sql/plan"
	"github.com/dolthub/go-mysql-server/sql/transform"
	"github.com/dolthub/vitess/go/mysql"
)

// Division by zero as MySQL treats it.
//
// x / 0, x DIV 0 and x % 0 (MOD) are NULL with warning 1365 "Division by 0" (GMS does this). MySQL
// adds, for data-changing statements: when sql_mode holds ERROR_FOR_DIVISION_BY_ZERO and a strict mode
// (STRICT_TRANS_TABLES or STRICT_ALL_TABLES), an INSERT, REPLACE or UPDATE that divides by zero fails
// with error 1365 (SQLSTATE 22012) instead of storing NULL, unless it says IGNORE. GMS ignores that
// mode; strictDivisionRule wraps the divisions of such statements so that they fail. ldpsql's default
// sql_mode has ERROR_FOR_DIVISION_BY_ZERO, as MySQL 8's (mysql8.go, DefaultSQLMode). An analyst's
// release expression never fails or warns because of it: package udf/boundary evaluates it per row
// where an error is the default input and warnings are dropped, so a statement's outcome cannot tell a
// zero divisor in a raw value.

// ruleStrictDivision is the analyzer rule id of strictDivisionRule, far from GMS's own ids.
const ruleStrictDivision analyzer.RuleId = 100_006

func init() {
	// AlwaysBeforeDefault: simple INSERT … VALUES gets only these rules (see transactions.go).
	analyzer.AlwaysBeforeDefault = append(analyzer.AlwaysBeforeDefault, analyzer.Rule{Id: ruleStrictDivision, Apply: strictDivisionRule})
}

// strictDivisionMode reports whether ctx's sql_mode makes a data change that divides by zero fail.
func strictDivisionMode(ctx *sql.Context) bool {
	m := sql.LoadSqlMode(ctx)
	return (m.Strict() && m.ModeEnabled(sql.ErrorForDivisionByZero)) || m.ModeEnabled("TRADITIONAL")
}

func strictDivisionRule(ctx *sql.Context, _ *analyzer.Analyzer, n sql.Node, _ *plan.Scope, _ analyzer.RuleSelector, _ *sql.QueryFlags) (sql.Node, transform.TreeIdentity, error) {
	if !strictDivisionMode(ctx) {
		return n, transform.SameTree, nil
	}
	return transform.Node(ctx, n, func(ctx *sql.Context, n sql.Node) (sql.Node, transform.TreeIdentity, error) {
		switch x := n.(type) {
		case *plan.InsertInto:
			if x.Ignore || x.Source == nil {
				return n, transform.SameTree, nil
			}
			src, sameSrc, err := wrapDivisions(ctx, x.Source)
			if err != nil {
				return nil, transform.SameTree, err
			}
			// ON DUPLICATE KEY UPDATE's assignments are the InsertInto's own expressions.
			exprs := x.Expressions()
			nexprs, sameExprs, err := wrapDivisionExprs(ctx, exprs)
			if err != nil {
				return nil, transform.SameTree, err
			}
			if sameSrc && sameExprs {
				return n, transform.SameTree, nil
			}
			var nn sql.Node = x.WithSource(src)
			if !sameExprs {
				if nn, err = nn.(*plan.InsertInto).WithExpressions(ctx, nexprs...); err != nil {
					return nil, transform.SameTree, err
				}
			}
			return nn, transform.NewTree, nil
		case *plan.Update:
			if x.Ignore {
				return n, transform.SameTree, nil
			}
			nn, same, err := wrapDivisions(ctx, x)
			if err != nil || same {
				return n, transform.SameTree, err
			}
			return nn, transform.NewTree, nil
		}
		return n, transform.SameTree, nil
	})
}

// wrapDivisions wraps the arithmetic holding a division in the expressions of n and the nodes below it.
func wrapDivisions(ctx *sql.Context, n sql.Node) (sql.Node, bool, error) {
	nn, id, err := transform.Node(ctx, n, func(ctx *sql.Context, n sql.Node) (sql.Node, transform.TreeIdentity, error) {
		ex, ok := n.(sql.Expressioner)
		if !ok {
			return n, transform.SameTree, nil
		}
		exprs, same, err := wrapDivisionExprs(ctx, ex.Expressions())
		if err != nil || same {
			return n, transform.SameTree, err
		}
		nn, err := ex.WithExpressions(ctx, exprs...)
		return nn, transform.NewTree, err
	})
	return nn, id == transform.SameTree, err
}

func wrapDivisionExprs(ctx *sql.Context, exprs []sql.Expression) ([]sql.Expression, bool, error) {
	same := true
	out := make([]sql.Expression, len(exprs))
	for i, e := range exprs {
		ne, changed, err := wrapTopArithmetic(ctx, e)
		if err != nil {
			return nil, false, err
		}
		same = same && !changed
		out[i] = ne
	}
	return out, same, nil
}

// wrapTopArithmetic wraps, top down, each outermost arithmetic expression that holds a division. The
// arithmetic below stays whole: GMS's decimal division looks through nested +, -, *, / for its scale.
// Comparisons are left alone (GMS sets their divisions' scale apart).
func wrapTopArithmetic(ctx *sql.Context, e sql.Expression) (sql.Expression, bool, error) {
	switch e.(type) {
	case nil, *strictDivision, expression.Comparer:
		return e, false, nil
	case expression.ArithmeticOp:
		if hasDivision(ctx, e) {
			return &strictDivision{Expression: e}, true, nil
		}
		return e, false, nil
	}
	children := e.Children()
	if len(children) == 0 {
		return e, false, nil
	}
	nc, same, err := wrapDivisionExprs(ctx, children)
	if err != nil || same {
		return e, false, err
	}
	ne, err := e.WithChildren(ctx, nc...)
	return ne, err == nil, err
}

func hasDivision(ctx *sql.Context, e sql.Expression) bool {
	return transform.InspectExpr(ctx, e, func(_ *sql.Context, e sql.Expression) bool {
		switch e.(type) {
		case *expression.Div, *expression.IntDiv, *expression.Mod:
			return true
		}
		return false
	})
}

// strictDivision is arithmetic holding a division that fails with error 1365 where a zero divisor
// would make it NULL with warning 1365.
type strictDivision struct {
	sql.Expression // an expression.ArithmeticOp
}

func (d *strictDivision) Children() []sql.Expression { return []sql.Expression{d.Expression} }

func (d *strictDivision) WithChildren(_ *sql.Context, children ...sql.Expression) (sql.Expression, error) {
	if len(children) != 1 {
		return nil, sql.ErrInvalidChildrenNumber.New(d, len(children), 1)
	}
	return &strictDivision{Expression: children[0]}, nil
}

func (d *strictDivision) String() string { return d.Expression.String() }

// errDivisionByZero is MySQL's error 1365.
func errDivisionByZero() error {
	return mysql.NewSQLError(expression.ERDivisionByZero, "22012", "Division by 0")
}

func (d *strictDivision) Eval(ctx *sql.Context, row sql.Row) (any, error) {
	var before uint16
	if ctx != nil && ctx.Session != nil {
		before = ctx.Session.WarningCount()
	}
	v, err := d.Expression.Eval(ctx, row)
	if err != nil || v != nil || ctx == nil || ctx.Session == nil || ctx.Session.WarningCount() == before {
		return v, err
	}
	// NULL with a new warning: a zero divisor if the newest is 1365 (a NULL operand warns nothing).
	if w := ctx.Session.Warnings(); len(w) > 0 && w[0].Code == expression.ERDivisionByZero {
		return nil, errDivisionByZero()
	}
	return v, err
}

// DebugString shows the wrapper in plans.
func (d *strictDivision) DebugString(ctx *sql.Context) string {
	return fmt.Sprintf("strict(%s)", sql.DebugString(ctx, d.Expression))
}
