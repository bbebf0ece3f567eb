package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// groupingIter: a GROUP BY whose grouping key or aggregate fails on some row returns that error, and
// what succeeds is what GMS's iterator gave (results, the groups' order, HAVING). (Here GMS's iterator
// happens to return these errors too; udf's TestGroupByErrorDoesNotHang is the statement it hung on.)
func TestGroupByErrorEndsTheStatement(t *testing.T) {
	e := openT(t, MemoryPath)
	defer e.Close()
	mustQuery(t, e, "CREATE TABLE g (id INT PRIMARY KEY, k INT, j TEXT, v DOUBLE)")
	var vals []string
	for i := range 10000 {
		j := `{"a": 1}`
		if i == 5000 {
			j = "{bad" // one malformed value, half way
		}
		vals = append(vals, fmt.Sprintf("(%d, %d, '%s', %d)", i, (i*7)%5, j, i))
	}
	mustQuery(t, e, "INSERT INTO g VALUES "+strings.Join(vals, ", "))

	run := func(q string) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { _, _, err := e.Query(e.NewContext(context.Background()), q); done <- err }()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no answer after 30 s", q)
			return nil
		}
	}
	for _, q := range []string{
		"SELECT k, JSON_EXTRACT(j, '$.a') AS a, count(*) FROM g GROUP BY 1, 2",
		"SELECT k, count(*), max(JSON_EXTRACT(j, '$.a')) FROM g GROUP BY k",
	} {
		if err := run(q); err == nil || !strings.Contains(err.Error(), "Invalid JSON text") {
			t.Errorf("%s: %v, want the malformed JSON's error", q, err)
		}
	}
	// What succeeds is unchanged: groups in the order of their first row, aggregates, a non-aggregate's
	// first value, HAVING.
	if got := rowsString(mustQuery(t, e, "SELECT k, count(*), min(v), max(v), sum(v) FROM g WHERE id < 20 GROUP BY k")); got != "0 4 0 15 30\n2 4 1 16 34\n4 4 2 17 38\n1 4 3 18 42\n3 4 4 19 46\n" {
		t.Errorf("GROUP BY k:\n%s", got)
	}
	if got := rowsString(mustQuery(t, e, "SELECT k, count(*) AS n FROM g WHERE id < 20 GROUP BY k HAVING min(v) >= 2 ORDER BY k DESC")); got != "4 4\n3 4\n1 4\n" {
		t.Errorf("HAVING:\n%s", got)
	}
	if got := rowsString(mustQuery(t, e, "SELECT k % 2, count(DISTINCT k) FROM g GROUP BY k % 2")); got != "0 3\n1 2\n" {
		t.Errorf("GROUP BY an expression:\n%s", got)
	}
}
