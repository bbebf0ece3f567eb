package integration

import (
	"database/sql"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// outcomeOf is what a client sees of a query: its rows, or its error. With args, go-sql-driver runs it as
// a server-side prepared statement (the connections use interpolateParams=false).
func outcomeOf(db *sql.DB, q string, args ...any) string {
	rows, err := queryAll(db, q, args...)
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprint(rows)
}

// Memoisation is no oracle over the MySQL protocol, by text and by server-side prepared statements: once
// a unit's budget is spent, probing a guess of its value gives the same outcome whether the guess is
// right or wrong (a release is memoised under what was released, never under the value), while a
// repeated release is still returned free and identical. And the README's derived-table example works
// for an analyst.
func TestLedgerMemoNoOracleOverTheWire(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "data.duckdb"))
	root := s.connect("root", "")
	mustExec(t, root, "CREATE TABLE aux (id INT PRIMARY KEY, f LONGBLOB)")
	mustExec(t, root, "INSERT INTO aux VALUES (1, LDP_VECTOR(0, 0)), (2, LDP_VECTOR(1, 100))")
	mustExec(t, root, `CALL ldp_fit_mechanism('box', 'identity', 'aux', 'f', '{}')`)
	mustExec(t, root, "CREATE TABLE p (id INT PRIMARY KEY, y INT, age INT, name VARCHAR(20), a INT, b INT)")
	mustExec(t, root, `INSERT INTO p VALUES (160, 1, 34, 'ann', 3, 3), (161, 0, 50, 'bob', 3, 4), (162, 1, 41, 'cy', 5, 5),
		(163, 0, 29, 'di', 2, 7), (164, 1, 62, 'ed', 1, 1)`)
	mustExec(t, root, "CALL ldp_set_budget('p', 1)")
	mustExec(t, root, "CREATE TABLE q (id INT PRIMARY KEY, a INT)")
	mustExec(t, root, "INSERT INTO q VALUES (1, 0), (2, 1), (3, 1)")
	mustExec(t, root, "CALL ldp_set_budget('q', 2)")
	analyst := s.readmeAnalyst(root)

	spent := func(table string) map[string]float64 { return spentByUnit(t, root, table) }

	// The releases the attacks build on, then every unit's budget spent.
	var flips []string
	for k := 2; k <= 100; k++ {
		flips = append(flips, fmt.Sprintf("FLIP_LABEL(name, 0.0001, %d)", k))
	}
	repeats := []string{
		"SELECT id, LDP_ENCODE_JSON(LDP_VECTOR(y, age), 0.001, 'box') FROM p WHERE id BETWEEN 160 AND 164 ORDER BY id",
		"SELECT id, " + strings.Join(flips, ", ") + " FROM p ORDER BY id",
		"SELECT id, LDP_LAPLACE(name, 0.001, 0, 100), LDP_LAPLACE(name, 0.001, 0, 98) FROM p ORDER BY id",
		"SELECT id, FLIP_LABEL(a, 0.001, 10) FROM p ORDER BY id",
	}
	first := map[string]string{}
	for _, q := range repeats {
		if first[q] = outcomeOf(analyst, q); strings.HasPrefix(first[q], "error") {
			t.Fatalf("analyst: %s: %s", q, first[q])
		}
	}
	for u, e := range spent("p") {
		mustExec(t, analyst, fmt.Sprintf("SELECT id, FLIP_LABEL(y, %.17g, 2) FROM p WHERE id = %s", 1-e, u))
	}
	for u, e := range spent("p") {
		if math.Abs(e-1) > 1e-9 {
			t.Fatalf("unit %s spent %v, want 1", u, e)
		}
	}

	// The outcomes of a right and a wrong guess, the guessed value replaced by "?" where an error quotes
	// the query's own literal.
	same := func(what string, right, wrong []any, q string) {
		t.Helper()
		a, b := outcomeOf(analyst, q, right...), outcomeOf(analyst, q, wrong...)
		a = strings.ReplaceAll(a, fmt.Sprint(right[0]), "?")
		b = strings.ReplaceAll(b, fmt.Sprint(wrong[0]), "?")
		if a != b {
			t.Errorf("%s: right guess %v -> %s; wrong guess %v -> %s", what, right, a, wrong, b)
		}
	}
	// Unit 160: y = 1, age = 34, a = b = 3. Unit 161: age = 50, a = 3, b = 4.
	for _, prepared := range []bool{false, true} {
		probe := func(what, q string, right, wrong []any) {
			t.Helper()
			if prepared {
				same(what+" (prepared)", right, wrong, q)
				return
			}
			inline := func(args []any) string {
				out := q
				for _, a := range args {
					out = strings.Replace(out, "?", fmt.Sprint(a), 1)
				}
				return out
			}
			a, b := outcomeOf(analyst, inline(right)), outcomeOf(analyst, inline(wrong))
			a = strings.ReplaceAll(a, fmt.Sprint(right[0]), "?")
			b = strings.ReplaceAll(b, fmt.Sprint(wrong[0]), "?")
			if a != b {
				t.Errorf("%s: right guess %v -> %s; wrong guess %v -> %s", what, right, a, wrong, b)
			}
		}
		probe("LDP_VECTOR with a literal", "SELECT id, LDP_ENCODE_JSON(LDP_VECTOR(y, ?), 0.001, 'box') FROM p WHERE id = ?",
			[]any{34, 160}, []any{35, 160})
		probe("the invalid-input binary search", "SELECT id, FLIP_LABEL(age, 0.0001, ?) FROM p WHERE id = ?",
			[]any{34, 160}, []any{35, 160})
		probe("the Laplace midpoint", "SELECT id, LDP_LAPLACE(age, 0.001, 0, ?) FROM p WHERE id = ?",
			[]any{100, 161}, []any{98, 161})
		probe("two equal columns", "SELECT id, FLIP_LABEL(b, 0.001, ?) FROM p WHERE id = ?",
			[]any{10, 160}, []any{10, 161})
	}
	if out := outcomeOf(analyst, "SELECT id, LDP_ENCODE_JSON(LDP_VECTOR(y, 34), 0.001, 'box') FROM p WHERE id = 160"); !strings.Contains(out, "columns only") {
		t.Errorf("LDP_VECTOR with a literal: %s", out)
	}
	if out := outcomeOf(analyst, "SELECT id, FLIP_LABEL(age, 0.0001, ?) FROM p WHERE id = ?", 34, 160); !strings.Contains(out, "budget exceeded") {
		t.Errorf("a column never released, after the budget: %s", out)
	}

	// Memoisation still works, by text and prepared: identical and free.
	for _, q := range repeats {
		if got := outcomeOf(analyst, q); got != first[q] {
			t.Errorf("the repeat of %s differs:\n  %s\n  %s", q, first[q], got)
		}
	}
	if got, want := outcomeOf(analyst, "SELECT id, FLIP_LABEL(a, 0.001, ?) FROM p WHERE id BETWEEN ? AND ? ORDER BY id", 10, 160, 164),
		first["SELECT id, FLIP_LABEL(a, 0.001, 10) FROM p ORDER BY id"]; got != want {
		t.Errorf("the prepared repeat: %s, want %s", got, want)
	}
	for u, e := range spent("p") {
		if math.Abs(e-1) > 1e-9 {
			t.Fatalf("unit %s spent %v after the probes, want 1", u, e)
		}
	}

	// The README's derived-table example, charged to q's units; its repeat (and the direct release of
	// the same column) memoised.
	ex := "SELECT i, FLIP_LABEL(label, 1, 2) FROM (SELECT id AS i, a AS label FROM q) v ORDER BY i"
	got := outcomeOf(analyst, ex)
	if strings.HasPrefix(got, "error") {
		t.Fatalf("the README's example: %s", got)
	}
	if s := spent("q"); len(s) != 3 || s["1"] != 1 || s["3"] != 1 {
		t.Fatalf("the README's example: spent %v", s)
	}
	for _, q := range []string{ex, "SELECT id, FLIP_LABEL(a, 1, 2) FROM q ORDER BY id"} {
		if again := outcomeOf(analyst, q); again != got {
			t.Errorf("%s: %s, want the memoised %s", q, again, got)
		}
	}
	if again := outcomeOf(analyst, "SELECT i, FLIP_LABEL(label, ?, 2) FROM (SELECT id AS i, a AS label FROM q) v ORDER BY i", 1); again != got {
		t.Errorf("prepared: %s, want the memoised %s", again, got)
	}
	if s := spent("q"); s["2"] != 1 {
		t.Fatalf("memoised repeats were charged: %v", s)
	}
	if out := outcomeOf(analyst, "SELECT i, label FROM (SELECT id AS i, a AS label FROM q) v"); !strings.Contains(out, "access denied") {
		t.Errorf("the derived table's raw column outside a release: %s", out)
	}
}
