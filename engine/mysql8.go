package engine

import (
	"fmt"
	"strings"
	"sync"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/analyzer"
	"github.com/dolthub/go-mysql-server/sql/expression"
	"github.com/dolthub/go-mysql-server/sql/plan"
	"github.com/dolthub/go-mysql-server/sql/transform"
	"github.com/dolthub/go-mysql-server/sql/types"
)

// MySQL 8's defaults where GMS's differ: the collation and sql_mode.
//
// DefaultCollation, utf8mb4_0900_ai_ci (case- and accent-insensitive), is what a new database, table and
// string column get unless they name another, and what collation_server, collation_database and
// collation_connection start at. GMS compares, groups, sorts and hashes strings by their column's
// collation; what runs inside DuckDB agrees with it (the key's uniqueness is an index on
// lower(strip_accents(…)), uniqueIndexFor, and a lookup on an insensitive key column narrows the rows by
// it and keeps those GMS's comparison takes: index.go, collatedPoint and collatedLookup).
// A column declared COLLATE utf8mb4_bin or utf8mb4_0900_bin keeps binary semantics. A column keeps the
// collation it was created with: columns recorded without a COLLATE clause (files written before this
// default, whose recorded types are plain "varchar(10)") are GMS's utf8mb4_0900_bin, as they were.
//
// sql_mode adds ERROR_FOR_DIVISION_BY_ZERO to GMS's default, as MySQL 8's default has it (division.go).

// DefaultCollation is ldpsql's default collation, MySQL 8's.
const DefaultCollation = sql.Collation_utf8mb4_0900_ai_ci

// DefaultSQLMode is ldpsql's default sql_mode: GMS's with ERROR_FOR_DIVISION_BY_ZERO, in the order GMS
// writes a mode's flags, so that without that flag it is exactly GMS's default (udf/boundary's memo tags rely on
// it).
const DefaultSQLMode = "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION,ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES"

var mysql8DefaultsOnce sync.Once

// setMySQL8Defaults makes DefaultCollation and DefaultSQLMode the defaults and the global values of
// their system variables, once per process (before sessions copy them).
func setMySQL8Defaults() {
	mysql8DefaultsOnce.Do(func() {
		defaults := map[string]any{
			"sql_mode":             DefaultSQLMode,
			"collation_server":     DefaultCollation.Name(),
			"collation_database":   DefaultCollation.Name(),
			"collation_connection": DefaultCollation.Name(),
		}
		for name, v := range defaults {
			sv, _, ok := sql.SystemVariables.GetGlobal(name)
			if !ok {
				panic("ldpsql: GMS has no system variable " + name)
			}
			msv, ok := sv.(*sql.MysqlSystemVariable)
			if !ok {
				panic(fmt.Sprintf("ldpsql: GMS's %s is a %T", name, sv))
			}
			nv := *msv
			nv.Default = v
			sql.SystemVariables.AddSystemVariables([]sql.SystemVariable{&nv})
		}
		if err := sql.SystemVariables.AssignValues(defaults); err != nil {
			panic(fmt.Sprintf("ldpsql: setting MySQL 8's defaults: %v", err))
		}
	})
}

// isInsensitiveString reports whether t is a character string type whose collation is not binary:
// values equal under it may differ in bytes.
func isInsensitiveString(t sql.Type) bool {
	st, ok := t.(sql.StringType)
	if !ok || !types.IsText(t) {
		return false
	}
	return !isBinaryCollation(st.Collation())
}

// isBinaryCollation reports whether c compares strings by their bytes (or code points, which is the same
// order for UTF-8): binary, *_bin and utf8mb4_0900_bin.
func isBinaryCollation(c sql.CollationID) bool {
	return c == sql.Collation_binary || strings.HasSuffix(c.Name(), "_bin")
}

// tableCollation is the collation a table reports (SHOW CREATE TABLE, information_schema.TABLES): that
// of its first non-binary-typed string column, DefaultCollation for a table without one. ldpsql does
// not record a table's own default separately, and a table's string columns almost always share it.
func tableCollation(schema sql.Schema) sql.CollationID {
	for _, c := range schema {
		if st, ok := c.Type.(sql.StringType); ok && types.IsText(c.Type) {
			return st.Collation()
		}
	}
	return DefaultCollation
}

