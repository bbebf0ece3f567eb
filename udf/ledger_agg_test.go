package udf_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dolthub/go-mysql-server/sql"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/udf"
)

// PRIVATE_ACCURACY, RR_FREQUENCY and LDP_LAPLACE on protected tables: charged, memoised, refused over
// budget, and what an analyst may pass them.

func toFloat(t *testing.T, v any) float64 {
	t.Helper()
	switch x := v.(type) {
	case float64:
		return x
	case float32:
		return float64(x)
	}
	t.Fatalf("%v (%T) is not a float", v, v)
	return 0
}

// releases counts the ledger's records of function fn.
func (l *ledgerT) releases(fn string) int64 {
	l.t.Helper()
	return l.count(fmt.Sprintf("SELECT count(*) FROM ldpsql_catalog.ldp_releases WHERE function_name = '%s'", fn))
}

// allSpent checks that every unit of table has spent want.
func (l *ledgerT) allSpent(table string, units int, want float64) {
	l.t.Helper()
	s := l.spent(table)
	if len(s) != units {
		l.t.Fatalf("%d units of %s charged, want %d: %v", len(s), table, units, s)
	}
	for u, e := range s {
		if math.Abs(e-want) > 1e-9 {
			l.t.Fatalf("unit %s of %s spent %v, want %v (all: %v)", u, table, e, want, s)
		}
	}
}

func TestLedgerPrivateAccuracy(t *testing.T) {
	l := newLedgerEngine(t, "")
	l.fillT("t", 200)
	l.q("UPDATE t SET y = NULL WHERE id = 199")
	l.q("CALL ldp_set_budget('t', 3)")

	// An expression of the row: one bit per row at ε 1, charged to every unit.
	first := l.q("SELECT PRIVATE_ACCURACY(y = 1, 1) FROM t")
	if len(first) != 1 || first[0][0] == nil {
		t.Fatalf("PRIVATE_ACCURACY: %v", first)
	}
	if a := toFloat(t, first[0][0]); a < 0 || a > 1 {
		t.Fatalf("accuracy %v outside [0, 1]", a)
	}
	l.allSpent("t", 200, 1)
	if n := l.releases("PRIVATE_ACCURACY"); n != 200 {
		t.Fatalf("%d releases recorded, want 200", n)
	}
	// Memoised: the same expression on the same rows returns the same bits — the same estimate — free.
	again := l.q("SELECT PRIVATE_ACCURACY(y = 1, 1) FROM t")
	if again[0][0] != first[0][0] {
		t.Fatalf("the memoised repeat gave %v, first %v", again[0][0], first[0][0])
	}
	l.allSpent("t", 200, 1)
	// Another expression is another release, even where its bit equals the first's (y = 0 is the
	// complement: keyed by value alone, every unit's release would be one of the two already made).
	l.q("SELECT PRIVATE_ACCURACY(y = 0, 1) FROM t")
	l.allSpent("t", 200, 2)

	// A plain column is keyed by its value, as FLIP_LABEL(y, ε, 2) is: they share releases, and the
	// estimate is Warner's on FLIP_LABEL's labels. The NULL label (unit 199) is released too, as a
	// uniform bit, and counted.
	acc := toFloat(t, l.q("SELECT PRIVATE_ACCURACY(y, 1) FROM t")[0][0])
	l.allSpent("t", 200, 3)
	flips := l.q("SELECT id, FLIP_LABEL(y, 1, 2) FROM t")
	l.allSpent("t", 200, 3)
	ones := int64(0)
	for _, r := range flips {
		ones += toInt64(t, r[1])
	}
	want, err := mechanisms.WarnerEstimate(ones, int64(len(flips)), 1, 2)
	if err != nil || math.Abs(want-acc) > 1e-12 {
		t.Fatalf("PRIVATE_ACCURACY(y, 1) = %v, Warner on FLIP_LABEL's memoised labels %v (%v)", acc, want, err)
	}
	if rows := l.q("SELECT PRIVATE_ACCURACY(y, 1) FROM t WHERE id = 199"); rows[0][0] == nil {
		t.Fatal("a NULL bit was skipped: the result says the value is NULL")
	}

	// Over budget: nothing returned, nothing charged, nothing recorded.
	before := l.releases("PRIVATE_ACCURACY")
	rows, err := l.as("root", "SELECT PRIVATE_ACCURACY(z > 100, 0.5) FROM t")
	if err == nil || !strings.Contains(err.Error(), "budget exceeded") || len(rows) != 0 {
		t.Fatalf("over budget: %v, %v", rows, err)
	}
	if l.releases("PRIVATE_ACCURACY") != before {
		t.Fatal("a refused statement recorded releases")
	}
	l.allSpent("t", 200, 3)
	// Nor behind HAVING, a derived table or INSERT … SELECT.
	l.q("CREATE TABLE sink (a DOUBLE)")
	for _, q := range []string{
		"SELECT id FROM t GROUP BY id HAVING PRIVATE_ACCURACY(z > 100, 0.5) > 2",
		"SELECT * FROM (SELECT PRIVATE_ACCURACY(z > 100, 0.5) AS a FROM t) AS d",
		"INSERT INTO sink SELECT PRIVATE_ACCURACY(z > 100, 0.5) FROM t",
		"CREATE TABLE sink2 AS SELECT PRIVATE_ACCURACY(z > 100, 0.5) AS a FROM t",
	} {
		if rows, err := l.as("root", q); err == nil || !strings.Contains(err.Error(), "budget exceeded") {
			t.Errorf("%s: %v, %v", q, rows, err)
		}
	}
	if n := l.count("SELECT count(*) FROM ldpsql.sink"); n != 0 {
		t.Fatalf("an over-budget INSERT wrote %d rows", n)
	}
	l.allSpent("t", 200, 3)

	// Refused where it cannot be charged before it is used.
	for _, q := range []string{
		"SELECT (SELECT PRIVATE_ACCURACY(y, 0.1) FROM t)",
		"SELECT id FROM t WHERE id IN (SELECT PRIVATE_ACCURACY(y, 0.1) FROM t)",
		"SELECT RR_FREQUENCY(FLIP_LABEL(y, 0.1, 2), 0.1, 2, 1) FROM t",
	} {
		if _, err := l.as("root", q); err == nil {
			t.Errorf("%s: succeeded", q)
		}
	}
	l.allSpent("t", 200, 3)
}

