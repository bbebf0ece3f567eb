package udf

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"

	"github.com/ldpsql/ldpsql/engine"
)

// doubler is a test BatchExpression: BATCH_DOUBLE(x) = 2x, counting its batch calls and rows.
type doubler struct {
	scalar
	calls, rows *atomic.Int64
}

func (d *doubler) Type(*sql.Context) sql.Type                      { return types.Int64 }
func (d *doubler) Description() string                             { return "test" }
func (d *doubler) BatchArgs() []sql.Expression                     { return d.args }
func (d *doubler) Eval(ctx *sql.Context, row sql.Row) (any, error) { return evalOne(ctx, d, row) }
func (d *doubler) WithChildren(_ *sql.Context, c ...sql.Expression) (sql.Expression, error) {
	return &doubler{scalar{"batch_double", c}, d.calls, d.rows}, nil
}
func (d *doubler) EvalBatch(ctx *sql.Context, args [][]any) ([]any, error) {
	d.calls.Add(1)
	d.rows.Add(int64(len(args)))
	out := make([]any, len(args))
	for i, a := range args {
		if a[0] == nil {
			continue
		}
		x, err := toInt(ctx, "BATCH_DOUBLE", "x", a[0])
		if err != nil {
			return nil, err
		}
		out[i] = 2 * x
	}
	return out, nil
}

func TestBatchRule(t *testing.T) {
	var calls, rows atomic.Int64
	fn := sql.FunctionN{Name: "batch_double", Fn: func(_ *sql.Context, args ...sql.Expression) (sql.Expression, error) {
		return &doubler{scalar{"batch_double", args}, &calls, &rows}, nil
	}}
	e, err := engine.Open(engine.MemoryPath, engine.WithFunctions(fn))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	q := func(query string) []sql.Row {
		t.Helper()
		_, r, err := e.Query(e.NewContext(context.Background()), query)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		return r
	}
	q("CREATE TABLE t (id BIGINT PRIMARY KEY, x INT)")
	if _, err := e.DuckDB.Exec(`INSERT INTO ldpsql.t SELECT range, (range % 100)::INTEGER FROM range(10000)`); err != nil {
		t.Fatal(err)
	}
	reset := func() { calls.Store(0); rows.Store(0) }

	reset()
	r := q("SELECT id, BATCH_DOUBLE(x) + 1 AS y FROM t ORDER BY id")
	if len(r) != 10000 || r[7][1] != int64(15) || r[9999][1] != int64(199) {
		t.Fatalf("results: %v … %v", r[7], r[9999])
	}
	// 10,000 rows in batches of 4,096: 3 calls, not 10,000.
	if calls.Load() != 3 || rows.Load() != 10000 {
		t.Fatalf("%d batch calls over %d rows, want 3 over 10000", calls.Load(), rows.Load())
	}

	// The simplest SELECT, which GMS would otherwise analyse on a short path without our rule.
	reset()
	if r := q("SELECT BATCH_DOUBLE(x) FROM t"); len(r) != 10000 || calls.Load() != 3 {
		t.Fatalf("simple SELECT: %d rows with %d calls", len(r), calls.Load())
	}

	// Nested batch expressions: the outer one reads the inner one's column; one call each per batch.
	reset()
	if r := q("SELECT BATCH_DOUBLE(BATCH_DOUBLE(x)) FROM t ORDER BY id LIMIT 3"); fmt.Sprint(r) != "[[0] [4] [8]]" || calls.Load() != 2 {
		t.Fatalf("nested: %v with %d calls", r, calls.Load())
	}

	// A LIMIT closes the pipeline while it is ahead of the consumer.
	for i := 0; i < 20; i++ {
		if r := q("SELECT BATCH_DOUBLE(x) FROM t LIMIT 3"); len(r) != 3 {
			t.Fatalf("LIMIT 3: %v", r)
		}
	}

	// Filters, limits, joins and INSERT ... SELECT keep their meaning.
	if r := q("SELECT BATCH_DOUBLE(x) FROM t WHERE id BETWEEN 5 AND 7 ORDER BY id"); fmt.Sprint(r) != "[[10] [12] [14]]" {
		t.Fatalf("with WHERE: %v", r)
	}
	if r := q("SELECT id, BATCH_DOUBLE(x) FROM t ORDER BY id LIMIT 2"); fmt.Sprint(r) != "[[0 0] [1 2]]" {
		t.Fatalf("with LIMIT: %v", r)
	}
	if r := q("SELECT a.id, BATCH_DOUBLE(b.x) FROM t a JOIN t b ON a.id = b.id + 1 WHERE a.id < 3 ORDER BY a.id"); fmt.Sprint(r) != "[[1 0] [2 2]]" {
		t.Fatalf("with JOIN: %v", r)
	}
	q("CREATE TABLE u (id BIGINT PRIMARY KEY, y BIGINT)")
	reset()
	q("INSERT INTO u SELECT id, BATCH_DOUBLE(x) FROM t")
	if r := q("SELECT SUM(y) FROM u"); fmt.Sprint(r) != "[[990000]]" || calls.Load() != 3 {
		t.Fatalf("INSERT ... SELECT: %v with %d calls", r, calls.Load())
	}
	// Subqueries in FROM are batched too, and keep their meaning.
	reset()
	if r := q("SELECT COUNT(*), SUM(r) FROM (SELECT BATCH_DOUBLE(x) AS r FROM t) s"); fmt.Sprint(r) != "[[10000 990000]]" || calls.Load() != 3 {
		t.Fatalf("subquery: %v with %d calls", r, calls.Load())
	}
	// Outside a projection the expression is evaluated per row, as a batch of one.
	if r := q("SELECT COUNT(*) FROM t WHERE BATCH_DOUBLE(x) = 198"); fmt.Sprint(r) != "[[100]]" {
		t.Fatalf("in WHERE: %v", r)
	}
	// NULL arguments pass through.
	if r := q("SELECT BATCH_DOUBLE(NULL)"); r[0][0] != nil {
		t.Fatalf("NULL: %v", r)
	}
}
