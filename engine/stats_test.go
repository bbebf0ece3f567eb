package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ldpsql/ldpsql/engine"
)

// ANALYZE TABLE of an empty table succeeds and records nothing (GMS's provider panicked, which ended an
// in-process session's process); of a table with rows it still analyses.
func TestAnalyzeEmptyTable(t *testing.T) {
	e, err := engine.Open(engine.MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := e.NewContext(context.Background())
	q := func(s string) string {
		t.Helper()
		_, rows, err := e.Query(ctx, s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		return fmt.Sprint(rows)
	}
	q("CREATE TABLE em (id INT PRIMARY KEY, x DOUBLE)")
	if got := q("ANALYZE TABLE em"); got != "[[em analyze status OK]]" {
		t.Errorf("ANALYZE TABLE of an empty table: %s", got)
	}
	if got := q("SELECT count(*) FROM information_schema.column_statistics WHERE table_name = 'em'"); got != "[[0]]" {
		t.Errorf("statistics of an empty table: %s", got)
	}
	q("INSERT INTO em VALUES (1, 0.5), (2, 1.5), (3, 2.5)")
	q("ANALYZE TABLE em")
	if got := q("SELECT count(*) > 0 FROM information_schema.column_statistics WHERE table_name = 'em'"); got != "[[true]]" {
		t.Errorf("statistics after ANALYZE of three rows: %s", got)
	}
}
