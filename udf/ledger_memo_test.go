package udf_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/udf"
)

// Memoisation must not be an oracle for raw values: a memoised release is keyed by what was released
// (the column, the row, the mechanism and its parameters), never by the value, so after a unit's budget
// is spent a probe succeeds or fails the same way whatever the unit's value is.

// outcome is what an analyst sees of a statement: its rows or its error.
func (l *ledgerT) outcome(user, q string) string {
	rows, err := l.as(user, q)
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprint(rows)
}

// fillMemoTable creates p(id, y, age, name, a, b): five units with a text column (never a valid label
// or number) and two columns a and b that are equal for units 160, 162 and 164.
func (l *ledgerT) fillMemoTable() {
	l.q("CREATE TABLE p (id INT PRIMARY KEY, y INT, age INT, name VARCHAR(20), a INT, b INT)")
	l.q(`INSERT INTO p VALUES (160, 1, 34, 'ann', 3, 3), (161, 0, 50, 'bob', 3, 4), (162, 1, 41, 'cy', 5, 5),
		(163, 0, 29, 'di', 2, 7), (164, 1, 62, 'ed', 1, 1)`)
}

// exhaust spends, as analyst, the rest of every unit's budget of 1 on a release of y.
func (l *ledgerT) exhaust(table, unitCol string) {
	t := l.t
	t.Helper()
	for u, s := range l.spent(table) {
		if rest := 1 - s; rest > 0 {
			q := fmt.Sprintf("SELECT %s, FLIP_LABEL(y, %.17g, 2) FROM %s WHERE %s = %s", unitCol, rest, table, unitCol, u)
			if _, err := l.as("analyst", q); err != nil {
				t.Fatalf("analyst: %s: %v", q, err)
			}
		}
	}
	for u, s := range l.spent(table) {
		if math.Abs(s-1) > 1e-9 {
			t.Fatalf("unit %s spent %v, want the whole budget 1", u, s)
		}
	}
}

// spendMemoTable makes, as analyst, the releases the attacks need and then spends the rest of every
// unit's budget of 1.
func (l *ledgerT) spendMemoTable() {
	t := l.t
	t.Helper()
	run := func(q string) {
		t.Helper()
		if _, err := l.as("analyst", q); err != nil {
			t.Fatalf("analyst: %s: %v", q, err)
		}
	}
	run("SELECT id, LDP_ENCODE_JSON(LDP_VECTOR(y, age), 0.001, 'box') FROM p WHERE id BETWEEN 160 AND 164")
	// The text column at K = 2…100: every value invalid, released from the default input.
	var cols []string
	for k := 2; k <= 100; k++ {
		cols = append(cols, fmt.Sprintf("FLIP_LABEL(name, 0.0001, %d)", k))
	}
	run("SELECT id, " + strings.Join(cols, ", ") + " FROM p")
	run("SELECT id, LDP_LAPLACE(name, 0.001, 0, 100), LDP_LAPLACE(name, 0.001, 0, 98) FROM p")
	run("SELECT id, FLIP_LABEL(a, 0.001, 10) FROM p")
	l.exhaust("p", "id")
}

// sameOutcome fails unless the probes with a right and a wrong guess look the same to the analyst
// (the guessed literal, where it is quoted, replaced by "?").
func (l *ledgerT) sameOutcome(what, right, wrong, rightGuess, wrongGuess string) string {
	l.t.Helper()
	a := l.outcome("analyst", right)
	b := l.outcome("analyst", wrong)
	if rightGuess != "" {
		a, b = strings.ReplaceAll(a, rightGuess, "?"), strings.ReplaceAll(b, wrongGuess, "?")
	}
	if a != b {
		l.t.Errorf("%s: the right guess and the wrong guess are told apart:\n  right: %s\n    -> %s\n  wrong: %s\n    -> %s", what, right, a, wrong, b)
	}
	return a
}

