package boundary

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/expression"
	"github.com/dolthub/go-mysql-server/sql/transform"
	"github.com/dolthub/go-mysql-server/sql/types"
)

// Predictable evaluation of an analyst's release expressions.
//
// An analyst's argument to PRIVATE_ACCURACY or RR_FREQUENCY on a protected table is an expression of
// the raw row (CASE, LIKE, arithmetic, PREDICT, …). Only its k-RR release leaves the row, but how long
// evaluating it takes is observable too: `(CASE WHEN salary > 50000 THEN <a long literal> ELSE '' END)
// LIKE '%a%a…%b'` runs for hundreds of milliseconds more when the condition holds, which one statement
// shows over the wire, whatever ε is (docs/security.md, variants 169–172). So, following the
// predictable transactions of Haeberlen, Pierce and Narayan ("Differential privacy under fire", USENIX
// Security 2011), the expression is evaluated in fixed time slots:
//
//   - row i of a batch of n is evaluated in its own slot [start + i·s, start + (i+1)·s), s the session's
//     ldp_release_slot_us; the value is used if the evaluation ends within the slot, and the row is
//     released from the default input (a uniformly drawn bit or label, like a failing expression)
//     otherwise. Either way the next row starts at the next slot, and the batch ends at start + n·s:
//     its running time depends on n and s, which the analyst chose, never on the values;
//   - an evaluation that overruns its slot cannot be stopped (Go cannot pre-empt a goroutine); it
//     finishes in the background, and while it runs the statement's later rows are released from the
//     default input without being evaluated, so at most one late evaluation per statement competes for
//     the CPU;
//   - nothing is evaluated before the statement's budget is checked (ledger.Check) and its parameters
//     (ε, K, the class) are validated, so a refused statement evaluates nothing.
//
// What remains (README, "outside the guarantee"): a late evaluation that outlives its statement competes
// with the next ones for the CPU, and a row released from the default input because its evaluation ran
// late carries, through its own randomiser at its own ε, information on how long that evaluation took.
// Both are bounded by making late evaluations rare and short: the slot should exceed what the expression
// costs on any row, and an analyst's literals are bounded in length (maxAnalystLiteral).

// SlotVariable is the session variable that sets the slot, in microseconds.
const SlotVariable = "ldp_release_slot_us"

// defaultSlot is the slot unless a session sets another: well above what an allowed expression costs
// per row, with a margin for a loaded machine, so that rows released from the default input are rare;
// 1,000 rows take 2 s. A session evaluating an expensive model raises it.
const defaultSlot = 2000 * time.Microsecond

// maxAnalystNodes is how many expressions (operators, functions, columns, values, IN-list elements) an
// analyst's release expression may hold, a literal counting one more per 16 bytes (LIKE on a long
// literal costs more than a comparison): LDP_VECTOR of several hundred columns and a PREDICT fit, while
// the slowest evaluation built within the bound stays far inside a slot (an IN list of 1,000 columns
// compared one by one: 0.16–0.25 ms a row on a loaded 2-core machine; see the slot tests).
const maxAnalystNodes = 1000

// maxAnalystLiteral is the longest literal (in bytes) an analyst's release expression may hold: long
// enough for any category name or LIKE pattern, too short to make one row's evaluation slow.
const maxAnalystLiteral = 1024

var registerSlotVariable sync.Once

// AddSlotVariable adds ldp_release_slot_us to the server's system variables (global and session:
// any value is safe, since it sets the running time, not what the data may change).
func AddSlotVariable() {
	registerSlotVariable.Do(func() {
		sql.SystemVariables.AddSystemVariables([]sql.SystemVariable{&sql.MysqlSystemVariable{
			Name:    SlotVariable,
			Scope:   sql.GetMysqlScope(sql.SystemVariableScope_Both),
			Dynamic: true,
			Type:    types.NewSystemIntType(SlotVariable, 10, 10_000_000, false),
			Default: int64(defaultSlot / time.Microsecond),
		}})
	})
}

// releaseSlot is the session's slot.
func releaseSlot(ctx *sql.Context) time.Duration {
	v, err := ctx.GetSessionVariable(ctx, SlotVariable)
	if err != nil {
		return defaultSlot
	}
	us, err := strconv.ParseInt(fmt.Sprint(v), 10, 64) // an int64 from GMS's integer system variable
	if err != nil {
		return defaultSlot
	}
	if us < 10 {
		us = 10
	}
	return time.Duration(us) * time.Microsecond
}

