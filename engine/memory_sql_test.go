package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/dolthub/go-mysql-server/sql"

	"github.com/ldpsql/ldpsql/engine"
)

// memorySQL opens an in-memory engine for t (closed when it ends) and returns q, which runs a statement and gives its rows
// as fmt.Sprint prints them, and must, which does the same and fails the test on an error.
func memorySQL(t *testing.T) (q func(string) (string, error), must func(string) string) {
	t.Helper()
	e, err := engine.Open(engine.MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return sqlOn(t, func() *engine.Engine { return e })
}

// sqlOn is memorySQL's q and must on the engine current() returns (one that a test may reopen): one
// session per engine, so that what a statement SETs holds for the next.
func sqlOn(t *testing.T, current func() *engine.Engine) (q func(string) (string, error), must func(string) string) {
	var on *engine.Engine
	var ctx *sql.Context
	q = func(s string) (string, error) {
		if e := current(); e != on {
			on, ctx = e, e.NewContext(context.Background())
		}
		_, rows, err := on.Query(ctx, s)
		return fmt.Sprint(rows), err
	}
	must = func(s string) string {
		t.Helper()
		out, err := q(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		return out
	}
	return q, must
}
