package engine_test

import (
	"context"
	"fmt"
	"testing"

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
	ctx := e.NewContext(context.Background())
	q = func(s string) (string, error) {
		_, rows, err := e.Query(ctx, s)
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
