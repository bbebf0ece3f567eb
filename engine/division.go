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
// mode; strictDivisionRule wraps the divisions of such statements so that they fail. (ldpsql's default
// sql_mode is GMS's, without ERROR_FOR_DIVISION_BY_ZERO; MySQL 8's default has it.)

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

// wrapDivisions wraps every division of n's expressions, in n and the nodes below it.
func wrapDivisions(ctx *sql.Context, n sql.Node) (sql.Node, bool, error) {
	nn, id, err := transform.NodeExprs(ctx, n, func(ctx *sql.Context, e sql.Expression) (sql.Expression, transform.TreeIdentity, error) {
		return wrapDivision(e)
	})
	return nn, id == transform.SameTree, err
}

func wrapDivisionExprs(ctx *sql.Context, exprs []sql.Expression) ([]sql.Expression, bool, error) {
	same := true
	out := make([]sql.Expression, len(exprs))
	for i, e := range exprs {
		ne, id, err := transform.Expr(ctx, e, func(ctx *sql.Context, e sql.Expression) (sql.Expression, transform.TreeIdentity, error) {
			return wrapDivision(e)
		})
		if err != nil {
			return nil, false, err
		}
		if id == transform.NewTree {
			same = false
		}
		out[i] = ne
	}
	return out, same, nil
}

func wrapDivision(e sql.Expression) (sql.Expression, transform.TreeIdentity, error) {
	switch e.(type) {
	case *expression.Div, *expression.IntDiv, *expression.Mod:
		return &strictDivision{Expression: e}, transform.NewTree, nil
	}
	return e, transform.SameTree, nil
}

// strictDivision is a division that fails with error 1365 where it would be NULL for a zero divisor.
// It stands in for the division in the tree: its children are the division's, so a walk over the tree
// never finds the division again to wrap it twice.
type strictDivision struct {
	sql.Expression // *expression.Div, *expression.IntDiv or *expression.Mod
}

func (d *strictDivision) Children() []sql.Expression { return d.Expression.Children() }

func (d *strictDivision) WithChildren(ctx *sql.Context, children ...sql.Expression) (sql.Expression, error) {
	e, err := d.Expression.WithChildren(ctx, children...)
	if err != nil {
		return nil, err
	}
	return &strictDivision{Expression: e}, nil
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
	// NULL with a new warning: a zero divisor if the warning is 1365 (a NULL operand warns nothing).
	if w := ctx.Session.Warnings(); len(w) > 0 && w[0].Code == expression.ERDivisionByZero {
		return nil, errDivisionByZero()
	}
	return v, err
}

// DebugString shows the wrapper in plans.
func (d *strictDivision) DebugString(ctx *sql.Context) string {
	return fmt.Sprintf("strict(%s)", sql.DebugString(ctx, d.Expression))
}
