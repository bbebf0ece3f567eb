package udf_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/dolthub/go-mysql-server/sql"

	"github.com/ldpsql/ldpsql/engine"
)

// A division by zero inside an analyst's release expression is no oracle: under the default sql_mode
// (ERROR_FOR_DIVISION_BY_ZERO and STRICT_TRANS_TABLES, as MySQL 8) the statement's outcome — success,
// error text, rows, warnings — is the same whether the raw value makes the divisor zero (z = 5) or not
// (z = 6), in a SELECT and in a CREATE TABLE … AS SELECT, where the strict mode makes a data change's
// division by zero an error. (Its running time is the slots' business: slots.go and its tests.)
func TestAnalystDivisionByZeroIsNoOracle(t *testing.T) {
	l := newLedgerEngine(t, "")
	l.fillT("t", 10)
	l.q("CALL ldp_set_budget('t', 100)")
	l.createAnalyst("analyst")
	l.q("CREATE DATABASE scratch")
	l.q("GRANT SELECT, INSERT, CREATE, DROP ON scratch.* TO analyst@'%'")
	if rows := l.q("SELECT @@sql_mode"); rows[0][0] != engine.DefaultSQLMode {
		t.Fatalf("sql_mode %v", rows[0][0])
	}
	// outcome runs a statement as the analyst and says what the analyst sees of it, apart from the
	// released values themselves.
	outcome := func(query string) string {
		session := sql.NewBaseSessionWithClientServer("test", sql.Client{User: "analyst", Address: "localhost"}, 0)
		ctx := sql.NewContext(context.Background(), sql.WithSession(session))
		ctx.SetCurrentDatabase(engine.DefaultDatabase)
		_, rows, err := l.e.Query(ctx, query)
		shape := make([]int, len(rows))
		for i, r := range rows {
			shape[i] = len(r)
			for _, v := range r {
				if v == nil {
					shape[i] = -1 // a NULL release would tell too
				}
			}
		}
		return fmt.Sprintf("error %v; rows %v; warnings %d %v", err, shape, session.WarningCount(), session.Warnings())
	}
	for i, stmt := range []string{
		"SELECT PRIVATE_ACCURACY(1/(z-%[1]d) > 0, 1) FROM t WHERE id = 5",
		"SELECT PRIVATE_ACCURACY(z DIV (z-%[1]d) > 0, 1) FROM t WHERE id = 5",
		"SELECT RR_FREQUENCY(1/(z-%[1]d) + 1, 1, 2, 1) FROM t WHERE id = 5",
		"SELECT RR_FREQUENCY(MOD(z, z-%[1]d), 1, 2, 1) FROM t WHERE id = 5",
		"CREATE TABLE scratch.a%[2]d AS SELECT PRIVATE_ACCURACY(1/(z-%[1]d) > 0, 1) AS a FROM t WHERE id = 5",
		"CREATE TABLE scratch.b%[2]d AS SELECT RR_FREQUENCY((z + 1)/(z-%[1]d), 1, 2, 1) AS f FROM t WHERE id = 5",
	} {
		zero := outcome(fmt.Sprintf(stmt, 5, 2*i))      // z - 5 = 0 on row 5
		nonzero := outcome(fmt.Sprintf(stmt, 4, 2*i+1)) // z - 4 = 1
		if zero != nonzero {
			t.Errorf("%s: with a zero divisor: %s; without: %s", stmt, zero, nonzero)
		}
		if want := "error <nil>"; len(zero) < len(want) || zero[:len(want)] != want {
			t.Errorf("%s: %s", stmt, zero)
		}
	}
	// A DBA's data change still fails as MySQL's does.
	l.q("CREATE TABLE d (id INT PRIMARY KEY, v DOUBLE)")
	if _, err := l.as("root", "INSERT INTO d SELECT id, 1/(z-5) FROM t WHERE id = 5"); err == nil || sql.CastSQLError(err).Number() != 1365 {
		t.Errorf("a DBA's INSERT dividing by zero: %v; want error 1365", err)
	}
}

// The default sql_mode's ERROR_FOR_DIVISION_BY_ZERO is not part of a release's memo tag: a release
// made under GMS's former default mode (as every release before this default was) is returned again at
// no cost. collation_connection is: its new default, utf8mb4_0900_ai_ci, compares literals otherwise
// than the former utf8mb4_0900_bin, so a release under the one is not the other's answer.
func TestMemoTagAcrossTheDefaultsChange(t *testing.T) {
	l := newLedgerEngine(t, "")
	l.fillT("t", 10)
	l.q("CALL ldp_set_budget('t', 100)")
	l.createAnalyst("analyst")
	session := sql.NewBaseSessionWithClientServer("test", sql.Client{User: "analyst", Address: "localhost"}, 0)
	ctx := sql.NewContext(context.Background(), sql.WithSession(session))
	ctx.SetCurrentDatabase(engine.DefaultDatabase)
	run := func(query string) {
		t.Helper()
		if _, _, err := l.e.Query(ctx, query); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}
	release := "SELECT PRIVATE_ACCURACY(CAST(z AS CHAR) = '5', 0.5) FROM t WHERE id = 5"
	spent := func() float64 { return l.spent("t")["5"] }
	run("SET sql_mode = 'NO_ENGINE_SUBSTITUTION,ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES'") // GMS's default
	run("SET collation_connection = 'utf8mb4_0900_bin'")                                  // GMS's default
	run(release)
	if s := spent(); s != 0.5 {
		t.Fatalf("spent %v after the first release", s)
	}
	run("SET sql_mode = DEFAULT")
	run(release)
	if s := spent(); s != 0.5 {
		t.Errorf("the default sql_mode (with ERROR_FOR_DIVISION_BY_ZERO) charged a memoised release again: spent %v", s)
	}
	run("SET collation_connection = DEFAULT")
	run(release)
	if s := spent(); s != 1 {
		t.Errorf("spent %v; want 1: under utf8mb4_0900_ai_ci the expression is another release", s)
	}
}
