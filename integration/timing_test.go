package integration

import (
	"database/sql"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Attack campaign, variants 169–172 (docs/security.md): the timing oracle inside an analyst's release
// expression, over the MySQL protocol. A branch of the expression is made slow on the rows where
// salary > 50000; a DBA's query shows it in its running time, the analyst's PRIVATE_ACCURACY must not
// (its expressions run in time slots), and a statement refused for its budget or its ε, or holding a
// literal or an expression larger than an analyst may write, must evaluate nothing.
func TestAttackTimingOracleInsideReleaseExpression(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "timing.duckdb"))
	root := s.connect("root", "")
	mustExec(t, root, "CREATE TABLE emp (id INT PRIMARY KEY, salary INT)")
	values := make([]string, 802)
	for i := range values {
		salary := 10000
		if i < 400 || i == 800 {
			salary = 90000
		}
		values[i] = fmt.Sprintf("(%d, %d)", i, salary)
	}
	mustExec(t, root, "INSERT INTO emp VALUES "+strings.Join(values, ", "))
	mustExec(t, root, "CALL ldp_set_budget('emp', 1, 'charge')")
	mustExec(t, root, "SET GLOBAL ldp_release_slot_us = 1000") // 400 rows: 0.4 s a statement
	analyst := s.readmeAnalyst(root)
	block := [2]string{"id < 400", "id >= 400 AND id < 800"} // 400 rich units, 400 poor ones

	// An IN list of column references that the poor rows skip (a NULL left side) and the rich ones
	// compare one by one: the largest expression an analyst may write.
	expr := "(CASE WHEN salary > 50000 THEN salary END) IN (" + strings.Repeat("id, ", 990) + "id)"
	// fastest runs query(0) and query(1) n times each, interleaved, and returns the fastest wall time of
	// each: load only adds to a statement's time, so the fastest run is what it costs (medians of 5 let
	// a burst of load on one side fail 1 test in 20 at load 6–9 on 2 cores; see udf's timing test).
	fastest := func(db *sql.DB, n int, query func(which int) string, wantErr string) [2]time.Duration {
		t.Helper()
		var best [2]time.Duration
		for i := range n {
			for which := range 2 {
				start := time.Now()
				var v sql.NullFloat64
				err := db.QueryRow(query(which)).Scan(&v)
				if d := time.Since(start); i == 0 || d < best[which] {
					best[which] = d
				}
				if (wantErr == "" && err != nil) || (wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr))) {
					t.Fatalf("%.100s…: %v (want error %q)", query(which), err, wantErr)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		return best
	}
	// A DBA's release evaluates the expression as ldpsql did for everyone before time slots: row by row,
	// as it comes.
	dba := fastest(root, 3, func(w int) string {
		return fmt.Sprintf("SELECT PRIVATE_ACCURACY(%s, 1e-6) FROM emp WHERE %s", expr, block[w])
	}, "")
	gap := dba[0] - dba[1]
	if gap < 30*time.Millisecond {
		t.Fatalf("no amplifier: a DBA's release takes %v (rich) vs %v (poor)", dba[0], dba[1])
	}
	an := fastest(analyst, 7, func(w int) string {
		return fmt.Sprintf("SELECT PRIVATE_ACCURACY(%s, 1e-6) FROM emp WHERE %s", expr, block[w])
	}, "")
	t.Logf("DBA %v vs %v; analyst %v vs %v", dba[0], dba[1], an[0], an[1])
	if d := an[0] - an[1]; math.Abs(float64(d)) > float64(gap)/4 {
		t.Errorf("the analyst's release takes %v (rich) vs %v (poor): the branch shows (a DBA's: %v vs %v)", an[0], an[1], dba[0], dba[1])
	}

	// Spent units 800 (rich) and 801 (poor): refused, in the same time.
	var v sql.NullFloat64
	if err := analyst.QueryRow("SELECT PRIVATE_ACCURACY(salary > 0, 1) FROM emp WHERE id >= 800").Scan(&v); err != nil {
		t.Fatal(err)
	}
	spent := fastest(analyst, 3, func(w int) string {
		return fmt.Sprintf("SELECT PRIVATE_ACCURACY(%s, 0.5) FROM emp WHERE id = %d", expr, 800+w)
	}, "budget exceeded")
	if d := spent[0] - spent[1]; math.Abs(float64(d)) > float64(gap)/4 {
		t.Errorf("refused for the budget: %v (rich) vs %v (poor)", spent[0], spent[1])
	}
	// Variant 169's long literal, variant 172's invalid ε and an expression over the bound: refused.
	for q, want := range map[string]string{
		fmt.Sprintf("SELECT PRIVATE_ACCURACY((CASE WHEN salary > 50000 THEN '%s' ELSE '' END) LIKE '%%a%%a%%b', 0.001) FROM emp WHERE id = 1",
			strings.Repeat("a", 4096)): "literals of at most 1024 bytes",
		fmt.Sprintf("SELECT PRIVATE_ACCURACY(%s, 1e-300) FROM emp WHERE %s", expr, block[0]):                                              "MinEpsilon",
		"SELECT PRIVATE_ACCURACY((CASE WHEN salary > 50000 THEN salary END) IN (" + strings.Repeat("id, ", 1000) + "id), 0.001) FROM emp": "at most 1000",
	} {
		err := analyst.QueryRow(q).Scan(&v)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("analyst: %.100s…: %v, want an error naming %q", q, err, want)
		}
	}
}