func TestLedgerRRFrequencyAndLaplace(t *testing.T) {
	l := newLedgerEngine(t, "")
	l.fillT("t", 300)
	l.fillT("open_t", 300)
	l.fillT("c", 50)
	l.q("UPDATE t SET z = NULL WHERE id = 0")
	l.q("CALL ldp_set_budget('t', 2)")
	l.q("CALL ldp_set_budget('c', 2, 'charge')")

	// Unprotected: RR_FREQUENCY debiases labels taken as already released; nothing is recorded.
	if rows := l.q("SELECT RR_FREQUENCY(y, 1, 2, 1), LDP_LAPLACE(z, 1, 0, 10) FROM open_t GROUP BY id LIMIT 1"); len(rows) != 1 {
		t.Fatalf("unprotected: %v", rows)
	}
	if n := l.count("SELECT count(*) FROM ldpsql_catalog.ldp_releases"); n != 0 {
		t.Fatalf("unprotected releases were recorded: %d", n)
	}

	// Protected: RR_FREQUENCY(y, ε, K, class) releases each y as FLIP_LABEL(y, ε, K) does, and shares
	// its memoised releases; the estimate is Warner's on them.
	flips := l.q("SELECT id, FLIP_LABEL(y, 1, 2) FROM t")
	l.allSpent("t", 300, 1)
	ones := int64(0)
	for _, r := range flips {
		ones += toInt64(t, r[1])
	}
	freq := toFloat(t, l.q("SELECT RR_FREQUENCY(y, 1, 2, 1) FROM t")[0][0])
	want, _ := mechanisms.WarnerEstimate(ones, 300, 1, 2)
	if math.Abs(freq-want) > 1e-12 {
		t.Fatalf("RR_FREQUENCY(y, 1, 2, 1) = %v, Warner on FLIP_LABEL's labels %v", freq, want)
	}
	l.allSpent("t", 300, 1)
	l.q("SELECT RR_FREQUENCY(y, 0.5, 2, 0) FROM t")
	l.allSpent("t", 300, 1.5)
	// Per group: the same releases (ε 0.5, K 2) whatever the class counted.
	if rows := l.q("SELECT id, RR_FREQUENCY(y, 0.5, 2, 1) FROM t GROUP BY id"); len(rows) != 300 {
		t.Fatalf("GROUP BY id: %d rows", len(rows))
	}
	l.allSpent("t", 300, 1.5)
	if n := l.releases("RR_FREQUENCY"); n != 300 {
		t.Fatalf("%d RR_FREQUENCY releases recorded, want 300", n)
	}

	// LDP_LAPLACE: charged, memoised, a NULL released as the midpoint (not as NULL).
	lap := l.q("SELECT id, LDP_LAPLACE(z, 0.5, 0, 100) FROM t ORDER BY id")
	l.allSpent("t", 300, 2)
	if lap[0][1] == nil {
		t.Fatal("a NULL x was released as NULL")
	}
	lap2 := l.q("SELECT id, LDP_LAPLACE(z, 0.5, 0, 100) FROM t ORDER BY id")
	for i := range lap {
		if lap[i][1] != lap2[i][1] {
			t.Fatalf("unit %v: memoised %v, first %v", lap[i][0], lap2[i][1], lap[i][1])
		}
	}
	l.allSpent("t", 300, 2)
	// Over budget: each of the three refused, nothing charged.
	for _, q := range []string{
		"SELECT id, LDP_LAPLACE(z, 0.5, 0, 50) FROM t",
		"SELECT RR_FREQUENCY(y, 0.25, 3, 1) FROM t",
		"SELECT PRIVATE_ACCURACY(y, 0.25) FROM t WHERE id = 7",
	} {
		if rows, err := l.as("root", q); err == nil || !strings.Contains(err.Error(), "budget exceeded") {
			t.Errorf("%s: %v, %v", q, rows, err)
		}
	}
	l.allSpent("t", 300, 2)

	// Charge mode: every release fresh and charged.
	a := l.q("SELECT id, LDP_LAPLACE(z, 1, 0, 10) FROM c ORDER BY id")
	b := l.q("SELECT id, LDP_LAPLACE(z, 1, 0, 10) FROM c ORDER BY id")
	l.allSpent("c", 50, 2)
	if fmt.Sprint(a) == fmt.Sprint(b) {
		t.Fatal("charge mode returned the same Laplace releases twice")
	}
	if _, err := l.as("root", "SELECT RR_FREQUENCY(y, 0.1, 2, 1) FROM c"); err == nil || !strings.Contains(err.Error(), "budget exceeded") {
		t.Fatalf("charge mode over budget: %v", err)
	}

	// A DBA's explicit unit: every row of c2 is unit 'all'; in memoise mode each row is its own release
	// (keyed by its primary key, never by its value), shared by RR_FREQUENCY and PRIVATE_ACCURACY of the
	// same column: two rows, two releases at ε 0.25.
	l.fillT("c2", 40)
	l.q("CALL ldp_set_budget('c2', 1)")
	l.q("SELECT RR_FREQUENCY(y, 0.25, 2, 1, 'all'), PRIVATE_ACCURACY(y, 0.25, 'all') FROM c2 WHERE id < 2")
	if s := l.spent("c2"); len(s) != 1 || s["all"] != 0.5 {
		t.Fatalf("explicit unit: %v", s)
	}
	l.q("SELECT id, LDP_LAPLACE(z, 0.5, 0, 10, 'all') FROM c2 WHERE id = 3")
	if s := l.spent("c2"); s["all"] != 1 {
		t.Fatalf("explicit unit: %v", s)
	}
}

