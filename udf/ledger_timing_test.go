package udf_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ldpsql/ldpsql/udf/boundary"
)

// The timing oracle of docs/security.md (variants 169–172): an analyst's release expression that is
// slow on one branch. A DBA's evaluation of it shows the branch in its running time (so the amplifier
// works on this machine); an analyst's PRIVATE_ACCURACY of it, evaluated in time slots, does not; and a
// statement refused for its budget, its ε or a long literal evaluates nothing.

// slowBranch is an expression of emp's row that is slow when salary > 50000 and fast otherwise: an IN
// list of column references (no operators: the statement bounds count none) that a NULL left side
// skips and a salary, equal to none of them, compares one by one.
func slowBranch(n int) string {
	return "(CASE WHEN salary > 50000 THEN salary END) IN (" + strings.Repeat("id, ", n) + "id)"
}

// fastest runs run(0) and run(1) n times each, interleaved, and returns the fastest wall time of each.
// Load on a shared machine only adds to a statement's time, so the fastest run measures what the
// statement costs. Medians did not: at load 6–9 on 2 cores, the medians of 5 analyst runs failed 3 of
// 60 tests (one side up to 47 ms slower, on 0.42 s statements). At the same load, over 40 tests each, the
// fastest of 5 runs differed by at most 0.79 of the bound (gap/4; standard deviation 0.22), the fastest
// of 7 by at most 0.28 (0.14).
func fastest(t *testing.T, n int, run func(which int) error) [2]time.Duration {
	t.Helper()
	var best [2]time.Duration
	for i := range n {
		for which := range 2 {
			start := time.Now()
			if err := run(which); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); i == 0 || d < best[which] {
				best[which] = d
			}
			time.Sleep(20 * time.Millisecond) // a late evaluation ends before the next statement
		}
	}
	return best
}

func TestReleaseExpressionTimingIsNoOracle(t *testing.T) {
	l := newLedgerEngine(t, "")
	// Units 0–399 earn 90,000, units 400–799 earn 10,000: the analyst asks about a block of 400 rows at
	// once, so that evaluating the expression costs far more than parsing it (an expression slow enough
	// on one row is refused: see below).
	l.q("CREATE TABLE emp (id INT PRIMARY KEY, salary INT)")
	if _, err := l.e.DuckDB.Exec(`INSERT INTO ldpsql.emp SELECT range, CASE WHEN range < 400 THEN 90000 ELSE 10000 END FROM range(802)`); err != nil {
		t.Fatal(err)
	}
	l.q("CALL ldp_set_budget('emp', 1, 'charge')")
	l.createAnalyst("analyst")
	block := [2]string{"id < 400", "id >= 400 AND id < 800"}
	l.q("SET GLOBAL ldp_release_slot_us = 1000")                          // the analyst's sessions: 400 rows take 0.4 s
	t.Cleanup(func() { l.q("SET GLOBAL ldp_release_slot_us = DEFAULT") }) // the setting is process-wide

	// The amplifier, as a DBA sees it (whose releases are evaluated row by row, as every release was
	// before time slots): the rich block costs ≥ 30 ms more than the poor (60–100 ms measured on a loaded
	// 2-core machine).
	expr := slowBranch(990)
	dba := fastest(t, 3, func(which int) error { // a DBA's release evaluates row by row, as it comes
		_, err := l.as("root", fmt.Sprintf("SELECT PRIVATE_ACCURACY(%s, 1e-6) FROM emp WHERE %s", expr, block[which]))
		return err
	})
	gap := dba[0] - dba[1]
	if gap < 30*time.Millisecond {
		t.Fatalf("no amplifier: %v (rich) vs %v (poor)", dba[0], dba[1])
	}

	// The analyst's release of it, at a negligible ε: the same time whichever the block.
	evaluated0, late0 := boundary.SlotStats()
	const runs = 7
	an := fastest(t, runs, func(which int) error {
		_, err := l.as("analyst", fmt.Sprintf("SELECT PRIVATE_ACCURACY(%s, 1e-6) FROM emp WHERE %s", expr, block[which]))
		return err
	})
	evaluated, late := boundary.SlotStats()
	t.Logf("DBA: %v (rich) vs %v (poor); analyst: %v vs %v; slots: %d evaluated, %d late",
		dba[0], dba[1], an[0], an[1], evaluated-evaluated0, late-late0)
	if d := an[0] - an[1]; math.Abs(float64(d)) > float64(gap)/4 {
		t.Errorf("the analyst's release takes %v (rich) vs %v (poor): the branch shows (a DBA's evaluation: %v vs %v)", an[0], an[1], dba[0], dba[1])
	}
	if n := (evaluated - evaluated0) + (late - late0); n != 2*runs*400 {
		t.Errorf("%d rows went through slots, want %d", n, 2*runs*400)
	}

	// Refused statements evaluate nothing: units whose budget is spent (800: rich, 801: poor — the same
	// time), an invalid ε, a literal longer or an expression larger than an analyst may write.
	l.q("UPDATE emp SET salary = 90000 WHERE id = 800")
	l.as("analyst", "SELECT PRIVATE_ACCURACY(salary > 0, 1) FROM emp WHERE id >= 800")
	evaluated0, late0 = boundary.SlotStats()
	spent := fastest(t, 3, func(which int) error {
		_, err := l.as("analyst", fmt.Sprintf("SELECT PRIVATE_ACCURACY(%s, 0.5) FROM emp WHERE id = %d", expr, 800+which))
		if err == nil || !strings.Contains(err.Error(), "budget exceeded") {
			return fmt.Errorf("a spent unit: %v, want budget exceeded", err)
		}
		return nil
	})
	if d := spent[0] - spent[1]; math.Abs(float64(d)) > float64(gap)/4 {
		t.Errorf("refused for the budget: %v (rich) vs %v (poor)", spent[0], spent[1])
	}
	for _, q := range []string{
		fmt.Sprintf("SELECT PRIVATE_ACCURACY(%s, 1e-300) FROM emp WHERE %s", expr, block[0]),
		fmt.Sprintf("SELECT PRIVATE_ACCURACY((CASE WHEN salary > 50000 THEN '%s' ELSE '' END) LIKE '%%a%%b', 0.001) FROM emp WHERE %s", strings.Repeat("a", 1025), block[0]),
		fmt.Sprintf("SELECT PRIVATE_ACCURACY(%s, 0.001) FROM emp WHERE %s", slowBranch(1000), block[0]),
	} {
		if _, err := l.as("analyst", q); err == nil {
			t.Errorf("analyst: %.80s… was not refused", q)
		}
	}
	if evaluated, late := boundary.SlotStats(); evaluated != evaluated0 || late != late0 {
		t.Errorf("refused statements evaluated %d expressions (%d late)", evaluated-evaluated0, late-late0)
	}
}

