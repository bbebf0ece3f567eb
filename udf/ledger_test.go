package udf_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dolthub/go-mysql-server/sql"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/udf"
)

// These tests run the ledger through the real SQL engine (GMS over an in-memory DuckDB, every ldpsql
// function and procedure installed). Sessions act as root or as other users, whose GMS grants apply.

type ledgerT struct {
	t *testing.T
	e *engine.Engine
}

func newLedgerEngine(t *testing.T, pluginDir string) *ledgerT {
	t.Helper()
	e, err := engine.Open(engine.MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if pluginDir == "" {
		pluginDir = t.TempDir()
	}
	if _, err := udf.Install(e, udf.Config{PluginDir: pluginDir}); err != nil {
		t.Fatal(err)
	}
	return &ledgerT{t: t, e: e}
}

// as runs a statement in a session of user (root: the engine's own root session).
func (l *ledgerT) as(user, query string) ([]sql.Row, error) {
	return l.asIn(user, engine.DefaultDatabase, query)
}

// asIn runs a statement in a session of user whose current database is db.
func (l *ledgerT) asIn(user, db, query string) ([]sql.Row, error) {
	ctx := l.e.NewContext(context.Background())
	if user != "root" {
		session := sql.NewBaseSessionWithClientServer("test", sql.Client{User: user, Address: "localhost"}, 0)
		ctx = sql.NewContext(context.Background(), sql.WithSession(session))
	}
	ctx.SetCurrentDatabase(db)
	_, rows, err := l.e.Query(ctx, query)
	return rows, err
}

func (l *ledgerT) q(query string) []sql.Row {
	l.t.Helper()
	rows, err := l.as("root", query)
	if err != nil {
		l.t.Fatalf("%s: %v", query, err)
	}
	return rows
}

// count runs a count on DuckDB, after a fold.
func (l *ledgerT) count(query string) int64 {
	l.t.Helper()
	l.fold()
	var n int64
	if err := l.e.DuckDB.QueryRow(query).Scan(&n); err != nil {
		l.t.Fatalf("%s: %v", query, err)
	}
	return n
}

// fold counts every release into ldp_budget_units, which count and spent read straight from DuckDB.
func (l *ledgerT) fold() {
	l.t.Helper()
	if err := l.e.Ledger.Fold(); err != nil {
		l.t.Fatal(err)
	}
}

// spent returns every unit's spending of table t, by unit key (as folded: fold).
func (l *ledgerT) spent(table string) map[string]float64 {
	l.t.Helper()
	l.fold()
	rows, err := l.e.DuckDB.Query(`SELECT unit_key, spent FROM ldpsql_catalog.ldp_budget_units WHERE table_name = ?`, table)
	if err != nil {
		l.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]float64{}
	for rows.Next() {
		var u string
		var s float64
		rows.Scan(&u, &s)
		out[u] = s
	}
	return out
}

// labelsByID maps the first column (an id) to the second (a label) of rows.
func labelsByID(t *testing.T, rows []sql.Row) map[int64]int64 {
	out := map[int64]int64{}
	for _, r := range rows {
		if r[1] == nil {
			t.Fatalf("a NULL release: %v", r)
		}
		out[toInt64(t, r[0])] = toInt64(t, r[1])
	}
	return out
}

// fillT creates t(id, y, z) with n rows: y = id mod 2, z = id.
func (l *ledgerT) fillT(name string, n int) {
	l.t.Helper()
	l.q(fmt.Sprintf("CREATE TABLE %s (id INT PRIMARY KEY, y INT, z INT)", name))
	if _, err := l.e.DuckDB.Exec(fmt.Sprintf(`INSERT INTO ldpsql.%s SELECT range, (range %% 2)::INTEGER, range FROM range(%d)`, name, n)); err != nil {
		l.t.Fatal(err)
	}
}

func TestLedgerBudgetMemoAndExhaustion(t *testing.T) {
	l := newLedgerEngine(t, "")
	l.fillT("t", 100)
	l.fillT("open_t", 10)
	l.q("UPDATE t SET y = NULL WHERE id = 99")
	l.q("UPDATE open_t SET y = NULL WHERE id = 9")

	// An unprotected table is untouched by the ledger: NULL in, NULL out, nothing recorded.
	if rows := l.q("SELECT id, FLIP_LABEL(y, 1, 2) FROM open_t WHERE id = 9"); rows[0][1] != nil {
		t.Fatalf("unprotected NULL label released as %v", rows[0][1])
	}
	l.q("SELECT FLIP_LABEL(y, 1, 2) FROM open_t")
	if n := l.count("SELECT count(*) FROM ldpsql_catalog.ldp_releases"); n != 0 {
		t.Fatalf("releases of an unprotected table were recorded: %d", n)
	}

	row := l.q("CALL ldp_set_budget('t', 2)")[0]
	if row[0] != "ldpsql.t" || row[1] != 2.0 || row[2] != "memoise" || row[3] != "id" {
		t.Fatalf("ldp_set_budget returned %v", row)
	}
	first := labelsByID(t, l.q("SELECT id, FLIP_LABEL(y, 1, 2) FROM t"))
	if len(first) != 100 {
		t.Fatalf("%d releases", len(first))
	}
	spent := l.spent("t")
	if len(spent) != 100 || spent["0"] != 1 || spent["99"] != 1 {
		t.Fatalf("after one release at ε 1: %v", spent)
	}
	// The memoised repeat: the identical release, no new charge, no new record.
	again := labelsByID(t, l.q("SELECT id, FLIP_LABEL(y, 1, 2) FROM t"))
	for id, y := range first {
		if again[id] != y {
			t.Fatalf("unit %d: memoised release %d, first release %d", id, again[id], y)
		}
	}
	if s := l.spent("t"); s["0"] != 1 || s["42"] != 1 {
		t.Fatalf("a memoised repeat was charged: %v", s)
	}
	if n := l.count("SELECT count(*) FROM ldpsql_catalog.ldp_releases"); n != 100 {
		t.Fatalf("%d releases recorded, want 100", n)
	}
	// Within one statement a repeated release is made once: both columns agree, charged once.
	rows := l.q("SELECT id, FLIP_LABEL(y, 0.5, 2), FLIP_LABEL(y, 0.5, 2) FROM t WHERE id < 10")
	for _, r := range rows {
		if r[1] != r[2] {
			t.Fatalf("one statement released unit %v twice: %v", r[0], r)
		}
	}
	if s := l.spent("t"); s["3"] != 1.5 || s["10"] != 1 {
		t.Fatalf("after a second release of units 0..9: %v", s)
	}

	// Exhaustion: ε 1 more would take units 0..9 to 2.5 > 2. Nothing is returned or charged, not even
	// for units 10..99, which could afford it.
	before := l.count("SELECT count(*) FROM ldpsql_catalog.ldp_releases")
	_, err := l.as("root", "SELECT id, FLIP_LABEL(y, 1, 3) FROM t")
	if err == nil {
		t.Fatal("an over-budget release succeeded")
	}
	for _, want := range []string{"ldp budget exceeded", "10 of 100 units of table ldpsql.t", "remaining ε 0.5 of 2", "nothing was released"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if n := l.count("SELECT count(*) FROM ldpsql_catalog.ldp_releases"); n != before {
		t.Fatalf("a refused statement recorded %d releases", n-before)
	}
	if s := l.spent("t"); s["3"] != 1.5 || s["50"] != 1 {
		t.Fatalf("a refused statement charged: %v", s)
	}
	// Units that can afford it may still be released; a NULL label is released too, as a label.
	rows = l.q("SELECT id, FLIP_LABEL(y, 1, 3) FROM t WHERE id >= 10")
	if len(rows) != 90 || rows[len(rows)-1][1] == nil {
		t.Fatalf("releases of units 10..99: %d rows, last %v", len(rows), rows[len(rows)-1])
	}
	for _, r := range rows {
		if y := toInt64(t, r[1]); y < 0 || y > 2 {
			t.Fatalf("label %d outside 0..2", y)
		}
	}
	if s := l.spent("t"); s["99"] != 2 || s["5"] != 1.5 {
		t.Fatalf("after releasing 10..99: %v", s)
	}
	// The record: what, of which unit, when, by whom, at which ε.
	var fn, mech, by string
	var eps float64
	if err := l.e.DuckDB.QueryRow(`SELECT function_name, mechanism, released_by, eps FROM ldpsql_catalog.ldp_releases WHERE unit_key = '99' ORDER BY id DESC LIMIT 1`).
		Scan(&fn, &mech, &by, &eps); err != nil || fn != "FLIP_LABEL" || mech != "k-rr" || by != "root@localhost" || eps != 1 {
		t.Fatalf("ldp_releases: %s %s %s %v %v", fn, mech, by, eps, err)
	}
	// The DBA reads the ledger through SQL.
	if rows := l.q("SELECT eps_total, mode FROM ldpsql_catalog.ldp_budget WHERE table_name = 't'"); len(rows) != 1 || rows[0][0] != 2.0 {
		t.Fatalf("ldp_budget: %v", rows)
	}
	if rows := l.q("SELECT spent FROM ldpsql_catalog.ldp_budget_units WHERE unit_key = '99'"); len(rows) != 1 || rows[0][0] != 2.0 {
		t.Fatalf("ldp_budget_units: %v", rows)
	}
}

func TestLedgerChargeMode(t *testing.T) {
	l := newLedgerEngine(t, "")
	l.fillT("t", 200)
	l.q("CALL ldp_set_budget('t', 10, 'charge')")
	a := labelsByID(t, l.q("SELECT id, FLIP_LABEL(y, 1, 2) FROM t"))
	b := labelsByID(t, l.q("SELECT id, FLIP_LABEL(y, 1, 2) FROM t"))
	// Fresh noise: each label is flipped independently with probability 1/(e+1) = 0.27, so two releases
	// differ for 39% of the units; all 200 agreeing has probability 0.61^200 < 1e-40.
	differ := 0
	for id := range a {
		if a[id] != b[id] {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("charge mode returned the same 200 releases twice")
	}
	if s := l.spent("t"); s["7"] != 2 || l.count("SELECT count(*) FROM ldpsql_catalog.ldp_releases") != 400 {
		t.Fatalf("charge mode: spent %v", s["7"])
	}
	// Switching back to memoise returns the first release recorded.
	l.q("CALL ldp_set_budget('t', 10, 'memoise')")
	c := labelsByID(t, l.q("SELECT id, FLIP_LABEL(y, 1, 2) FROM t"))
	for id := range a {
		if c[id] != a[id] {
			t.Fatalf("unit %d: memoise after charge mode returned %d, the first release was %d", id, c[id], a[id])
		}
	}
	// A DBA may charge an explicit unit: here rows 0..3 belong to one household. Each row is its own
	// release (memoised by its primary key, not by its value): 4 × ε 0.5, and a repeat is free.
	l.q("SELECT FLIP_LABEL(y, 0.5, 2, 'household 1') FROM t WHERE id < 4")
	l.q("SELECT FLIP_LABEL(y, 0.5, 2, 'household 1') FROM t WHERE id < 4")
	if s := l.spent("t"); s["household 1"] != 2 {
		t.Fatalf("explicit unit: %v", s["household 1"])
	}
	if rows, err := l.as("root", "SELECT FLIP_LABEL(y, 0.5, 2, NULL) FROM t"); err == nil || !strings.Contains(err.Error(), "unit") {
		t.Fatalf("NULL unit key: %v %v", rows, err)
	}
	// The unit columns cannot change once units were charged.
	if _, err := l.as("root", "CALL ldp_set_budget('t', 10, 'memoise', 'z')"); err == nil || !strings.Contains(err.Error(), "cannot change") {
		t.Fatalf("changing the unit columns: %v", err)
	}
	for _, q := range []string{
		"CALL ldp_set_budget('t', 0)", "CALL ldp_set_budget('t', 1, 'sometimes')", "CALL ldp_set_budget('nope', 1)",
		"CALL ldp_set_budget('t', 1, 'charge', 'nope')",
	} {
		if _, err := l.as("root", q); err == nil {
			t.Errorf("%s succeeded", q)
		}
	}
	l.q("CREATE TABLE nokey (a INT, y INT)")
	if _, err := l.as("root", "CALL ldp_set_budget('nokey', 1)"); err == nil || !strings.Contains(err.Error(), "no primary key") {
		t.Fatalf("a table without a key: %v", err)
	}
	// Memoise mode needs a primary key to tell a unit's rows apart (TestLedgerMemoNeedsRowIdentity).
	if _, err := l.as("root", "CALL ldp_set_budget('nokey', 1, 'memoise', 'a')"); err == nil || !strings.Contains(err.Error(), "'charge'") {
		t.Fatalf("memoise mode on a table without a key: %v", err)
	}
	l.q("CALL ldp_set_budget('nokey', 1, 'charge', 'a')")
}

// Concurrent statements cannot over-spend a unit: in charge mode, 8 statements each asking ε 1 of a unit
// with ε 3 left: exactly 3 succeed. In memoise mode with ε 1 in all, every success returns the one
// release that was charged.
func TestLedgerConcurrentStatements(t *testing.T) {
	l := newLedgerEngine(t, "")
	l.fillT("c", 1)
	l.fillT("m", 1)
	l.q("CALL ldp_set_budget('c', 3, 'charge')")
	l.q("CALL ldp_set_budget('m', 1)")
	for _, table := range []string{"c", "m"} {
		var wg sync.WaitGroup
		results := make([][]sql.Row, 8)
		errs := make([]error, 8)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = l.as("root", "SELECT id, FLIP_LABEL(y, 1, 10) FROM "+table)
			}()
		}
		wg.Wait()
		ok := 0
		var released []int64
		for i, err := range errs {
			switch {
			case err == nil:
				ok++
				released = append(released, toInt64(t, results[i][0][1]))
			case !strings.Contains(err.Error(), "ldp budget exceeded"):
				t.Fatalf("%s: %v", table, err)
			case len(results[i]) != 0:
				t.Fatalf("%s: a refused statement returned rows", table)
			}
		}
		s := l.spent(table)["0"]
		switch table {
		case "c":
			if ok != 3 || s != 3 || l.count("SELECT count(*) FROM ldpsql_catalog.ldp_releases WHERE table_name = 'c'") != 3 {
				t.Fatalf("charge mode: %d succeeded, spent %v", ok, s)
			}
		case "m":
			if ok < 1 || s != 1 || l.count("SELECT count(*) FROM ldpsql_catalog.ldp_releases WHERE table_name = 'm'") != 1 {
				t.Fatalf("memoise mode: %d succeeded, spent %v", ok, s)
			}
			for _, y := range released {
				if y != released[0] {
					t.Fatalf("memoise mode returned different releases: %v", released)
				}
			}
		}
	}
}

// Every statement that releases goes through the ledger; releases are allowed only where they can be
// charged before anything leaves (SELECT lists), and the ledger follows a renamed table.
func TestLedgerStatements(t *testing.T) {
	l := newLedgerEngine(t, "")
	l.fillT("t", 20)
	l.q("CALL ldp_set_budget('t', 1)")
	// A derived table, a view, a CTE: charged once per unit and value.
	l.q("SELECT r FROM (SELECT id, FLIP_LABEL(y, 0.25, 2) AS r FROM t) AS x WHERE r = 1")
	l.q("CREATE VIEW released AS SELECT id, FLIP_LABEL(y, 0.25, 2) AS r FROM t")
	l.q("SELECT * FROM released")
	l.q("WITH x AS (SELECT id, FLIP_LABEL(y, 0.25, 2) AS r FROM t) SELECT count(*) FROM x")
	if s := l.spent("t"); s["4"] != 0.25 {
		t.Fatalf("derived table, view and CTE of one release: spent %v", s["4"])
	}
	// A UNION's branches are charged together, before either returns a row.
	if rows := l.q("SELECT id, FLIP_LABEL(y, 0.25, 2) FROM t UNION ALL SELECT id, FLIP_LABEL(y, 0.25, 2) FROM t"); len(rows) != 40 {
		t.Fatalf("UNION: %d rows", len(rows))
	}
	if rows, err := l.as("root", "SELECT id, FLIP_LABEL(y, 0.01, 2) FROM t WHERE id = 0 UNION ALL SELECT id, FLIP_LABEL(y, 5, 2) FROM t WHERE id = 1"); err == nil || len(rows) != 0 {
		t.Fatalf("over-budget UNION: %v %v", rows, err)
	}
	if s := l.spent("t"); s["4"] != 0.25 || s["0"] != 0.25 {
		t.Fatalf("UNION: spent %v", s)
	}
	// INSERT … SELECT and CREATE TABLE … AS SELECT are charged before they write.
	l.q("CREATE TABLE out1 AS SELECT id, FLIP_LABEL(y, 0.25, 3) AS r FROM t")
	l.q("CREATE TABLE out2 (id INT PRIMARY KEY, r INT)")
	l.q("INSERT INTO out2 SELECT id, FLIP_LABEL(y, 0.25, 4) FROM t")
	if s := l.spent("t"); s["4"] != 0.75 || l.count("SELECT count(*) FROM ldpsql.out2") != 20 {
		t.Fatalf("CTAS and INSERT … SELECT: spent %v", s["4"])
	}
	// Over budget: the INSERT writes nothing, the CREATE TABLE … AS copies nothing, SELECT … INTO sets nothing.
	if _, err := l.as("root", "INSERT INTO out2 SELECT id + 100, FLIP_LABEL(y, 0.5, 2) FROM t"); err == nil || !strings.Contains(err.Error(), "budget exceeded") {
		t.Fatalf("over-budget INSERT: %v", err)
	}
	if n := l.count("SELECT count(*) FROM ldpsql.out2"); n != 20 {
		t.Fatalf("an over-budget INSERT wrote %d rows", n-20)
	}
	if _, err := l.as("root", "CREATE TABLE out3 AS SELECT id, FLIP_LABEL(y, 0.5, 2) AS r FROM t"); err == nil {
		t.Fatal("over-budget CREATE TABLE … AS succeeded")
	}
	if rows, err := l.as("root", "SELECT count(*) FROM out3"); err == nil && toInt64(t, rows[0][0]) != 0 {
		t.Fatalf("an over-budget CREATE TABLE … AS wrote %v rows", rows[0][0])
	}
	l.q("SET @v = -1")
	if _, err := l.as("root", "SELECT FLIP_LABEL(y, 0.5, 2) INTO @v FROM t WHERE id = 1"); err == nil {
		t.Fatal("over-budget SELECT … INTO succeeded")
	}
	// (A session of its own: l.as starts a new one each time, so check in one statement.)
	if s := l.spent("t"); s["1"] != 0.75 {
		t.Fatalf("refused statements charged: %v", s["1"])
	}
	// Releases outside a SELECT list cannot be charged before they are used: refused.
	for _, q := range []string{
		"SELECT id FROM t WHERE FLIP_LABEL(y, 0.1, 2) = 1",
		"SELECT id FROM t ORDER BY FLIP_LABEL(y, 0.1, 2)",
		"SELECT FLIP_LABEL(y, 0.1, 2) AS r, count(*) FROM t GROUP BY r",
		"SELECT id, (SELECT FLIP_LABEL(y, 0.1, 2) FROM t t2 WHERE t2.id = t.id) FROM t",
		"UPDATE out2 JOIN t ON t.id = out2.id SET out2.r = FLIP_LABEL(t.y, 0.1, 2)",
		"SELECT LDP_ENCODE(LDP_VECTOR(a.y, b.y), 0.1, 'identity') FROM t a JOIN t b ON a.id = b.id",
	} {
		if _, err := l.as("root", q); err == nil {
			t.Errorf("%s: succeeded", q)
		} else if !strings.Contains(err.Error(), "SELECT list") && !strings.Contains(err.Error(), "two rows") {
			t.Errorf("%s: %v", q, err)
		}
	}
	if s := l.spent("t"); s["1"] != 0.75 {
		t.Fatalf("refused statements charged: %v", s["1"])
	}
	// The budget follows the table.
	l.q("RENAME TABLE t TO t_renamed")
	if _, err := l.as("root", "SELECT FLIP_LABEL(y, 0.5, 2) FROM t_renamed"); err == nil || !strings.Contains(err.Error(), "budget exceeded") {
		t.Fatalf("after RENAME: %v", err)
	}
	if s := l.spent("t_renamed"); s["1"] != 0.75 {
		t.Fatalf("after RENAME: %v", s)
	}
}

// createAnalyst creates a user with the grants the README gives an analyst.
func (l *ledgerT) createAnalyst(name string) {
	l.q(fmt.Sprintf("CREATE USER %s@'%%' IDENTIFIED BY 'pw'", name))
	l.q(fmt.Sprintf("GRANT SELECT, EXECUTE ON ldpsql.* TO %s@'%%'", name))
}

func TestLedgerAnalystRole(t *testing.T) {
	l := newLedgerEngine(t, "")
	l.fillT("t", 10)
	l.fillT("pub", 10)
	l.q("UPDATE t SET y = 7 WHERE id = 8") // out of range for K = 2
	l.q("UPDATE t SET y = NULL WHERE id = 9")
	l.q("CALL ldp_set_budget('t', 2)")
	l.createAnalyst("analyst")
	l.q("CREATE VIEW raw_view AS SELECT id, y FROM t")
	l.q("CREATE VIEW released AS SELECT id, FLIP_LABEL(y, 0.5, 2) AS r FROM t")

	denied := []string{
		"SELECT * FROM t",
		"SELECT y FROM t",
		"TABLE t",
		"SELECT id FROM t WHERE y = 1",
		"SELECT id FROM t WHERE z > 5",
		"SELECT id FROM t ORDER BY y",
		"SELECT z, count(*) FROM t GROUP BY z",
		"SELECT id FROM t GROUP BY id HAVING max(y) > 0",
		"SELECT count(y) FROM t",
		"SELECT max(z) FROM t",
		"SELECT sum(y) FROM t",
		"SELECT DISTINCT y FROM t",
		"SELECT CASE WHEN y = 1 THEN 'one' END FROM t",
		"SELECT * FROM raw_view",
		"WITH c AS (SELECT y FROM t) SELECT * FROM c",
		"SELECT * FROM (SELECT id, y FROM t) AS d",
		"SELECT (SELECT y FROM t t2 WHERE t2.id = 1)",
		"SELECT id FROM pub WHERE EXISTS (SELECT 1 FROM t WHERE t.id = pub.id AND t.y = 1)",
		"SELECT id FROM t WHERE id IN (SELECT id FROM t WHERE y = 1)",
		"SELECT pub.id FROM pub JOIN t ON t.y = pub.id",
		"SELECT a.id FROM t a NATURAL JOIN t b",
		"SELECT id FROM t UNION SELECT y FROM t",
		"SELECT id, row_number() OVER (ORDER BY y) FROM t",
		"SELECT id, sum(id) OVER (PARTITION BY z) FROM t",
		"SELECT LDP_VECTOR(y, z) FROM t",
		"SELECT RR_FREQUENCY(y, 1, 2, 1) FROM t WHERE z > 3",
		"SELECT LDP_LAPLACE(z + 0, 1, 0, 10) FROM t",
		"SELECT PRIVATE_ACCURACY(y = 1, 1) FROM t WHERE y = 0",
		"EXPLAIN SELECT y FROM t",
		"CREATE TABLE copy_t AS SELECT * FROM t",
		"INSERT INTO pub SELECT id + 100, y, z FROM t",
		"ANALYZE TABLE t",
		// Around the ledger: a computed argument, a raw parameter, an own unit key, a raw filter.
		"SELECT id, FLIP_LABEL(y + 0, 1, 2) FROM t",
		"SELECT id, FLIP_LABEL(y, z, 2) FROM t",
		"SELECT id, FLIP_LABEL(y, 1, 2, 'mine') FROM t",
		"SELECT id, FLIP_LABEL(y, 1, 2) FROM t WHERE y = 0",
		// The ledger itself, and setting budgets.
		"SELECT * FROM ldpsql_catalog.ldp_budget",
		"SELECT * FROM ldpsql_catalog.ldp_releases",
		"SELECT * FROM ldpsql_catalog.ldp_budget_units",
		"CALL ldp_set_budget('t', 100)",
	}
	for _, q := range denied {
		if rows, err := l.as("analyst", q); err == nil {
			t.Errorf("analyst: %s returned %v", q, rows)
		} else if msg := strings.ToLower(err.Error()); !strings.Contains(msg, "denied") {
			t.Errorf("analyst: %s: %v, want access denied", q, err)
		}
	}
	// Granted everything a DBA has but SUPER, the analyst still may not read the ledger or raw columns.
	l.q("GRANT SELECT ON *.* TO analyst@'%'")
	for _, q := range []string{"SELECT * FROM ldpsql_catalog.ldp_releases", "SELECT y FROM t"} {
		if _, err := l.as("analyst", q); err == nil || !strings.Contains(err.Error(), "denied") {
			t.Errorf("analyst with SELECT on *.*: %s: %v", q, err)
		}
	}
	if len(l.spent("t")) != 0 {
		t.Fatalf("denied statements were charged: %v", l.spent("t"))
	}

	// What an analyst may do: unit columns, COUNT(*), releases through the ledger.
	if rows, err := l.as("analyst", "SELECT id FROM t WHERE id < 5 ORDER BY id"); err != nil || len(rows) != 5 {
		t.Fatalf("unit columns: %v %v", rows, err)
	}
	if rows, err := l.as("analyst", "SELECT count(*) FROM t"); err != nil || toInt64(t, rows[0][0]) != 10 {
		t.Fatalf("count(*): %v %v", rows, err)
	}
	rows, err := l.as("analyst", "SELECT id, FLIP_LABEL(y, 1, 2) FROM t")
	if err != nil || len(rows) != 10 {
		t.Fatalf("analyst FLIP_LABEL: %v %v", rows, err)
	}
	// The invalid (7) and NULL labels are released as uniform labels: no error quoting them, no NULL.
	for _, r := range labelsByID(t, rows) {
		if r < 0 || r > 1 {
			t.Fatalf("label %d", r)
		}
	}
	if rows, err := l.as("analyst", "SELECT * FROM released WHERE id > 4"); err != nil || len(rows) != 5 {
		t.Fatalf("a DBA's view of releases: %v %v", rows, err)
	}
	if rows, err := l.as("analyst", "SELECT t.id, FLIP_LABEL(t.y, 0.25, 2) FROM t JOIN pub ON pub.id = t.id WHERE pub.z < 3"); err != nil || len(rows) != 3 {
		t.Fatalf("a join with a public table: %v %v", rows, err)
	}
	by := ""
	l.e.DuckDB.QueryRow(`SELECT released_by FROM ldpsql_catalog.ldp_releases WHERE eps = 0.25`).Scan(&by)
	// Units 0..2: ε 1 + 0.25; units 5..9: ε 1 + 0.5 (the view's filter on id is applied before its release).
	if s := l.spent("t"); s["0"] != 1.25 || s["5"] != 1.5 || s["3"] != 1 || by != "analyst@localhost" {
		t.Fatalf("analyst releases: spent %v, released by %q", s, by)
	}
	// The budget caps ε: a large ε cannot be afforded.
	if _, err := l.as("analyst", "SELECT id, FLIP_LABEL(y, 64, 2) FROM t WHERE id = 3"); err == nil || !strings.Contains(err.Error(), "budget exceeded") {
		t.Fatalf("ε 64: %v", err)
	}

	// A DBA other than root: GRANT SUPER.
	l.q("CREATE USER dba@'%' IDENTIFIED BY 'pw'")
	l.q("GRANT SUPER ON *.* TO dba@'%'")
	l.q("GRANT SELECT ON ldpsql.* TO dba@'%'")
	if rows, err := l.as("dba", "SELECT y FROM t WHERE id = 1"); err != nil || toInt64(t, rows[0][0]) != 1 {
		t.Fatalf("DBA reading raw data: %v %v", rows, err)
	}
	if _, err := l.as("dba", "CALL ldp_set_budget('t', 3)"); err != nil {
		t.Fatalf("DBA setting a budget: %v", err)
	}
	if _, err := l.as("dba", "SELECT count(*) FROM ldpsql_catalog.ldp_releases"); err != nil {
		t.Fatalf("DBA reading the ledger: %v", err)
	}
}

// buildIdentityPlugin builds the built-in identity encoder into a fresh plugin directory.
func buildIdentityPlugin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, udf.BuiltinPlugins["identity"]), "./plugins/builtin/identity")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the identity plugin: %v\n%s", err, out)
	}
	return dir
}