func TestLedgerMemoIsNoOracle(t *testing.T) {
	l := newLedgerEngine(t, buildIdentityPlugin(t))
	l.q("CREATE TABLE aux (id INT PRIMARY KEY, f LONGBLOB)")
	l.q("INSERT INTO aux VALUES (1, LDP_VECTOR(0, 0)), (2, LDP_VECTOR(1, 100))")
	l.q(`CALL ldp_fit_mechanism('box', 'identity', 'aux', 'f', '{}')`)
	l.fillMemoTable()
	l.q("CALL ldp_set_budget('p', 1)")
	l.createAnalyst("analyst")

	// LDP_VECTOR with a literal beside a column is refused before anything is looked up, for everyone.
	for _, user := range []string{"analyst", "root"} {
		_, err := l.as(user, "SELECT id, LDP_ENCODE_JSON(LDP_VECTOR(y, 34), 0.001, 'box') FROM p WHERE id = 160")
		if err == nil || !strings.Contains(err.Error(), "34") || !strings.Contains(err.Error(), "LDP_VECTOR") {
			t.Errorf("%s: LDP_VECTOR with a literal on a protected table: %v", user, err)
		}
	}
	if len(l.spent("p")) != 0 {
		t.Errorf("refused statements were charged: %v", l.spent("p"))
	}
	first := map[string]string{}
	for _, q := range []string{
		"SELECT id, LDP_ENCODE_JSON(LDP_VECTOR(y, age), 0.001, 'box') FROM p ORDER BY id",
		"SELECT id, FLIP_LABEL(name, 0.0001, 50) FROM p ORDER BY id",
		"SELECT id, LDP_LAPLACE(name, 0.001, 0, 100) FROM p ORDER BY id",
		"SELECT id, FLIP_LABEL(a, 0.001, 10) FROM p ORDER BY id",
	} {
		first[q] = ""
	}
	l.spendMemoTable()
	for q := range first {
		first[q] = l.outcome("analyst", q)
		if strings.HasPrefix(first[q], "error") {
			t.Fatalf("the memoised repeat %s: %s", q, first[q])
		}
	}

	// Unit 160 has y = 1, age = 34, a = b = 3; unit 161 has age = 50, a = 3, b = 4. Every probe's outcome
	// is the same for the right and the wrong guess (refused: the column was never released).
	l.sameOutcome("LDP_VECTOR with a literal",
		"SELECT id, LDP_ENCODE_JSON(LDP_VECTOR(y, 34), 0.001, 'box') FROM p WHERE id = 160",
		"SELECT id, LDP_ENCODE_JSON(LDP_VECTOR(y, 35), 0.001, 'box') FROM p WHERE id = 160", "34", "35")
	// Invalid input: FLIP_LABEL(age, ε, K) is invalid exactly when age ≥ K.
	for k := 30; k <= 38; k++ {
		out := l.sameOutcome("the invalid-input binary search",
			fmt.Sprintf("SELECT id, FLIP_LABEL(age, 0.0001, %d) FROM p WHERE id = 160", k),
			"SELECT id, FLIP_LABEL(age, 0.0001, 100) FROM p WHERE id = 160", "", "")
		if k == 34 && !strings.Contains(out, "budget exceeded") {
			t.Errorf("a release of a column never released, after the budget: %s", out)
		}
	}
	// LDP_LAPLACE of an invalid value is the midpoint: 50 for [0, 100] (unit 161's age), 49 for [0, 98].
	l.sameOutcome("the Laplace midpoint",
		"SELECT id, LDP_LAPLACE(age, 0.001, 0, 100) FROM p WHERE id = 161",
		"SELECT id, LDP_LAPLACE(age, 0.001, 0, 98) FROM p WHERE id = 161", "", "")
	// Equal columns: a = b for unit 160, not for 161.
	l.sameOutcome("two equal columns",
		"SELECT id, FLIP_LABEL(b, 0.001, 10) FROM p WHERE id = 160",
		"SELECT id, FLIP_LABEL(b, 0.001, 10) FROM p WHERE id = 161", "", "")
	// The same value through a derived table is the same column, not another release.
	l.sameOutcome("a column renamed in a derived table",
		"SELECT i, FLIP_LABEL(c, 0.001, 10) FROM (SELECT id AS i, b AS c FROM p) AS d WHERE i = 160",
		"SELECT i, FLIP_LABEL(c, 0.001, 10) FROM (SELECT id AS i, b AS c FROM p) AS d WHERE i = 161", "", "")

	// Memoisation still works: every release made before is returned again, identical and free, also
	// for a column whose every value was invalid, and also through a derived table.
	for q, want := range first {
		if got := l.outcome("analyst", q); got != want {
			t.Errorf("%s: the repeat differs:\n  %s\n  %s", q, want, got)
		}
	}
	if got, want := l.outcome("analyst", "SELECT i, FLIP_LABEL(v, 0.001, 10) FROM (SELECT id AS i, a AS v FROM p) AS d ORDER BY i"),
		first["SELECT id, FLIP_LABEL(a, 0.001, 10) FROM p ORDER BY id"]; got != want {
		t.Errorf("the release of a through a derived table: %s, want the memoised %s", got, want)
	}
	for u, s := range l.spent("p") {
		if math.Abs(s-1) > 1e-9 {
			t.Fatalf("unit %s spent %v after the probes, want 1", u, s)
		}
	}
}

