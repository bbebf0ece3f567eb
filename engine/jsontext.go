package engine

import (
	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/analyzer"
	"github.com/dolthub/go-mysql-server/sql/expression"
	"github.com/dolthub/go-mysql-server/sql/plan"
	"github.com/dolthub/go-mysql-server/sql/transform"
	"github.com/dolthub/go-mysql-server/sql/types"
)

// JSON in string functions. MySQL reads a JSON value as its text wherever a string is expected, and
// most of GMS's string functions do too; LEFT, RIGHT, INSTR and HEX do not: given a JSON column (a user
// table's, or a catalog table's such as ldpsql_catalog.ldp_mechanisms.description) they fail with
// "invalid type: types.JSONDocument". The rule jsonAsText casts a JSON argument of these functions to
// CHAR first, as MySQL does implicitly.

// ruleJSONAsText is the analyzer rule id of jsonAsText, far from GMS's own ids.
const ruleJSONAsText analyzer.RuleId = 100_002

// textOnlyFunctions are GMS's string functions that refuse a JSON value instead of reading its text.
var textOnlyFunctions = map[string]bool{"left": true, "right": true, "instr": true, "hex": true}

func init() {
	analyzer.AlwaysBeforeDefault = append(analyzer.AlwaysBeforeDefault, analyzer.Rule{Id: ruleJSONAsText, Apply: jsonAsText})
}

func jsonAsText(ctx *sql.Context, _ *analyzer.Analyzer, n sql.Node, _ *plan.Scope, _ analyzer.RuleSelector, _ *sql.QueryFlags) (sql.Node, transform.TreeIdentity, error) {
	return transform.NodeExprsWithOpaque(ctx, n, func(ctx *sql.Context, e sql.Expression) (sql.Expression, transform.TreeIdentity, error) {
		f, ok := e.(sql.FunctionExpression)
		if !ok || !textOnlyFunctions[f.FunctionName()] {
			return e, transform.SameTree, nil
		}
		children := append([]sql.Expression(nil), e.Children()...)
		same := transform.SameTree
		for i, c := range children {
			if c.Resolved() && types.IsJSON(c.Type(ctx)) {
				children[i] = expression.NewConvert(c, expression.ConvertToChar)
				same = transform.NewTree
			}
		}
		if same == transform.SameTree {
			return e, same, nil
		}
		ne, err := e.WithChildren(ctx, children...)
		return ne, transform.NewTree, err
	})
}
