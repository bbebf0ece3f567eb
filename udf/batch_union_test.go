package udf

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/dolthub/go-mysql-server/sql"

	"github.com/ldpsql/ldpsql/engine"
)

// A UNION's branches are analysed before the statement's execution indexes are assigned; BatchRule
// waits for the statement's analysis, so each branch reads its own batch column.
func TestBatchRuleUnion(t *testing.T) {
	var calls, rows atomic.Int64
	fn := sql.FunctionN{Name: "batch_double", Fn: func(_ *sql.Context, args ...sql.Expression) (sql.Expression, error) {
		return &doubler{scalar{"batch_double", args}, &calls, &rows}, nil
	}}
	e, err := engine.Open(engine.MemoryPath, engine.WithFunctions(fn))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, q := range []string{"CREATE TABLE t (id INT PRIMARY KEY, y INT)", "INSERT INTO t VALUES (1, 10), (2, 20)"} {
		if _, _, err := e.Query(e.NewContext(context.Background()), q); err != nil {
			t.Fatal(err)
		}
	}
	_, got, err := e.Query(e.NewContext(context.Background()),
		"SELECT id, BATCH_DOUBLE(y) FROM t UNION ALL SELECT id + 10, BATCH_DOUBLE(y + 1) FROM t ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]int64{{1, 20}, {2, 40}, {11, 22}, {12, 42}}
	if len(got) != len(want) {
		t.Fatalf("%v", got)
	}
	for i, w := range want {
		if unionInt(got[i][0]) != w[0] || unionInt(got[i][1]) != w[1] {
			t.Fatalf("row %d: %v, want %v", i, got[i], w)
		}
	}
	if calls.Load() != 2 {
		t.Fatalf("%d batch calls, want one per branch", calls.Load())
	}
}

func unionInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case int32:
		return int64(x)
	case int:
		return int64(x)
	}
	return -1
}