func TestLedgerEncodeAndPrivatize(t *testing.T) {
	l := newLedgerEngine(t, buildIdentityPlugin(t))
	l.q("CREATE TABLE aux (id INT PRIMARY KEY, f LONGBLOB)")
	l.q("INSERT INTO aux VALUES (1, LDP_VECTOR(0, 0)), (2, LDP_VECTOR(1, 1))")
	l.q(`CALL ldp_fit_mechanism('box', 'identity', 'aux', 'f', '{}')`)
	l.q("CREATE TABLE raw_rows (id INT PRIMARY KEY, f LONGBLOB, y INT)")
	for i := 0; i < 50; i++ {
		l.q(fmt.Sprintf("INSERT INTO raw_rows VALUES (%d, LDP_VECTOR(%g, %g), %d)", i, float64(i%10)/10, 0.5, i%3))
	}
	l.q("UPDATE raw_rows SET f = NULL WHERE id = 49")
	l.q("CALL ldp_set_budget('raw_rows', 4)")

	enc := l.q("SELECT id, LDP_ENCODE(f, 1, 'box') FROM raw_rows ORDER BY id")
	again := l.q("SELECT id, LDP_ENCODE(f, 1, 'box') FROM raw_rows ORDER BY id")
	for i := range enc {
		if enc[i][1] == nil || string(enc[i][1].([]byte)) != string(again[i][1].([]byte)) {
			t.Fatalf("unit %v: memoised release differs or is NULL: %v %v", enc[i][0], enc[i][1], again[i][1])
		}
	}
	// The JSON form returns the same memoised release (at float64 precision; the BLOB holds float32).
	var js []float64
	if err := json.Unmarshal([]byte(fmt.Sprint(l.q("SELECT LDP_ENCODE_JSON(f, 1, 'box') FROM raw_rows WHERE id = 3")[0][0])), &js); err != nil {
		t.Fatal(err)
	}
	blob, _ := udf.UnpackVector(enc[3][1].([]byte))
	if len(js) != 2 || float32(js[0]) != blob[0] || float32(js[1]) != blob[1] {
		t.Fatalf("JSON release %v, BLOB release %v", js, blob)
	}
	if s := l.spent("raw_rows"); s["3"] != 1 || len(s) != 50 {
		t.Fatalf("LDP_ENCODE and its repeats: %v", s)
	}

	// ldp_privatize charges ε_x = 1 for the features and ε_y = 1 for the label before the destination is
	// written; the features at ε 1 through 'box' and 'laplace' were released above, so they are memoised.
	row := l.q("CALL ldp_privatize('raw_rows', 'f', 'y', 'released', 2.0, 0.5, 'box', 'laplace', 3)")[0]
	if toInt64(t, row[1]) != 50 {
		t.Fatalf("ldp_privatize: %v", row)
	}
	if s := l.spent("raw_rows"); s["3"] != 2 || s["49"] != 2 {
		t.Fatalf("after ldp_privatize: %v", s)
	}
	if n := l.count(`SELECT count(*) FROM ldpsql_catalog.ldp_releases WHERE function_name = 'ldp_privatize' AND mechanism = 'k-rr' AND eps = 1`); n != 50 {
		t.Fatalf("ldp_privatize recorded %d label releases", n)
	}
	if n := l.count(`SELECT count(*) FROM ldpsql.released r JOIN ldpsql_catalog.ldp_releases l ON l.unit_key = r.id::VARCHAR AND l.released_value = r.f::BLOB`); n != 0 {
		t.Logf("(features are stored as float64 in the ledger and float32 in the destination: %d byte-equal)", n)
	}
	// The same release again is memoised: same rows, nothing charged.
	l.q("CALL ldp_privatize('raw_rows', 'f', 'y', 'released_again', 2.0, 0.5, 'box', 'laplace', 3)")
	if s := l.spent("raw_rows"); s["3"] != 2 {
		t.Fatalf("a memoised ldp_privatize was charged: %v", s["3"])
	}
	if n := l.count(`SELECT count(*) FROM ldpsql.released a JOIN ldpsql.released_again b USING (id) WHERE a.f = b.f AND a.y = b.y`); n != 50 {
		t.Fatalf("memoised ldp_privatize: %d of 50 rows equal", n)
	}
	// Over budget (2 + 3 + 3 > 4): nothing written, nothing charged.
	_, err := l.as("root", "CALL ldp_privatize('raw_rows', 'f', 'y', 'too_much', 6.0, 0.5, 'box', 'duchi', 3)")
	if err == nil || !strings.Contains(err.Error(), "50 of 50 units") {
		t.Fatalf("over-budget ldp_privatize: %v", err)
	}
	if rows, _ := l.as("root", "SHOW TABLES"); strings.Contains(fmt.Sprint(rows), "too_much") || strings.Contains(fmt.Sprint(rows), "_ldp_tmp") {
		t.Fatalf("an over-budget ldp_privatize left tables: %v", rows)
	}
	if s := l.spent("raw_rows"); s["3"] != 2 {
		t.Fatalf("a refused ldp_privatize charged: %v", s["3"])
	}

	// An analyst releases through the ledger with LDP_ENCODE and ldp_privatize, and cannot read f.
	l.createAnalyst("analyst")
	l.q("CREATE DATABASE scratch")
	l.q("GRANT SELECT, INSERT, CREATE, DROP, ALTER, EXECUTE ON scratch.* TO analyst@'%'")
	if rows, err := l.as("analyst", "SELECT id, LDP_ENCODE(f, 0.5, 'box', 'duchi') FROM raw_rows"); err != nil || len(rows) != 50 {
		t.Fatalf("analyst LDP_ENCODE: %v", err)
	}
	if _, err := l.as("analyst", "SELECT LDP_ENCODE(f, 0.5, 'box', 'duchi', 'mine') FROM raw_rows"); err == nil || !strings.Contains(err.Error(), "denied") {
		t.Fatalf("analyst unit key: %v", err)
	}
	if _, err := l.as("analyst", "SELECT LDP_VECTOR(f) FROM raw_rows"); err == nil || !strings.Contains(err.Error(), "denied") {
		t.Fatalf("analyst raw f: %v", err)
	}
	// (ldp_privatize renames its finished destination, and GMS renames in the current database only.)
	if _, err := l.asIn("analyst", "scratch", "CALL ldp_privatize('ldpsql.raw_rows', 'f', '', 'mine', 0.5, 0.5, 'box', 'laplace', 2)"); err != nil {
		t.Fatalf("analyst ldp_privatize: %v", err)
	}
	if s := l.spent("raw_rows"); s["3"] != 3 {
		t.Fatalf("analyst releases: %v", s["3"])
	}
	if _, err := l.as("analyst", "SELECT id, LDP_ENCODE(f, 1.5, 'box') FROM raw_rows"); err == nil || !strings.Contains(err.Error(), "budget exceeded") {
		t.Fatalf("analyst over budget: %v", err)
	}
}