// createAnalyst's grants on t and pub; the analyst may release through the three functions.
func TestLedgerAggregatesAnalyst(t *testing.T) {
	l := newLedgerEngine(t, "")
	l.fillT("t", 100)
	l.fillT("pub", 100)
	l.q("UPDATE t SET y = 7 WHERE id = 8") // not a bit, not a label for K = 2
	l.q("CREATE TABLE s (id INT PRIMARY KEY, label VARCHAR(20))")
	l.q("INSERT INTO s VALUES (1, 'abc'), (2, '1'), (3, 'x9')")
	l.q("CALL ldp_set_budget('t', 4)")
	l.q("CALL ldp_set_budget('s', 4)")
	l.createAnalyst("analyst")
	l.q("SET @v = 1")

	denied := []string{
		"SELECT y FROM t",
		"SELECT PRIVATE_ACCURACY(y = 1, 1) FROM t WHERE y = 0",
		"SELECT PRIVATE_ACCURACY(y = 1, 1) FROM t GROUP BY z",
		"SELECT PRIVATE_ACCURACY(y = 1, 1), max(y) FROM t",
		"SELECT PRIVATE_ACCURACY(y = 1, z) FROM t",
		"SELECT PRIVATE_ACCURACY(y = 1, 1, 'mine') FROM t",
		"SELECT PRIVATE_ACCURACY(y = 1, 1) FROM t ORDER BY max(z)",
		// Not a pure expression of the row: another table, a variable, randomness, time, a subquery.
		"SELECT PRIVATE_ACCURACY(t.y = pub.z, 1) FROM t JOIN pub ON pub.id = t.id",
		"SELECT PRIVATE_ACCURACY(y = @v, 1) FROM t",
		"SELECT PRIVATE_ACCURACY(RAND() < y, 1) FROM t",
		"SELECT PRIVATE_ACCURACY(SLEEP(y) = 0, 1) FROM t",
		"SELECT PRIVATE_ACCURACY(z > UNIX_TIMESTAMP(), 1) FROM t",
		"SELECT PRIVATE_ACCURACY(PREDICT(CONCAT('m', y), LDP_VECTOR(z)) = y, 1) FROM t",
		"SELECT RR_FREQUENCY(y, 1, 2, 1) FROM t WHERE z < 50",
		"SELECT RR_FREQUENCY(y, 1, 2, 1) FROM t GROUP BY y",
		"SELECT RR_FREQUENCY(y, 1, 2, z) FROM t",
		"SELECT LDP_LAPLACE(z + 1, 1, 0, 10) FROM t",
		"SELECT LDP_LAPLACE(z, 1, 0, 10, 'mine') FROM t",
		"SELECT LDP_LAPLACE(z, 1, 0, y) FROM t",
		"SELECT id, LDP_LAPLACE(z, 1, 0, 10) FROM t WHERE y = 1",
		"SELECT PRIVATE_ACCURACY(c, 1) FROM (SELECT id, y = 1 AS c FROM t) d",
	}
	for _, q := range denied {
		if rows, err := l.as("analyst", q); err == nil {
			t.Errorf("analyst: %s returned %v", q, rows)
		} else if !strings.Contains(strings.ToLower(err.Error()), "denied") {
			t.Errorf("analyst: %s: %v, want access denied", q, err)
		}
	}
	// Refused for everyone: a subquery in the released argument.
	if _, err := l.as("analyst", "SELECT PRIVATE_ACCURACY(y = (SELECT max(z) FROM pub), 1) FROM t"); err == nil || !strings.Contains(err.Error(), "subquery") {
		t.Errorf("a subquery in PRIVATE_ACCURACY's argument: %v", err)
	}
	if s := l.spent("t"); len(s) != 0 {
		t.Fatalf("denied statements were charged: %v", s)
	}

	// Allowed: the raw columns inside the released argument, unit columns anywhere.
	for _, q := range []string{
		"SELECT PRIVATE_ACCURACY(y, 1) FROM t",
		"SELECT PRIVATE_ACCURACY(CASE WHEN z > 50 THEN y ELSE 1 - y END, 1) FROM t WHERE id < 100",
		"SELECT id, PRIVATE_ACCURACY(y = 1 AND z > 10, 1) FROM t GROUP BY id ORDER BY id",
		"SELECT RR_FREQUENCY(y, 1, 2, 1) FROM t",
		"SELECT id, LDP_LAPLACE(z, 0.5, 0, 100) FROM t",
	} {
		if rows, err := l.as("analyst", q); err != nil || len(rows) == 0 {
			t.Fatalf("analyst: %s: %v, %v", q, rows, err)
		}
	}
	// ε: 1 (y, shared by RR_FREQUENCY) + 1 (CASE) + 1 (AND) + 0.5 (Laplace).
	l.allSpent("t", 100, 3.5)
	// The invalid bit (unit 8's y = 7) is released as a uniform bit rather than quoted in an error.
	if _, err := l.as("analyst", "SELECT PRIVATE_ACCURACY(y, 1) FROM t WHERE id = 8"); err != nil {
		t.Fatalf("analyst, invalid bit: %v", err)
	}
	if _, err := l.as("root", "SELECT PRIVATE_ACCURACY(y, 0.01) FROM t WHERE id = 8"); err == nil || !strings.Contains(err.Error(), "7") {
		t.Fatalf("DBA, invalid bit: %v", err)
	}

	// Each distinct expression is its own release: learning z bit by bit costs ε per question, and
	// asking the same question again returns the recorded answer for free.
	for i, q := range []string{
		"SELECT PRIVATE_ACCURACY(z > 50, 0.1) FROM t WHERE id = 5",
		"SELECT PRIVATE_ACCURACY(z > 25, 0.1) FROM t WHERE id = 5",
		"SELECT PRIVATE_ACCURACY(z > 12, 0.1) FROM t WHERE id = 5",
		"SELECT PRIVATE_ACCURACY(z > 50, 0.1) FROM t WHERE id = 5",
	} {
		if _, err := l.as("analyst", q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		want := 3.5 + 0.1*float64(min(i+1, 3))
		if s := l.spent("t"); math.Abs(s["5"]-want) > 1e-9 {
			t.Fatalf("after %s: unit 5 spent %v, want %v", q, s["5"], want)
		}
	}

	// What tells expressions apart: operators and flags, not the names columns go by.
	for _, c := range []struct {
		q    string
		want float64
	}{
		{"SELECT PRIVATE_ACCURACY(z + 1 > 50, 0.1) FROM t WHERE id = 6", 3.6},
		{"SELECT PRIVATE_ACCURACY(z - 1 > 50, 0.1) FROM t WHERE id = 6", 3.7},
		{"SELECT PRIVATE_ACCURACY(y IS TRUE, 0.1) FROM t WHERE id = 6", 3.8},
		{"SELECT PRIVATE_ACCURACY(y IS FALSE, 0.1) FROM t WHERE id = 6", 3.9},
		{"SELECT PRIVATE_ACCURACY(a.y IS FALSE, 0.1) FROM t AS a WHERE a.id = 6", 3.9},
		{"SELECT PRIVATE_ACCURACY(z + 1 > 50, 0.1) FROM t WHERE id = 6", 3.9},
	} {
		if _, err := l.as("analyst", c.q); err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		if s := l.spent("t"); math.Abs(s["6"]-c.want) > 1e-9 {
			t.Fatalf("after %s: unit 6 spent %v, want %v", c.q, s["6"], c.want)
		}
	}

	// Warnings that would quote a value ('abc' is not a number) are dropped for the analyst.
	rows, warnings, err := l.asWithWarnings("analyst", "SELECT PRIVATE_ACCURACY(label = 1, 1) FROM s")
	if err != nil || len(rows) != 1 {
		t.Fatalf("analyst on s: %v %v", rows, err)
	}
	for _, w := range warnings {
		if strings.Contains(w.Message, "abc") || strings.Contains(w.Message, "x9") {
			t.Fatalf("a warning quotes the data: %q", w.Message)
		}
	}
	_, dbaWarnings, _ := l.asWithWarnings("root", "SELECT PRIVATE_ACCURACY(label = 1, 1) FROM s")
	t.Logf("warnings: analyst %d, DBA %d", len(warnings), len(dbaWarnings))
}

// asWithWarnings runs a statement in a fresh session of user and returns the session's warnings.
func (l *ledgerT) asWithWarnings(user, query string) ([]sql.Row, []*sql.Warning, error) {
	ctx := l.e.NewContext(context.Background())
	if user != "root" {
		session := sql.NewBaseSessionWithClientServer("test", sql.Client{User: user, Address: "localhost"}, 0)
		ctx = sql.NewContext(context.Background(), sql.WithSession(session))
	}
	ctx.SetCurrentDatabase(engine.DefaultDatabase)
	_, rows, err := l.e.Query(ctx, query)
	return rows, ctx.Session.Warnings(), err
}

// A DBA's release whose argument reads a protected column through a derived table, a view or a CTE is
// charged to the unit of the row it reads; where it cannot be (no unit columns, an aggregate, a UNION),
// it is refused.
func TestLedgerReleaseThroughDerivedTables(t *testing.T) {
	l := newLedgerEngine(t, "")
	l.fillT("t", 50)
	l.fillT("pub", 50)
	l.q("CALL ldp_set_budget('t', 3)")
	l.q("CREATE VIEW v AS SELECT id AS i, y AS label FROM t")

	direct := labelsByID(t, l.q("SELECT id, FLIP_LABEL(y, 1, 2) FROM t"))
	l.allSpent("t", 50, 1)
	// The same releases (memoised, same unit and value) through a derived table, a view, a CTE, nested
	// derived tables and a join: nothing more is charged.
	for _, q := range []string{
		"SELECT id, FLIP_LABEL(y, 1, 2) FROM (SELECT id, y FROM t) AS d",
		"SELECT i, FLIP_LABEL(label, 1, 2) FROM v",
		"WITH c AS (SELECT id, y FROM t WHERE id >= 0) SELECT id, FLIP_LABEL(y, 1, 2) FROM c",
		"SELECT k, FLIP_LABEL(w, 1, 2) FROM (SELECT id AS k, y AS w FROM (SELECT * FROM t) AS a) AS b",
		"SELECT d.i, FLIP_LABEL(d.y, 1, 2) FROM (SELECT id AS i, y FROM t) AS d JOIN pub ON pub.id = d.i",
	} {
		got := labelsByID(t, l.q(q))
		if len(got) != 50 {
			t.Fatalf("%s: %d rows", q, len(got))
		}
		for id, y := range direct {
			if got[id] != y {
				t.Fatalf("%s: unit %d released %d, the memoised release is %d", q, id, got[id], y)
			}
		}
		l.allSpent("t", 50, 1)
	}
	// New releases through them are charged.
	l.q("SELECT i, FLIP_LABEL(label, 0.5, 2) FROM v")
	l.allSpent("t", 50, 1.5)
	l.q("SELECT PRIVATE_ACCURACY(c, 0.5) FROM (SELECT id, y = 1 AS c FROM t) AS d")
	l.allSpent("t", 50, 2)
	l.q("SELECT LDP_LAPLACE(zz, 0.5, 0, 50) FROM (SELECT id, z AS zz FROM t) AS d")
	l.allSpent("t", 50, 2.5)
	if _, err := l.as("root", "SELECT LDP_LAPLACE(z, 1, 0, 50) FROM (SELECT id, z FROM t) AS d"); err == nil || !strings.Contains(err.Error(), "budget exceeded") {
		t.Fatalf("over budget through a derived table: %v", err)
	}

	// Refused: the value cannot be charged to one unit.
	for q, want := range map[string]string{
		"SELECT FLIP_LABEL(y, 0.1, 2) FROM (SELECT y FROM t) AS d":                                         "does not select its unit columns",
		"SELECT FLIP_LABEL(label, 0.1, 2) FROM (SELECT label FROM v) AS d":                                 "does not select its unit columns",
		"SELECT FLIP_LABEL(m, 0.1, 2) FROM (SELECT id, max(y) AS m FROM t GROUP BY id) AS d":               "cannot be charged",
		"SELECT FLIP_LABEL(max(y), 0.1, 2) FROM t":                                                         "cannot be charged",
		"SELECT id, FLIP_LABEL(y, 0.1, 2) FROM (SELECT id, y FROM t UNION ALL SELECT id, y FROM pub) AS d": "cannot be charged",
		"SELECT id, FLIP_LABEL(s, 0.1, 2) FROM (SELECT id, sum(y) OVER (ORDER BY id) AS s FROM t) AS d":    "cannot be charged",
	} {
		if _, err := l.as("root", q); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", q, err, want)
		}
	}
	l.allSpent("t", 50, 2.5)
	// Unit columns and COUNT(*) through aggregates are not data: not refused, not charged.
	if rows := l.q("SELECT FLIP_LABEL(n % 2, 1, 2) FROM (SELECT count(*) AS n, max(id) AS m FROM t) AS d"); len(rows) != 1 {
		t.Fatalf("count(*) through a derived table: %v", rows)
	}
	l.allSpent("t", 50, 2.5)
}

