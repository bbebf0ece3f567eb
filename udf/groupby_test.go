package udf_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Attack campaign, variant 180 (docs/security.md). A GROUP BY over more than 512 rows whose grouping
// key fails (PREDICT on a model that does not exist) returns the error. GMS's GROUP BY iterator hung
// there for ever, KILL QUERY included: its reader goroutine blocked on a full channel once the key's
// evaluation had failed (engine/groupby.go).
func TestGroupByErrorDoesNotHang(t *testing.T) {
	l := newLedgerEngine(t, buildIdentityPlugin(t))
	l.q("CREATE TABLE t (id INT PRIMARY KEY, f LONGBLOB, y INT)")
	for b := range 5 {
		var vals []string
		for i := b * 2000; i < (b+1)*2000; i++ {
			vals = append(vals, fmt.Sprintf("(%d, LDP_VECTOR(%d, 1), %d)", i, i%7, i%3))
		}
		l.q("INSERT INTO t VALUES " + strings.Join(vals, ", "))
	}
	for _, q := range []string{
		"SELECT y, PREDICT('nope', f) AS p, count(*) FROM t GROUP BY 1, 2",
		"SELECT y, PREDICT('nope', f) AS p, count(*) FROM t WHERE id < 1000 GROUP BY 1, 2",
		"SELECT y, count(*) FROM t GROUP BY y, PREDICT('nope', f)",
	} {
		done := make(chan error, 1)
		go func() { _, err := l.as("root", q); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), `no classifier called "nope"`) {
				t.Errorf("%s: %v, want PREDICT's error", q, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no answer after 30 s", q)
		}
	}
	if rows := l.q("SELECT y, count(*) FROM t GROUP BY y ORDER BY y"); fmt.Sprint(rows) != "[[0 3334] [1 3333] [2 3333]]" {
		t.Errorf("GROUP BY y: %v", rows)
	}
}