// BenchmarkLedgerRelease60k measures a 60,000-row FLIP_LABEL release of a protected table through SQL in
// process, drained: "unprotected" is the same table without a budget (no ledger), "charged" a fresh
// release every time (new ε, so nothing is memoised: 60,000 charges and records), "memoised" the repeat
// of one release (60,000 memo lookups, no charge).
//
//	go test -run '^$' -bench LedgerRelease60k -benchtime 3x ./udf/
func BenchmarkLedgerRelease60k(b *testing.B) {
	const n = 60_000
	e, err := engine.Open(filepath.Join(b.TempDir(), "bench.duckdb"))
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	if _, err := udf.Install(e, udf.Config{PluginDir: b.TempDir()}); err != nil {
		b.Fatal(err)
	}
	run := func(q string) {
		if _, _, err := e.Query(e.NewContext(context.Background()), q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	for _, t := range []string{"open_t", "t"} {
		run(fmt.Sprintf("CREATE TABLE %s (id BIGINT PRIMARY KEY, y INT)", t))
		if _, err := e.DuckDB.Exec(fmt.Sprintf(`INSERT INTO ldpsql.%s SELECT range, (range %% 10)::INTEGER FROM range(%d)`, t, n)); err != nil {
			b.Fatal(err)
		}
	}
	run("CALL ldp_set_budget('t', 1e9)")
	eps := 1.0
	for _, tc := range []struct {
		name  string
		query func() string
	}{
		{"unprotected", func() string { return "SELECT id, FLIP_LABEL(y, 1, 10) FROM open_t" }},
		{"charged", func() string { eps += 0.001; return fmt.Sprintf("SELECT id, FLIP_LABEL(y, %g, 10) FROM t", eps) }},
		{"memoised", func() string { return fmt.Sprintf("SELECT id, FLIP_LABEL(y, %g, 10) FROM t", eps) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				q := tc.query()
				_, iter, _, err := e.GMS.Query(e.NewContext(context.Background()), q)
				if err != nil {
					b.Fatal(err)
				}
				rows, err := sql.RowIterToRows(e.NewContext(context.Background()), iter)
				if err != nil || len(rows) != n {
					b.Fatalf("%d rows, %v", len(rows), err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