// TRAIN_NOISY_CLASSIFIER's private validation runs PRIVATE_ACCURACY(PREDICT(candidate, f) = y, eps_c)
// as the caller from its job: on a protected validation table each unit is charged eps_c, the same
// model validated again is free (the recorded bits), and a validation that would over-spend fails the
// job, which then stores no model.
func TestLedgerPrivateValidationJob(t *testing.T) {
	l := newLedgerEngine(t, buildIdentityPlugin(t))
	for _, table := range []string{"aux", "train", "val"} {
		l.q(fmt.Sprintf("CREATE TABLE %s (id INT PRIMARY KEY, f LONGBLOB, y INT)", table))
		n := map[string]int{"aux": 20, "train": 300, "val": 120}[table]
		var vals []string
		for i := 0; i < n; i++ {
			y := i % 2
			x := float64(2*y-1)*0.8 + 0.2*math.Sin(float64(i))
			vals = append(vals, fmt.Sprintf("(%d, LDP_VECTOR(%g, %g), %d)", i, x, 0.1*math.Cos(float64(i)), y))
		}
		l.q(fmt.Sprintf("INSERT INTO %s VALUES %s", table, strings.Join(vals, ", ")))
	}
	l.q(`CALL ldp_fit_mechanism('box', 'identity', 'aux', 'f', '{}')`)
	l.q("CALL ldp_set_budget('val', 2.5)")
	l.createAnalyst("analyst")

	train := func(model string, seed int) engine.Job {
		t.Helper()
		params := fmt.Sprintf(`{"model": %q, "objective": "clean", "mechanism": "box", "features_col": "f", "label_col": "y", "K": 2,
			"epochs": 3, "seed": %d, "validation_table": "val", "eps_c": 1}`, model, seed)
		rows, err := l.as("analyst", fmt.Sprintf("SELECT TRAIN_NOISY_CLASSIFIER('train', '%s')", params))
		if err != nil {
			t.Fatalf("TRAIN_NOISY_CLASSIFIER: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		job, err := l.e.Jobs.Wait(ctx, toInt64(t, rows[0][0]))
		if err != nil {
			t.Fatal(err)
		}
		return job
	}
	storedAccuracy := func(model string) float64 {
		t.Helper()
		var params string
		if err := l.e.DuckDB.QueryRow("SELECT params FROM ldpsql_catalog.ldp_models WHERE name = ?", model).Scan(&params); err != nil {
			t.Fatalf("model %s: %v", model, err)
		}
		var rec struct {
			PrivateAccuracy *float64 `json:"private_accuracy"`
		}
		if err := json.Unmarshal([]byte(params), &rec); err != nil || rec.PrivateAccuracy == nil {
			t.Fatalf("model %s: no private_accuracy in %s (%v)", model, params, err)
		}
		return *rec.PrivateAccuracy
	}

	if job := train("m1", 1); job.State != "succeeded" {
		t.Fatalf("job m1: %s: %s", job.State, job.Error)
	}
	l.allSpent("val", 120, 1)
	if by := l.count("SELECT count(*) FROM ldpsql_catalog.ldp_releases WHERE function_name = 'PRIVATE_ACCURACY' AND released_by = 'analyst@localhost'"); by != 120 {
		t.Fatalf("%d validation releases recorded as the analyst's, want 120", by)
	}
	// The analyst validates the stored model again: the recorded bits, the same estimate, no charge.
	rows, err := l.as("analyst", "SELECT PRIVATE_ACCURACY(PREDICT('m1', f) = y, 1) FROM val")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := toFloat(t, rows[0][0]), storedAccuracy("m1"); got != want {
		t.Fatalf("re-validating m1 gave %v, the job recorded %v", got, want)
	}
	l.allSpent("val", 120, 1)
	// The analyst still cannot read the validation table.
	if _, err := l.as("analyst", "SELECT PREDICT('m1', f) FROM val"); err == nil || !strings.Contains(err.Error(), "denied") {
		t.Fatalf("PREDICT on raw features outside PRIVATE_ACCURACY: %v", err)
	}

	// Another model: charged again.
	if job := train("m2", 2); job.State != "succeeded" {
		t.Fatalf("job m2: %s: %s", job.State, job.Error)
	}
	l.allSpent("val", 120, 2)
	// A third would take every unit to 3 > 2.5: the job fails with the ledger's error, stores nothing,
	// charges nothing.
	job := train("m3", 3)
	if job.State != "failed" || !strings.Contains(job.Error, "budget exceeded") {
		t.Fatalf("job m3: %s: %s", job.State, job.Error)
	}
	if n := l.count("SELECT count(*) FROM ldpsql_catalog.ldp_models WHERE name = 'm3'"); n != 0 {
		t.Fatal("an over-budget validation stored its model")
	}
	l.allSpent("val", 120, 2)
}

// Which expressions share memoised releases: the same expression (whatever its columns are called),
// and nothing else.
func TestLedgerExpressionKeys(t *testing.T) {
	l := newLedgerEngine(t, "")
	l.fillT("t", 10)
	l.q("CALL ldp_set_budget('t', 100)")
	step := 0.0
	for _, c := range []struct {
		q   string
		new bool
	}{
		{"SELECT PRIVATE_ACCURACY(z > 0.5, 1) FROM t", true},
		{"SELECT PRIVATE_ACCURACY(z > 0.5, 1) FROM t", false}, // a decimal literal
		{"SELECT PRIVATE_ACCURACY(a.z > 0.5, 1) FROM t AS a", false},
		{"SELECT PRIVATE_ACCURACY(v > 0.5, 1) FROM (SELECT id, z AS v FROM t) AS d", false},
		{"SELECT PRIVATE_ACCURACY(z > 0.6, 1) FROM t", true},
		{"SELECT PRIVATE_ACCURACY(z >= 0.6, 1) FROM t", true},
		{"SELECT PRIVATE_ACCURACY(z IN (1, 2), 1) FROM t", true},
		{"SELECT PRIVATE_ACCURACY(z IN (1, 3), 1) FROM t", true},
		{"SELECT PRIVATE_ACCURACY(CAST(z AS CHAR) LIKE '1%', 1) FROM t", true},
		{"SELECT PRIVATE_ACCURACY(CAST(z AS CHAR) LIKE '1%' ESCAPE '!', 1) FROM t", true},
		{"SELECT PRIVATE_ACCURACY(CAST(z AS CHAR) LIKE '1%', 1) FROM t", false},
		{"SELECT PRIVATE_ACCURACY(z * 2 > 4, 1) FROM t", true},
		{"SELECT PRIVATE_ACCURACY(z + 2 > 4, 1) FROM t", true},
		{"SELECT PRIVATE_ACCURACY(z & 2 = 2, 1) FROM t", true},
		{"SELECT PRIVATE_ACCURACY(z | 2 = 2, 1) FROM t", true},
		{"SELECT PRIVATE_ACCURACY(CASE WHEN z > 2 THEN 1 ELSE 0 END, 1) FROM t", true},
		{"SELECT PRIVATE_ACCURACY(CASE WHEN z > 2 THEN 1 END, 1) FROM t", true},
		{"SELECT PRIVATE_ACCURACY(z > 0.5, 1) FROM t", false},
	} {
		if _, err := l.as("root", c.q); err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		if c.new {
			step++
		}
		l.allSpent("t", 10, step)
	}
}

// BenchmarkLedgerAccuracy60k measures PRIVATE_ACCURACY over a 60,000-row protected table in process:
// "unprotected" without a budget, "charged" a fresh release of every row's bit (new ε each time),
// "memoised" the repeat of one (60,000 memo lookups, no charge).
//
//	go test -run '^$' -bench LedgerAccuracy60k -benchtime 3x ./udf/
func BenchmarkLedgerAccuracy60k(b *testing.B) {
	const n = 60_000
	e, err := engine.Open(filepath.Join(b.TempDir(), "bench.duckdb"))
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	if _, err := udf.Install(e, udf.Config{PluginDir: b.TempDir()}); err != nil {
		b.Fatal(err)
	}
	run := func(q string) []sql.Row {
		_, rows, err := e.Query(e.NewContext(context.Background()), q)
		if err != nil {
			b.Fatalf("%s: %v", q, err)
		}
		return rows
	}
	for _, t := range []string{"open_t", "t"} {
		run(fmt.Sprintf("CREATE TABLE %s (id BIGINT PRIMARY KEY, y INT, z INT)", t))
		if _, err := e.DuckDB.Exec(fmt.Sprintf(`INSERT INTO ldpsql.%s SELECT range, (range %% 2)::INTEGER, (range %% 100)::INTEGER FROM range(%d)`, t, n)); err != nil {
			b.Fatal(err)
		}
	}
	run("CALL ldp_set_budget('t', 1e9)")
	eps := 1.0
	for _, tc := range []struct {
		name  string
		query func() string
	}{
		{"unprotected", func() string { return "SELECT PRIVATE_ACCURACY(z > 50 AND y = 1, 1) FROM open_t" }},
		{"charged", func() string {
			eps += 0.001
			return fmt.Sprintf("SELECT PRIVATE_ACCURACY(z > 50 AND y = 1, %g) FROM t", eps)
		}},
		{"memoised", func() string { return fmt.Sprintf("SELECT PRIVATE_ACCURACY(z > 50 AND y = 1, %g) FROM t", eps) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if rows := run(tc.query()); len(rows) != 1 || rows[0][0] == nil {
					b.Fatalf("%v", rows)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
