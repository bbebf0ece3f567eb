package engine_test

import (
	"testing"

	"github.com/dolthub/go-mysql-server/sql"

	"github.com/ldpsql/ldpsql/engine"
)

// MySQL's division by zero: NULL with warning 1365 in a SELECT, and, with ERROR_FOR_DIVISION_BY_ZERO
// (in the default sql_mode, as in MySQL 8's) and a strict mode, error 1365 for INSERT, REPLACE, UPDATE and ON DUPLICATE KEY UPDATE unless IGNORE.
func TestDivisionByZero(t *testing.T) {
	q, must := memorySQL(t)
	is1365 := func(stmt string) {
		t.Helper()
		_, err := q(stmt)
		se := sql.CastSQLError(err) // what the server sends: it unwraps an INSERT source's error
		if se == nil || se.Number() != 1365 || se.SQLState() != "22012" {
			t.Errorf("%s: %v (%T), want error 1365 (22012) Division by 0", stmt, err, err)
		}
	}
	must("CREATE TABLE dz (id INT PRIMARY KEY, a DOUBLE, b INT)")
	must("INSERT INTO dz VALUES (1, 1, 1)")

	if got := must("SELECT @@sql_mode"); got != "[["+engine.DefaultSQLMode+"]]" {
		t.Errorf("the default sql_mode is %s; want MySQL 8's flags %s", got, engine.DefaultSQLMode)
	}
	is1365("INSERT INTO dz VALUES (2, 1/0, 0)") // the default, as MySQL 8's

	// Without ERROR_FOR_DIVISION_BY_ZERO: NULL and a warning, as MySQL without it.
	must("SET sql_mode = 'NO_ENGINE_SUBSTITUTION,ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES'")
	must("INSERT INTO dz VALUES (2, 1/0, 0)")
	if got := must("SHOW WARNINGS"); got != "[[Warning 1365 Division by 0]]" {
		t.Errorf("warnings after INSERT of 1/0: %s", got)
	}
	if got := must("SELECT a FROM dz WHERE id = 2"); got != "[[<nil>]]" {
		t.Errorf("1/0 stored %s, want NULL", got)
	}

	must("SET sql_mode = CONCAT(@@sql_mode, ',ERROR_FOR_DIVISION_BY_ZERO')")
	if got := must("SELECT 1/0"); got != "[[<nil>]]" {
		t.Errorf("SELECT 1/0 is %s, want NULL (a SELECT only warns)", got)
	}
	is1365("INSERT INTO dz VALUES (3, 1/0, 0)")
	is1365("INSERT INTO dz VALUES (3, 1, 5 DIV 0)")
	is1365("INSERT INTO dz SELECT 3, 1, MOD(b, 0) FROM dz WHERE id = 1")
	is1365("REPLACE INTO dz VALUES (1, 1/0, 0)")
	is1365("UPDATE dz SET a = 1 / b WHERE id = 2")
	is1365("INSERT INTO dz VALUES (1, 1, 1) ON DUPLICATE KEY UPDATE a = 1 / 0")
	if got := must("SELECT id, a, b FROM dz ORDER BY id"); got != "[[1 1 1] [2 <nil> 0]]" {
		t.Errorf("after the failed statements: %s", got)
	}
	// IGNORE stores NULL and warns; a NULL operand is no division by zero.
	must("INSERT IGNORE INTO dz VALUES (3, 1/0, 0)")
	must("UPDATE dz SET a = NULL / b WHERE id = 1")
	must("UPDATE dz SET a = 6 / 3 WHERE id = 2")
	if got := must("SELECT id, a, b FROM dz ORDER BY id"); got != "[[1 <nil> 1] [2 2 0] [3 <nil> 0]]" {
		t.Errorf("after INSERT IGNORE and the good UPDATEs: %s", got)
	}
	// Without a strict mode the mode only warns.
	must("SET sql_mode = 'ERROR_FOR_DIVISION_BY_ZERO'")
	must("INSERT INTO dz VALUES (4, 1/0, 0)")
}

// The wrapped divisions keep GMS's arithmetic: decimal precision, nested divisions, integer division.
func TestStrictDivisionKeepsResults(t *testing.T) {
	_, must := memorySQL(t)
	must("SET sql_mode = 'STRICT_TRANS_TABLES'")
	must("CREATE TABLE r (id INT PRIMARY KEY, d DECIMAL(20,10), f DOUBLE, i BIGINT)")
	must("INSERT INTO r VALUES (1, 1/3, 10/4/5, 7 DIV 2), (2, (1/3)/7, 2.5 % 1, MOD(-7, 3))")
	want := must("SELECT id, d, f, i FROM r ORDER BY id")
	must("SET sql_mode = 'ERROR_FOR_DIVISION_BY_ZERO,STRICT_TRANS_TABLES'")
	must("CREATE TABLE r2 (id INT PRIMARY KEY, d DECIMAL(20,10), f DOUBLE, i BIGINT)")
	must("INSERT INTO r2 VALUES (1, 1/3, 10/4/5, 7 DIV 2), (2, (1/3)/7, 2.5 % 1, MOD(-7, 3))")
	if got := must("SELECT id, d, f, i FROM r2 ORDER BY id"); got != want {
		t.Errorf("with the strict wrapper: %s; without: %s", got, want)
	}
	must("UPDATE r2 SET d = d / 2, f = f / 4 WHERE id = 1")
	must("UPDATE r SET d = d / 2, f = f / 4 WHERE id = 1")
	if got, want := must("SELECT d, f FROM r2 WHERE id = 1"), must("SELECT d, f FROM r WHERE id = 1"); got != want {
		t.Errorf("UPDATE with the strict wrapper: %s; without: %s", got, want)
	}
}
