package engine_test

import (
	"strings"
	"testing"
)

// A CREATE TABLE … AS SELECT that fails part way (a row the SELECT cannot compute) leaves no table, so
// the same statement can be retried; one that succeeds answers with its row count; a failing CREATE
// TABLE IF NOT EXISTS … SELECT never drops the table that was there.
func TestCreateSelectIsAllOrNothing(t *testing.T) {
	q, must := memorySQL(t)
	must("CREATE TABLE s (id INT PRIMARY KEY, j VARCHAR(20))")
	must(`INSERT INTO s VALUES (1, '{"a": 1}'), (2, '{"a": 2}'), (3, 'not json')`)
	const bad = "CREATE TABLE d AS SELECT id, JSON_EXTRACT(j, '$.a') AS a FROM s ORDER BY id"
	if _, err := q(bad); err == nil {
		t.Fatal("a CTAS over invalid JSON succeeded")
	}
	if tables := must("SHOW TABLES"); strings.Contains(tables, "d]") {
		t.Fatalf("the failed CTAS left its table: %s", tables)
	}
	if _, err := q(bad); err == nil || strings.Contains(err.Error(), "already exists") {
		t.Fatalf("the retry: %v, want the same JSON error", err)
	}
	if got := must("CREATE TABLE d AS SELECT id, JSON_EXTRACT(j, '$.a') AS a FROM s WHERE id < 3"); got != "[[{<nil> 2 0}]]" {
		t.Errorf("a successful CTAS answered %s, want 2 rows affected", got)
	}
	if _, err := q("CREATE TABLE IF NOT EXISTS d AS SELECT id, JSON_EXTRACT(j, '$.a') AS a FROM s"); err == nil {
		t.Log("CREATE TABLE IF NOT EXISTS over an existing table did nothing")
	}
	if got := must("SELECT COUNT(*) FROM d"); got != "[[2]]" {
		t.Errorf("the existing table after a failed IF NOT EXISTS CTAS: %s rows, want 2", got)
	}
}
