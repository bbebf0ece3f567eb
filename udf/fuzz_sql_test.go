package udf

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/ldpsql/ldpsql/engine"
)

// sqlLiteral writes a fuzzed argument as SQL text: a number, a quoted string, a hex BLOB, NULL, or the
// raw text itself (which may not parse: a parse error must be as clear as any other).
func sqlLiteral(kind uint8, text string, num float64) string {
	switch kind % 6 {
	case 0:
		if math.IsNaN(num) || math.IsInf(num, 0) {
			return "1e999" // what a client can write for a number out of range
		}
		return strconv.FormatFloat(num, 'g', -1, 64)
	case 1:
		return strconv.FormatInt(int64(num), 10)
	case 2:
		return "'" + strings.ReplaceAll(strings.ReplaceAll(text, `\`, `\\`), "'", "''") + "'"
	case 3:
		return fmt.Sprintf("X'%x'", text)
	case 4:
		return "NULL"
	}
	return text
}

// FuzzSQLFunctions runs FLIP_LABEL, LDP_LAPLACE and LDP_VECTOR with fuzzed arguments through the whole
// engine (parser, planner, literal folding, the functions): whatever the arguments, the statement
// succeeds or fails with a clear error, never a Go panic. One in-memory engine serves every input.
func FuzzSQLFunctions(f *testing.F) {
	f.Add(uint8(0), uint8(1), "", 1.0, uint8(0), "", 1.0, uint8(1), "", 4.0, uint8(4), "", 0.0)
	f.Add(uint8(1), uint8(0), "", 30.0, uint8(0), "", 0.5, uint8(1), "", 18.0, uint8(1), "", 90.0)
	f.Add(uint8(2), uint8(0), "", 0.1, uint8(2), "0.7", 0.0, uint8(3), "\x00\x00\x80\x3f", 0.0, uint8(4), "", 0.0)
	f.Add(uint8(0), uint8(2), "a'b", 0.0, uint8(5), "1 +", 0.0, uint8(0), "", math.Inf(1), uint8(5), ")", 0.0)
	f.Add(uint8(1), uint8(0), "", 1.0, uint8(0), "", 100.0, uint8(0), "", -1e308, uint8(0), "", 1e308)
	f.Add(uint8(2), uint8(5), "(SELECT 1)", 0.0, uint8(5), "LDP_VECTOR(1)", 0.0, uint8(0), "", 3.5e38, uint8(4), "", 0.0)
	e, err := engine.Open(engine.MemoryPath, engine.WithFunctions(Functions()...))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { e.Close() })
	f.Fuzz(func(t *testing.T, fn uint8, ak uint8, as string, an float64, bk uint8, bs string, bn float64,
		ck uint8, cs string, cn float64, dk uint8, ds string, dn float64) {
		a, b, c, d := sqlLiteral(ak, as, an), sqlLiteral(bk, bs, bn), sqlLiteral(ck, cs, cn), sqlLiteral(dk, ds, dn)
		var q string
		switch fn % 3 {
		case 0:
			q = fmt.Sprintf("SELECT FLIP_LABEL(%s, %s, %s)", a, b, c)
		case 1:
			q = fmt.Sprintf("SELECT LDP_LAPLACE(%s, %s, %s, %s)", a, b, c, d)
		default:
			q = fmt.Sprintf("SELECT LDP_VECTOR(%s, %s, %s)", a, b, c)
		}
		if len(q) > 4096 || strings.ContainsAny(q, ";\x00") {
			return // one statement of reasonable size per input: no multi-statement strings
		}
		_, _, err := e.Query(e.NewContext(context.Background()), q)
		if err == nil {
			return
		}
		msg := err.Error()
		if strings.TrimSpace(msg) == "" {
			t.Fatalf("%s: empty error", q)
		}
		for _, bad := range []string{"panic", "runtime error", "goroutine ", "nil pointer", "index out of range"} {
			if strings.Contains(strings.ToLower(msg), bad) {
				t.Fatalf("%s: error reads like a Go failure: %q", q, msg)
			}
		}
	})
}