// uniqueIndexFor is the DuckDB statement that makes a primary key with an insensitive string column
// unique as its collation is, "" when none of its columns is one. DuckDB's ART index compares bytes
// whatever a column's collation, so the key is also indexed on lower(strip_accents(column)) for those
// columns: 'alice', 'Alice' and 'Álice' are then one key, as in MySQL. (GMS's utf8mb4_0900_ai_ci equates
// a few more characters, full-width forms for example, which this index keeps apart.)
func uniqueIndexFor(database, table string, schema sql.PrimaryKeySchema) string {
	insensitive := false
	for _, i := range schema.PkOrdinals {
		insensitive = insensitive || isInsensitiveString(schema.Schema[i].Type)
	}
	if !insensitive {
		return ""
	}
	keys := keyExprs(schema, "")
	for i, k := range keys {
		if strings.HasPrefix(k, "lower(") {
			keys[i] = "(" + k + ")" // an expression in an index is parenthesised
		}
	}
	return fmt.Sprintf("CREATE UNIQUE INDEX %s ON %s.%s (%s)", quoteIdent(collatedKeyIndex(table)), quoteIdent(database), quoteIdent(table), strings.Join(keys, ", "))
}

// keyExprs are the DuckDB expressions of a primary key's columns (of the row alias, "" for none) that
// compare as the columns' collations: lower(strip_accents(…)) for an insensitive string.
func keyExprs(schema sql.PrimaryKeySchema, alias string) []string {
	if alias != "" {
		alias += "."
	}
	out := make([]string, len(schema.PkOrdinals))
	for j, i := range schema.PkOrdinals {
		col := schema.Schema[i]
		out[j] = alias + quoteIdent(col.Name)
		if isInsensitiveString(col.Type) {
			out[j] = "lower(strip_accents(" + out[j] + "))"
		}
	}
	return out
}

// collatedKeyIndex names a table's collated-key index (uniqueIndexFor).
func collatedKeyIndex(table string) string { return table + "_ldpsql_collated_key" }

// ruleCollated is the analyzer rule id of collatedRule, far from GMS's own ids.
const ruleCollated analyzer.RuleId = 100_007

func init() {
	// After GMS's applyHashIn, which runs after the default rules.
	analyzer.OnceAfterAll = append(analyzer.OnceAfterAll, analyzer.Rule{Id: ruleCollated, Apply: collatedRule})
}

// collatedRule undoes GMS's HASH IN for an insensitive string on the left: GMS hashes the list's
// values under the literals' binary collation, so `name IN ('X', 'y')` missed 'x'; the plain IN compares
// each element as = does, under the column's collation.
//
// It also makes a DISTINCT, a UNION DISTINCT and DISTINCT aggregates over insensitive strings
// distinguish values by their collation's weights (collated.go): GMS hashes their values without their
// types, so 'x' and 'X' stayed two.
func collatedRule(ctx *sql.Context, _ *analyzer.Analyzer, n sql.Node, _ *plan.Scope, _ analyzer.RuleSelector, _ *sql.QueryFlags) (sql.Node, transform.TreeIdentity, error) {
	n, same, err := transform.Node(ctx, n, func(ctx *sql.Context, n sql.Node) (sql.Node, transform.TreeIdentity, error) {
		if u := collatedUnion(ctx, n); u != nil {
			return u, transform.NewTree, nil
		}
		d, ok := n.(*plan.Distinct)
		if !ok || len(d.DistinctOn()) > 0 {
			return n, transform.SameTree, nil
		}
		if cd := collatedDistinctNode(ctx, d.Child); cd != nil {
			return cd, transform.NewTree, nil
		}
		return n, transform.SameTree, nil
	})
	if err != nil {
		return nil, transform.SameTree, err
	}
	n, sameExprs, err := transform.NodeExprs(ctx, n, func(ctx *sql.Context, e sql.Expression) (sql.Expression, transform.TreeIdentity, error) {
		if agg := collatedAggregate(ctx, e); agg != nil {
			return agg, transform.NewTree, nil
		}
		h, ok := e.(*expression.HashInTuple)
		if !ok || !isInsensitiveString(h.Left().Type(ctx)) {
			return e, transform.SameTree, nil
		}
		return expression.NewInTuple(h.Left(), h.Right()), transform.NewTree, nil
	})
	return n, same && sameExprs, err
}

// MemoSQLMode is sql_mode as a release's memo tag records it (package udf/boundary): without
// ERROR_FOR_DIVISION_BY_ZERO, which changes no release's value (in a release expression a division by
// zero is NULL in a SELECT, and an error a data change turns it into is the default input, as NULL is),
// so that releases memoised under GMS's default mode, before DefaultSQLMode, are found again.
func MemoSQLMode(mode string) string {
	var kept []string
	for _, f := range strings.Split(mode, ",") {
		if !strings.EqualFold(f, "ERROR_FOR_DIVISION_BY_ZERO") {
			kept = append(kept, f)
		}
	}
	return strings.Join(kept, ",")
}