// The same probes through PRIVATE_ACCURACY and RR_FREQUENCY (whose argument is keyed by its expression
// or column): an invalid value's release is not shared with another column's.
func TestLedgerMemoAggregatesNoOracle(t *testing.T) {
	l := newLedgerEngine(t, "")
	l.fillMemoTable()
	l.q("CALL ldp_set_budget('p', 1)")
	l.createAnalyst("analyst")
	for _, q := range []string{
		"SELECT RR_FREQUENCY(name, 0.01, 34, 1) FROM p WHERE id = 160",
		"SELECT RR_FREQUENCY(name, 0.01, 35, 1) FROM p WHERE id = 160",
		"SELECT PRIVATE_ACCURACY(name, 0.01) FROM p WHERE id = 161",
		"SELECT PRIVATE_ACCURACY(a, 0.01) FROM p WHERE id = 164",
	} {
		if _, err := l.as("analyst", q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	l.exhaust("p", "id")
	// Unit 160's age is 34: invalid for K = 34, valid for K = 35.
	l.sameOutcome("RR_FREQUENCY of an invalid value",
		"SELECT RR_FREQUENCY(age, 0.01, 34, 1) FROM p WHERE id = 160",
		"SELECT RR_FREQUENCY(age, 0.01, 35, 1) FROM p WHERE id = 160", "", "")
	// Unit 164: a = b = 1 (a was released), age = 62 (not a bit); unit 161: name and age not bits.
	l.sameOutcome("PRIVATE_ACCURACY of two equal columns",
		"SELECT PRIVATE_ACCURACY(b, 0.01) FROM p WHERE id = 164",
		"SELECT PRIVATE_ACCURACY(age, 0.01) FROM p WHERE id = 164", "", "")
	l.sameOutcome("PRIVATE_ACCURACY of another invalid column",
		"SELECT PRIVATE_ACCURACY(age, 0.01) FROM p WHERE id = 161",
		"SELECT PRIVATE_ACCURACY(y, 0.01) FROM p WHERE id = 161", "", "")
}

// A unit with several rows: each row is its own release (keyed by the row's primary key), so two rows
// with equal values get independent releases and both are charged; a repeat is free.
func TestLedgerMemoRowsOfAUnit(t *testing.T) {
	l := newLedgerEngine(t, "")
	l.q("CREATE TABLE visits (vid INT PRIMARY KEY, pid INT, y INT)")
	l.q("INSERT INTO visits VALUES (1, 1, 0), (2, 1, 0), (3, 1, 1), (4, 2, 1)")
	l.q("CALL ldp_set_budget('visits', 10, 'memoise', 'pid')")
	l.createAnalyst("analyst")
	first, err := l.as("analyst", "SELECT pid, FLIP_LABEL(y, 1, 2) FROM visits WHERE pid = 1")
	if err != nil || len(first) != 3 {
		t.Fatalf("%v %v", first, err)
	}
	if s := l.spent("visits"); s["1"] != 3 {
		t.Fatalf("three rows of unit 1 released at ε 1: spent %v, want 3 (one release per row, not per distinct value)", s["1"])
	}
	again, err := l.as("analyst", "SELECT pid, FLIP_LABEL(y, 1, 2) FROM visits WHERE pid = 1")
	if err != nil || fmt.Sprint(again) != fmt.Sprint(first) {
		t.Fatalf("the repeat: %v (first %v), %v", again, first, err)
	}
	if s := l.spent("visits"); s["1"] != 3 {
		t.Fatalf("the memoised repeat was charged: %v", s["1"])
	}
	// Through a derived table that selects the primary key too: the same releases, free.
	got, err := l.as("analyst", "SELECT p, FLIP_LABEL(v, 1, 2) FROM (SELECT pid AS p, vid, y AS v FROM visits) d WHERE p = 1")
	if err != nil || fmt.Sprint(got) != fmt.Sprint(first) {
		t.Fatalf("through a derived table: %v (first %v), %v", got, first, err)
	}
	if s := l.spent("visits"); s["1"] != 3 {
		t.Fatalf("the memoised repeat through a derived table was charged: %v", s["1"])
	}
	// One that does not select it cannot name the row: every release fresh and charged.
	if _, err := l.as("analyst", "SELECT p, FLIP_LABEL(v, 1, 2) FROM (SELECT pid AS p, y AS v FROM visits) d WHERE p = 2"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.as("analyst", "SELECT p, FLIP_LABEL(v, 1, 2) FROM (SELECT pid AS p, y AS v FROM visits) d WHERE p = 2"); err != nil {
		t.Fatal(err)
	}
	if s := l.spent("visits"); s["2"] != 2 {
		t.Fatalf("releases whose row is unknown: spent %v, want 2 (not memoised)", s["2"])
	}
	// A DBA's explicit unit: every row is still its own release.
	l.q("SELECT FLIP_LABEL(y, 0.5, 2, 'household') FROM visits")
	l.q("SELECT FLIP_LABEL(y, 0.5, 2, 'household') FROM visits")
	if s := l.spent("visits"); s["household"] != 2 {
		t.Fatalf("four rows under one explicit unit at ε 0.5: spent %v, want 2", s["household"])
	}
}

// Without a primary key the ledger cannot tell a unit's rows apart: memoise mode is refused, and a
// memoise budget stored before is applied as charge mode.
func TestLedgerMemoNeedsRowIdentity(t *testing.T) {
	l := newLedgerEngine(t, "")
	l.q("CREATE TABLE nokey (a INT, y INT)")
	l.q("INSERT INTO nokey VALUES (1, 0), (1, 0), (2, 1)")
	_, err := l.as("root", "CALL ldp_set_budget('nokey', 5, 'memoise', 'a')")
	if err == nil || !strings.Contains(err.Error(), "'charge'") || !strings.Contains(err.Error(), "primary key") {
		t.Fatalf("memoise mode without a primary key: %v", err)
	}
	if _, ok := l.e.Ledger.Budget(engine.TableRef{Database: "ldpsql", Table: "nokey"}); ok {
		t.Fatal("the refused budget was set")
	}
	// A budget stored by an earlier version.
	ctx := context.Background()
	if err := l.e.Ledger.SetBudget(ctx, engine.Budget{TableRef: engine.TableRef{Database: "ldpsql", Table: "nokey"}, EpsTotal: 5,
		Mode: engine.BudgetMemoise, UnitColumns: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	l.q("SELECT a, FLIP_LABEL(y, 1, 2) FROM nokey")
	l.q("SELECT a, FLIP_LABEL(y, 1, 2) FROM nokey")
	if s := l.spent("nokey"); s["1"] != 4 || s["2"] != 2 {
		t.Fatalf("a stored memoise budget on a table without a primary key: spent %v, want charge mode (1: 4, 2: 2)", s)
	}
	l.q("CALL ldp_set_budget('nokey', 5, 'charge')")
	if _, err := l.as("root", "CALL ldp_set_budget('nokey', 5)"); err != nil {
		t.Fatalf("keeping charge mode: %v", err)
	}
}

// The README's example: an analyst releases a column through a derived table (or a view, or a CTE) that
// renames it; it is charged to the unit of the row it reads, and memoised with the direct release.
func TestLedgerAnalystReleasesThroughDerivedTables(t *testing.T) {
	l := newLedgerEngine(t, "")
	l.q("CREATE TABLE q (id INT PRIMARY KEY, a INT, z INT)")
	l.q("INSERT INTO q VALUES (1, 0, 5), (2, 1, 6), (3, 1, 7), (4, 0, 8)")
	l.fillT("pub", 5)
	l.q("CALL ldp_set_budget('q', 2)")
	l.q("CREATE VIEW qv AS SELECT id AS i, a AS label FROM q")
	l.createAnalyst("analyst")

	first, err := l.as("analyst", "SELECT i, FLIP_LABEL(label, 1, 2) FROM (SELECT id AS i, a AS label FROM q) v ORDER BY i")
	if err != nil || len(first) != 4 {
		t.Fatalf("the README's derived-table example: %v %v", first, err)
	}
	l.allSpent("q", 4, 1)
	for _, query := range []string{
		"SELECT i, FLIP_LABEL(label, 1, 2) FROM (SELECT id AS i, a AS label FROM q) v ORDER BY i",
		"SELECT i, FLIP_LABEL(label, 1, 2) FROM qv ORDER BY i",
		"WITH c AS (SELECT id, a FROM q WHERE id > 0) SELECT id, FLIP_LABEL(a, 1, 2) FROM c ORDER BY id",
		"SELECT k, FLIP_LABEL(w, 1, 2) FROM (SELECT i AS k, label AS w FROM (SELECT id AS i, a AS label FROM q) AS x) AS y ORDER BY k",
		"SELECT id, FLIP_LABEL(a, 1, 2) FROM q ORDER BY id",
		"SELECT v.i, FLIP_LABEL(v.label, 1, 2) FROM (SELECT id AS i, a AS label FROM q) v JOIN pub ON pub.id = v.i ORDER BY v.i",
	} {
		got, err := l.as("analyst", query)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(first) {
			t.Fatalf("analyst: %s: %v (want the memoised %v), %v", query, got, first, err)
		}
	}
	l.allSpent("q", 4, 1)
	if _, err := l.as("analyst", "SELECT PRIVATE_ACCURACY(label, 0.5) FROM qv"); err != nil {
		t.Fatalf("PRIVATE_ACCURACY through a view: %v", err)
	}
	l.allSpent("q", 4, 1.5)

	// The derived table's column is raw data everywhere but in a release's argument.
	for _, query := range []string{
		"SELECT i, label FROM (SELECT id AS i, a AS label FROM q) v",
		"SELECT * FROM qv",
		"SELECT i FROM qv WHERE label = 1",
		"SELECT i, FLIP_LABEL(label, 1, 2) FROM qv WHERE label = 1",
		"SELECT i FROM qv ORDER BY label",
		"SELECT label, count(*) FROM qv GROUP BY label",
		"SELECT count(label) FROM qv",
		"SELECT i, FLIP_LABEL(label + 0, 1, 2) FROM qv",
		"SELECT i, FLIP_LABEL(label, 1, 2) FROM (SELECT id AS i, a + 0 AS label FROM q) v",
		"SELECT i, FLIP_LABEL(label, 1, 2) FROM (SELECT DISTINCT id AS i, a AS label FROM q) v",
		"SELECT i, FLIP_LABEL(label, 1, 2) FROM (SELECT id AS i, a AS label FROM q ORDER BY a) v",
		"SELECT i, FLIP_LABEL(label, 1, 2) FROM (SELECT id AS i, a AS label FROM q WHERE z > 6) v",
		"SELECT i, FLIP_LABEL(label, 1, 2) FROM (SELECT id AS i, a AS label FROM q) v JOIN pub ON pub.y = v.label",
		"SELECT i, FLIP_LABEL(l2, 1, 2) FROM (SELECT i, label AS l2 FROM qv WHERE label = 0) v",
		"SELECT i, (SELECT label FROM qv AS w WHERE w.i = v.i) FROM qv AS v",
		"SELECT id FROM pub WHERE id IN (SELECT label FROM qv)",
		"SELECT i, FLIP_LABEL(label, 1, 2) FROM (SELECT id AS i, a AS label FROM q UNION ALL SELECT id, y FROM pub) v",
		"SELECT * FROM qv LIMIT 1",
		"TABLE qv",
		"SELECT * FROM (SELECT * FROM qv) x",
		"SELECT * FROM (SELECT id AS i, a AS label FROM q) v",
		"SELECT * FROM pub JOIN qv ON pub.id = qv.i",
		"SELECT * FROM pub, qv",
		"SELECT DISTINCT * FROM qv",
		"SELECT i FROM qv UNION SELECT label FROM qv",
		"SELECT * FROM qv UNION ALL SELECT id, y FROM pub",
		"WITH c AS (SELECT id, a FROM q) SELECT * FROM c",
		"WITH c AS (SELECT id, a FROM q) SELECT id, FLIP_LABEL(a, 1, 2) FROM c WHERE a = 1",
		"SELECT max(label) FROM qv",
		"SELECT i, sum(label) OVER () FROM qv",
		"SELECT EXISTS (SELECT * FROM qv WHERE label = 1)",
		"SELECT i, label IS NULL FROM qv",
		"SELECT i, LDP_VECTOR(label) FROM qv",
		"SELECT i, FLIP_LABEL(i, 1, label) FROM qv",
		"SELECT i, FLIP_LABEL(label, 1, 2) FROM qv GROUP BY i, label",
		"SELECT i, FLIP_LABEL(label, 1, 2) FROM (SELECT id AS i, a AS label FROM q GROUP BY id, a) v",
		"SELECT i, FLIP_LABEL(label, 1, 2) FROM (SELECT id AS i, a AS label, a AS other FROM q) v ORDER BY other",
		"SELECT * FROM (SELECT i, FLIP_LABEL(label, 1, 2) AS r, label FROM qv) v",
	} {
		if rows, err := l.as("analyst", query); err == nil {
			t.Errorf("analyst: %s returned %v", query, rows)
		} else if !strings.Contains(strings.ToLower(err.Error()), "denied") && !strings.Contains(err.Error(), "cannot be charged") {
			t.Errorf("analyst: %s: %v, want access denied", query, err)
		}
	}
	l.allSpent("q", 4, 1.5)
}

// At start, a stored memoise budget of a table without a primary key is logged as applied in charge mode.
func TestLedgerKeylessMemoiseLogged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.duckdb")
	e, err := engine.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := udf.Install(e, udf.Config{PluginDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Query(e.NewContext(context.Background()), "CREATE TABLE nokey (a INT, y INT)"); err != nil {
		t.Fatal(err)
	}
	if err := e.Ledger.SetBudget(context.Background(), engine.Budget{TableRef: engine.TableRef{Database: "ldpsql", Table: "nokey"}, EpsTotal: 2,
		Mode: engine.BudgetMemoise, UnitColumns: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	e.Close()
	e, err = engine.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var logged []string
	if _, err := udf.Install(e, udf.Config{PluginDir: t.TempDir(), Logf: func(f string, args ...any) { logged = append(logged, fmt.Sprintf(f, args...)) }}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(logged, "\n"), "ldpsql.nokey has no primary key") {
		t.Fatalf("no notice of the keyless memoise budget in %q", logged)
	}
}