// An analyst's CREATE TABLE … AS SELECT of PRIVATE_ACCURACY: its expression is evaluated in time slots
// (after the pre-check), the table and the charges commit together, and the same statement over budget
// is refused with no table, no charge and nothing evaluated.
func TestAnalystCreateSelectOfPrivateAccuracy(t *testing.T) {
	l := newLedgerEngine(t, "")
	l.fillT("t", 50)
	l.q("CALL ldp_set_budget('t', 1, 'charge')")
	l.createAnalyst("analyst")
	l.q("CREATE DATABASE scratch")
	l.q("GRANT SELECT, INSERT, CREATE, DROP, ALTER, EXECUTE ON scratch.* TO analyst@'%'")
	evaluated0, late0 := boundary.SlotStats()
	if _, err := l.as("analyst", "CREATE TABLE scratch.acc AS SELECT PRIVATE_ACCURACY(y = 1 AND z > 10, 0.6) AS a FROM t"); err != nil {
		t.Fatal(err)
	}
	evaluated, late := boundary.SlotStats()
	if n := (evaluated - evaluated0) + (late - late0); n != 50 {
		t.Errorf("%d rows went through slots, want 50", n)
	}
	if rows := l.q("SELECT a FROM scratch.acc"); len(rows) != 1 || rows[0][0] == nil {
		t.Fatalf("scratch.acc holds %v", rows)
	}
	l.allSpent("t", 50, 0.6)
	evaluated0, late0 = boundary.SlotStats()
	if _, err := l.as("analyst", "CREATE TABLE scratch.acc2 AS SELECT PRIVATE_ACCURACY(y = 0, 0.6) AS a FROM t"); err == nil || !strings.Contains(err.Error(), "budget exceeded") {
		t.Fatalf("an over-budget CTAS: %v", err)
	}
	if evaluated, late := boundary.SlotStats(); evaluated != evaluated0 || late != late0 {
		t.Errorf("the refused CTAS evaluated %d expressions", evaluated-evaluated0+late-late0)
	}
	if _, err := l.as("root", "SELECT count(*) FROM scratch.acc2"); err == nil {
		t.Fatal("the over-budget CTAS left its table")
	}
	l.allSpent("t", 50, 0.6)
}