// slotLog is the server's log (Install's Config.Logf), where a statement whose evaluations ran late
// says so to the DBA.
var slotLog atomic.Pointer[func(string, ...any)]

// slotStats counts, for the DBA's log and the tests, how many evaluations ran late since the process
// started (never shown to an analyst: how many rows ran late depends on the data).
var slotStats struct{ evaluated, late atomic.Int64 }

// SlotStats returns how many release expressions this process has evaluated in time slots and how many
// of them ran late (released from the default input), for the server's log and for tests.
func SlotStats() (evaluated, late int64) { return slotStats.evaluated.Load(), slotStats.late.Load() }

// evalInSlots evaluates eval(i) for i in 0..n-1, each in its own slot of length slot (see the top of
// this file), and returns the values, lateValue where an evaluation did not end within its slot. It
// returns after n·slot, or early with ctx's error when the statement is cancelled.
func evalInSlots[T any](ctx *sql.Context, slot time.Duration, n int, eval func(i int) T, lateValue T) (out []T, late int, err error) {
	out = make([]T, n)
	var running atomic.Int32 // late evaluations still running
	start := time.Now()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	wait := func(until time.Time) error {
		d := time.Until(until)
		if d <= 0 {
			return nil
		}
		timer.Reset(d)
		select {
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for i := range n {
		end := start.Add(time.Duration(i+1) * slot)
		if running.Load() > 0 {
			out[i] = lateValue
			late++
			if err := wait(end); err != nil {
				return nil, 0, err
			}
			continue
		}
		done := make(chan T, 1)
		go func(i int) { done <- eval(i) }(i)
		timer.Reset(time.Until(end))
		select {
		case v := <-done:
			out[i] = v
			slotStats.evaluated.Add(1)
			timer.Stop() // since Go 1.23 a stopped timer's channel delivers nothing stale
			if err := wait(end); err != nil {
				return nil, 0, err
			}
		case <-timer.C:
			out[i] = lateValue
			late++
			running.Add(1)
			go func() { <-done; running.Add(-1) }()
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
	slotStats.late.Add(int64(late))
	return out, late, nil
}

// checkAnalystExpression refuses an analyst's release expression that could take long to evaluate on
// one row: more than maxAnalystNodes expressions, or a literal longer than maxAnalystLiteral bytes (a
// long literal under LIKE, or a long IN list, is the cheapest way to make one branch slow:
// docs/security.md, variant 169). Both are properties of the statement, never of the data.
func checkAnalystExpression(ctx *sql.Context, fn string, inst *tableInstance, e sql.Expression) error {
	var err error
	nodes := 0
	transform.InspectExpr(ctx, e, func(ctx *sql.Context, e sql.Expression) bool {
		nodes++
		if lit, ok := e.(*expression.Literal); ok {
			nodes += literalLength(lit) / 16
		}
		if nodes > maxAnalystNodes {
			err = fmt.Errorf("access denied: %s on protected table %s: an analyst's release expression may hold at most %d operators, "+
				"columns and values, a literal counting one more per 16 bytes (a long expression can make its running time depend on the row)", fn, inst.budget.TableRef, maxAnalystNodes)
			return true
		}
		lit, ok := e.(*expression.Literal)
		if !ok {
			return false
		}
		if n := literalLength(lit); n > maxAnalystLiteral {
			err = fmt.Errorf("access denied: %s on protected table %s: an analyst's release expression may hold literals of at most %d bytes, "+
				"not one of %d (a long literal can make the expression's running time depend on the row)", fn, inst.budget.TableRef, maxAnalystLiteral, n)
		}
		return err != nil
	})
	return err
}

// literalLength is a literal's length in bytes, as written.
func literalLength(lit *expression.Literal) int {
	switch v := lit.Value().(type) {
	case string:
		return len(v)
	case []byte:
		return len(v)
	}
	return len(fmt.Sprint(lit.Value()))
}

// SetSlotLog sets the server's log, where a statement whose evaluations ran late says so to the DBA.
func SetSlotLog(logf func(string, ...any)) { slotLog.Store(&logf) }
