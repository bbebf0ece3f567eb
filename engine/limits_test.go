package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// chain is `1 + 1 + … + 1` with n terms: expressions nested n deep, n-1 operators.
func chain(n int) string { return "1" + strings.Repeat(" + 1", n-1) }

// list joins n items made by f with ", ".
func list(n int, f func(i int) string) string {
	items := make([]string, n)
	for i := range items {
		items[i] = f(i)
	}
	return strings.Join(items, ", ")
}

// wantTooComplex runs q and wants the bound's error, naming the measure and the limit.
func wantTooComplex(t *testing.T, e *Engine, q string, measure, limit string) {
	t.Helper()
	_, _, err := e.Query(e.NewContext(context.Background()), q)
	if err == nil {
		t.Fatalf("%.60s… (%d bytes): no error, want %q and %q", q, len(q), measure, limit)
	}
	if msg := err.Error(); !strings.Contains(msg, "statement too complex") || !strings.Contains(msg, measure) || !strings.Contains(msg, limit) {
		t.Fatalf("%.60s…: %v, want %q and %q", q, err, measure, limit)
	}
}

// The bounds of limits.go at their boundary: a statement at each limit runs, one past it fails with the
// measure and the limit, through every path that parses (a query, PREPARE, a view's body).
func TestStatementBounds(t *testing.T) {
	e := openT(t, MemoryPath)
	defer e.Close()

	// Depth: `1 + … + 1` with MaxExpressionDepth terms nests exactly that deep.
	if got := fmt.Sprint(mustQuery(t, e, "SELECT "+chain(MaxExpressionDepth))[0][0]); got != fmt.Sprint(MaxExpressionDepth) {
		t.Fatalf("SELECT of a %d-term chain = %s", MaxExpressionDepth, got)
	}
	over := fmt.Sprintf("nest %d deep", MaxExpressionDepth+1)
	limit := fmt.Sprintf("limit of %d", MaxExpressionDepth)
	wantTooComplex(t, e, "SELECT "+chain(MaxExpressionDepth+1), over, limit)
	// The same deep chain of ORs, of NOTs, and in a WHERE inside a subquery.
	wantTooComplex(t, e, "SELECT "+strings.Join(strings.Split(list(MaxExpressionDepth, func(i int) string { return fmt.Sprintf("%d = 1", i) }), ", "), " OR "), over, limit)
	wantTooComplex(t, e, "SELECT "+strings.Repeat("NOT ", MaxExpressionDepth)+"1", over, limit)
	wantTooComplex(t, e, "SELECT * FROM (SELECT 1 AS x) AS t WHERE x IN (SELECT 1 WHERE "+chain(MaxExpressionDepth-1)+" > 0)",
		fmt.Sprintf("nest %d deep", MaxExpressionDepth+2), limit)
	// PREPARE parses its text on its own path; so does a view's body.
	wantTooComplex(t, e, "PREPARE s FROM 'SELECT "+chain(MaxExpressionDepth+1)+"'", over, limit)
	wantTooComplex(t, e, "CREATE VIEW v AS SELECT "+chain(MaxExpressionDepth+1)+" AS x", over, limit)

	// Operators: `0 IN (ABS(1), …)` holds the IN and one call per item.
	calls := func(n int) string {
		return "SELECT 0 IN (" + list(n-1, func(i int) string { return fmt.Sprintf("ABS(%d)", i+1) }) + ")"
	}
	if got := fmt.Sprint(mustQuery(t, e, calls(MaxExpressionOperators))[0][0]); got != "false" {
		t.Fatalf("IN over %d calls = %s", MaxExpressionOperators-1, got)
	}
	wantTooComplex(t, e, calls(MaxExpressionOperators+1), fmt.Sprintf("%d operators", MaxExpressionOperators+1),
		fmt.Sprintf("limit of %d", MaxExpressionOperators))

	// Set operations: MaxSetOperations UNIONs join MaxSetOperations+1 SELECTs.
	unions := func(n int) string { return "SELECT 1" + strings.Repeat(" UNION ALL SELECT 1", n) }
	if rows := mustQuery(t, e, unions(MaxSetOperations)); len(rows) != MaxSetOperations+1 {
		t.Fatalf("%d UNIONs returned %d rows", MaxSetOperations, len(rows))
	}
	wantTooComplex(t, e, unions(MaxSetOperations+1), fmt.Sprintf("%d UNION, INTERSECT or EXCEPT", MaxSetOperations+1),
		fmt.Sprintf("limit of %d", MaxSetOperations))
}

// Long lists of literals are what real loads send: neither an IN list nor a many-row INSERT counts
// towards the bounds.
func TestBigListsStillWork(t *testing.T) {
	e := openT(t, MemoryPath)
	defer e.Close()
	const n = 4 * MaxExpressionOperators / 10 // 20,000 rows, 3 values each: 60,000 literals
	mustQuery(t, e, "CREATE TABLE big (id INT PRIMARY KEY, x DOUBLE, s VARCHAR(20))")
	mustQuery(t, e, "INSERT INTO big VALUES "+list(n, func(i int) string { return fmt.Sprintf("(%d, -%d.5, 'row %d')", i, i, i) }))
	if got := fmt.Sprint(mustQuery(t, e, "SELECT COUNT(*), SUM(x) FROM big")[0]); got != fmt.Sprintf("[%d %v]", n, -float64(n)*float64(n)/2) {
		t.Fatalf("COUNT, SUM after the INSERT: %s", got)
	}
	in := list(2*MaxExpressionOperators/10, func(i int) string { return fmt.Sprint(2 * i) }) // 10,000 values
	if got := fmt.Sprint(mustQuery(t, e, "SELECT COUNT(*) FROM big WHERE id IN ("+in+")")[0][0]); got != "10000" {
		t.Fatalf("IN over 10,000 values matched %s rows", got)
	}
	// Signed literals (-1.5 parses as a unary minus on 1.5) count nothing either.
	signed := list(MaxExpressionOperators+1, func(i int) string { return fmt.Sprintf("-%d.5", i) })
	if got := fmt.Sprint(mustQuery(t, e, "SELECT -0.5 IN ("+signed+")")[0][0]); got != "true" {
		t.Fatalf("IN over %d signed literals = %s", MaxExpressionOperators+1, got)
	}
}
