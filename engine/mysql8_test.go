package engine_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/ldpsql/ldpsql/engine"
)

// fileSQL is memorySQL on a database file in dir (opened with opts), reopened by reopen.
func fileSQL(t *testing.T, dir string, opts ...engine.Option) (q func(string) (string, error), must func(string) string, reopen func()) {
	t.Helper()
	path := filepath.Join(dir, "c.duckdb")
	var e *engine.Engine
	open := func() {
		var err error
		if e, err = engine.Open(path, opts...); err != nil {
			t.Fatal(err)
		}
	}
	open()
	t.Cleanup(func() { e.Close() })
	reopen = func() {
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		open()
	}
	q, must = sqlOn(t, func() *engine.Engine { return e })
	return q, must, reopen
}

// A new table's strings compare as MySQL 8's default utf8mb4_0900_ai_ci: =, IN, LIKE, GROUP BY,
// DISTINCT, ORDER BY, joins and the primary key ignore case and accents, also after a restart; a column
// declared utf8mb4_bin or utf8mb4_0900_bin (as every string column of a file written before this
// default is recorded) keeps binary semantics. (count(DISTINCT …) and UNION still keep 'x' and 'X'
// apart: GMS hashes their values without their collation; README says so.)
func TestDefaultCollationIsMySQL8s(t *testing.T) {
	q, must, reopen := fileSQL(t, t.TempDir())
	must("CREATE TABLE p (name VARCHAR(20) PRIMARY KEY, n INT)")
	must("CREATE TABLE b (name VARCHAR(20) COLLATE utf8mb4_0900_bin PRIMARY KEY, n INT)")
	must("CREATE TABLE b2 (name VARCHAR(20) COLLATE utf8mb4_bin, n INT)")
	must("INSERT INTO p VALUES ('alice', 1), ('Bob', 2), ('émile', 3)")
	must("INSERT INTO b VALUES ('alice', 1), ('Alice', 2)")
	must("INSERT INTO b2 VALUES ('alice', 1), ('Alice', 2)")
	must("CREATE TABLE g2 (name VARCHAR(20))")
	must("INSERT INTO g2 VALUES ('ALICE'), ('bob'), ('carol')")
	for round := 0; round < 2; round++ {
		checks := []struct{ query, want string }{
			{"SELECT n FROM p WHERE name = 'ALICE'", "[[1]]"},            // the key's lookup
			{"SELECT n FROM p WHERE name = 'Emile'", "[[3]]"},            // accents
			{"SELECT n FROM p WHERE name IN ('bob', 'x') ", "[[2]]"},     // IN
			{"SELECT n FROM p WHERE name LIKE 'A%'", "[[1]]"},            // LIKE
			{"SELECT n FROM p WHERE name > 'b' ORDER BY n", "[[2] [3]]"}, // a range on the key
			{"SELECT name FROM p ORDER BY name", "[[alice] [Bob] [émile]]"},
			{"SELECT count(*) FROM p JOIN g2 ON p.name = g2.name", "[[2]]"},
			{"SELECT n FROM b WHERE name = 'ALICE'", "[]"},
			// An explicit COLLATE on a binary column, also after the reopen (it failed there: "not valid
			// for CHARACTER SET").
			{"SELECT n FROM b WHERE name COLLATE utf8mb4_0900_bin = 'alice'", "[[1]]"},
			{"SELECT count(*) FROM b2 WHERE name COLLATE utf8mb4_0900_ai_ci = 'ALICE'", "[[2]]"},
			{"SELECT count(DISTINCT name) FROM b2", "[[2]]"},
			{"SELECT @@collation_connection, @@collation_database, @@collation_server", "[[utf8mb4_0900_ai_ci utf8mb4_0900_ai_ci utf8mb4_0900_ai_ci]]"},
			{"SELECT column_name, collation_name FROM information_schema.columns WHERE table_name IN ('p', 'b') AND column_name = 'name' ORDER BY table_name",
				"[[name utf8mb4_0900_bin] [name utf8mb4_0900_ai_ci]]"},
		}
		for _, c := range checks {
			if got := must(c.query); got != c.want {
				t.Errorf("round %d: %s = %s; want %s", round, c.query, got, c.want)
			}
		}
		must("CREATE TABLE IF NOT EXISTS g (name VARCHAR(20), v INT)")
		must("DELETE FROM g")
		must("INSERT INTO g VALUES ('x', 1), ('X', 2), ('y', 3), ('Ý', 4)")
		if got := must("SELECT count(*), sum(v) FROM g GROUP BY name ORDER BY 2"); got != "[[2 3] [2 7]]" {
			t.Errorf("round %d: GROUP BY: %s", round, got)
		}
		if got := must("SELECT DISTINCT name FROM g ORDER BY name"); got != "[[x] [y]]" {
			t.Errorf("round %d: DISTINCT: %s", round, got)
		}
		// The duplicate is named as the statement wrote it (as MySQL does), not as the index folds it.
		for dup, want := range map[string]string{
			"INSERT INTO p VALUES ('ALICE', 9)":              "Duplicate entry 'ALICE' for key 'p.PRIMARY'",
			"INSERT INTO p VALUES ('Émile', 9)":              "Duplicate entry 'Émile' for key 'p.PRIMARY'",
			"INSERT INTO p VALUES ('zed', 1), ('ÉMILE', 2)":  "Duplicate entry 'ÉMILE' for key 'p.PRIMARY'",
			"UPDATE p SET name = 'Bob' WHERE name = 'alice'": "Duplicate entry 'Bob' for key 'p.PRIMARY'",
		} {
			if _, err := q(dup); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("round %d: %s: %v; want %q", round, dup, err, want)
			}
		}
		if _, err := q("INSERT INTO b VALUES ('ALICE', 3)"); err != nil {
			t.Errorf("round %d: a binary key took 'ALICE' as a duplicate: %v", round, err)
		}
		must("DELETE FROM b WHERE name = 'ALICE'")
		show := must("SHOW CREATE TABLE p")
		if !strings.Contains(show, "COLLATE=utf8mb4_0900_ai_ci") {
			t.Errorf("round %d: SHOW CREATE TABLE p: %s", round, show)
		}
		if show := must("SHOW CREATE TABLE b"); !strings.Contains(show, "COLLATE=utf8mb4_0900_bin") {
			t.Errorf("round %d: SHOW CREATE TABLE b: %s", round, show)
		}
		reopen()
	}
	// Upserts find the key as the collation does; a rename keeps the key's uniqueness.
	must("INSERT INTO p VALUES ('ALICE', 10) ON DUPLICATE KEY UPDATE n = n + 100")
	must("REPLACE INTO p VALUES ('BOB', 20)")
	if got := must("SELECT name, n FROM p ORDER BY n"); got != "[[émile 3] [BOB 20] [alice 101]]" {
		t.Errorf("after the upserts: %s", got)
	}
	must("RENAME TABLE p TO p2")
	if _, err := q("INSERT INTO p2 VALUES ('Alice', 9)"); err == nil || !strings.Contains(err.Error(), "Duplicate entry 'Alice' for key 'p2.PRIMARY'") {
		t.Errorf("after RENAME: %v; want a duplicate key", err)
	}
	if got := must("SELECT n FROM p2 WHERE name = 'ÉMILE'"); got != "[[3]]" {
		t.Errorf("after RENAME: %s", got)
	}
}

// LOAD DATA's duplicate keys follow the collation too: IGNORE keeps the stored 'alice' and the file's
// first of 'Bob'/'BOB', REPLACE replaces the stored row and keeps the file's last; without either a
// case-variant of a stored key is error 1062.
func TestLoadDataCollatedKey(t *testing.T) {
	dir := t.TempDir()
	q, must, _ := fileSQL(t, dir, engine.WithSecureFilePriv(dir))
	file := filepath.Join(dir, "p.csv")
	if err := os.WriteFile(file, []byte("ALICE,2\nBob,3\nBOB,4\ncarol,5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ verb, want string }{
		{"IGNORE", "[[alice 1] [Bob 3] [carol 5]]"},
		{"REPLACE", "[[ALICE 2] [BOB 4] [carol 5]]"},
	} {
		must("DROP TABLE IF EXISTS p")
		must("CREATE TABLE p (name VARCHAR(20) PRIMARY KEY, n INT)")
		must("INSERT INTO p VALUES ('alice', 1)")
		must(fmt.Sprintf("LOAD DATA INFILE '%s' %s INTO TABLE p FIELDS TERMINATED BY ','", file, c.verb))
		if got := must("SELECT name, n FROM p ORDER BY name"); got != c.want {
			t.Errorf("LOAD DATA … %s: %s; want %s", c.verb, got, c.want)
		}
	}
	must("DROP TABLE p")
	must("CREATE TABLE p (name VARCHAR(20) PRIMARY KEY, n INT)")
	must("INSERT INTO p VALUES ('alice', 1)")
	_, err := q(fmt.Sprintf("LOAD DATA INFILE '%s' INTO TABLE p FIELDS TERMINATED BY ','", file))
	if err == nil || !strings.Contains(err.Error(), "Duplicate entry 'ALICE' for key 'p.PRIMARY'") {
		t.Errorf("LOAD DATA of 'ALICE' over 'alice': %v; want the duplicate named as the file wrote it", err)
	}
}

// DISTINCT aggregates and set operations distinguish strings as their columns' collations do: under
// utf8mb4_0900_ai_ci 'x', 'X' and 'Ẍ' are one value, 'y' and 'Ý' another; under utf8mb4_bin all differ.
// MySQL returns one spelling of each class (which is unspecified), so the tests compare counts and the
// classes of what comes back.
func TestDistinctFollowsCollation(t *testing.T) {
	_, must := memorySQL(t)
	must("CREATE TABLE ci (name VARCHAR(20), v INT, g INT)")
	must("CREATE TABLE bin (name VARCHAR(20) COLLATE utf8mb4_bin, v INT, g INT)")
	for _, tbl := range []string{"ci", "bin"} {
		must("INSERT INTO " + tbl + " VALUES ('x', 1, 1), ('X', 2, 1), ('Ẍ', 3, 2), ('y', 4, 2), ('Ý', 5, 2), (NULL, 6, 2)")
	}
	must("CREATE TABLE nums (n VARCHAR(8))")
	must("INSERT INTO nums VALUES ('1e1'), ('1E1'), ('2'), ('2')")
	checks := []struct{ query, want string }{
		{"SELECT count(DISTINCT name) FROM ci", "[[2]]"},
		{"SELECT count(DISTINCT name) FROM bin", "[[5]]"},
		{"SELECT g, count(DISTINCT name) FROM ci GROUP BY g ORDER BY g", "[[1 1] [2 2]]"},
		{"SELECT count(DISTINCT name, v % 2) FROM ci", "[[4]]"}, // (x,1) (x,0) (y,0) (y,1)
		{"SELECT count(DISTINCT upper(name)) FROM ci", "[[2]]"}, // an expression keeps its argument's collation
		{"SELECT count(DISTINCT name COLLATE utf8mb4_bin) FROM ci", "[[5]]"},
		{"SELECT sum(DISTINCT n), avg(DISTINCT n) FROM nums", "[[12 6]]"}, // '1e1' and '1E1' are one
		{"SELECT sum(DISTINCT n COLLATE utf8mb4_bin) FROM nums", "[[22]]"},
		{"SELECT count(*) FROM (SELECT name FROM ci UNION SELECT name FROM ci) u", "[[3]]"}, // x, y, NULL
		{"SELECT count(*) FROM (SELECT name FROM bin UNION SELECT name FROM bin) u", "[[6]]"},
		{"SELECT count(*) FROM (SELECT name FROM ci UNION ALL SELECT name FROM ci) u", "[[12]]"},
		{"SELECT count(*) FROM (SELECT name FROM ci UNION SELECT upper(name) FROM ci) u", "[[3]]"},
		{"SELECT count(*) FROM (SELECT DISTINCT name FROM ci) d", "[[3]]"},
		{"SELECT * FROM (SELECT DISTINCT name, g FROM ci) d ORDER BY g, name", "[[x 1] [<nil> 2] [Ẍ 2] [y 2]]"},                               // a subquery's columns stay in place
		{"SELECT g, (SELECT count(*) FROM (SELECT DISTINCT name FROM ci c WHERE c.g = o.g) x) FROM bin o WHERE v IN (1, 3)", "[[1 1] [2 3]]"}, // correlated
		{"SELECT count(*) FROM (SELECT name, g FROM ci UNION SELECT name, g FROM ci) u", "[[4]]"},                                             // (x,1) (x,2) (y,2) (NULL,2)
		{"SELECT count(*) FROM (SELECT DISTINCT c.name, b.name FROM ci c JOIN bin b ON c.v = b.v) d", "[[6]]"},                                // the binary column keeps rows apart
		{"SELECT count(*) FROM (SELECT DISTINCT c.name, b.g FROM ci c JOIN bin b ON c.v = b.v) d", "[[4]]"},
	}
	for _, c := range checks {
		if got := must(c.query); got != c.want {
			t.Errorf("%s = %s; want %s", c.query, got, c.want)
		}
	}
	// One spelling of each class: after NULL, the union's rows are x and y in one of their spellings.
	got := must("SELECT name FROM ci UNION SELECT name FROM ci ORDER BY 1 LIMIT 2 OFFSET 1")
	if !regexp.MustCompile(`^\[\[[xXẌ]\] \[[yÝ]\]\]$`).MatchString(got) {
		t.Errorf("UNION … ORDER BY 1 LIMIT 2 OFFSET 1 = %s; want x then y in one of their spellings", got)
	}
}

// GMS's utf8mb4_0900_ai_ci weighs every printable ASCII character as its lower case: two such strings it
// equates are equal after lower(), which is what lets a lookup by an insensitive key use the key's DuckDB
// index on lower(strip_accents(…)) for such a value (index.go, collatedPoint). Control characters all
// weigh the same, which lower() does not see: they are left out of it.
func TestASCIIWeighsAsLower(t *testing.T) {
	weight := func(r rune) string {
		var b strings.Builder
		if err := engine.DefaultCollation.WriteWeightString(&b, string(r)); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	byWeight := map[string]rune{}
	for r := ' '; r <= '~'; r++ {
		w := weight(r)
		if other, seen := byWeight[w]; seen && unicode.ToLower(other) != unicode.ToLower(r) {
			t.Errorf("%q and %q weigh the same, and differ after lower()", other, r)
		}
		byWeight[w] = r
	}
	if len(byWeight) != 95-26 {
		t.Errorf("%d distinct weights among printable ASCII's 95 characters; want 69 (upper and lower case letters share theirs)", len(byWeight))
	}
	if weight('\x01') != weight('\x02') {
		t.Errorf("control characters weigh differently: they could be in the index's reach")
	}
}

// A lookup by an insensitive primary key finds exactly the rows GMS's collation equates with the value:
// the same as a scan of an unkeyed copy, for ASCII values (answered from the key's DuckDB index), for
// non-ASCII values (a scan) and for rows only GMS equates (full-width 'ａ' is 'a'), also in a composite key,
// an IN list, a join and an UPDATE.
func TestCollatedKeyLookupIsExact(t *testing.T) {
	_, must := memorySQL(t)
	rows := "('alice', 1, 1), ('ａlice', 1, 2), ('Bob', 2, 3), ('émile', 1, 4), ('ss', 1, 5), ('ß', 1, 6), ('x y', 2, 7), ('X Y ', 2, 8), ('ǅ', 1, 9)"
	must("CREATE TABLE k (name VARCHAR(20) PRIMARY KEY, g INT, n INT)")
	must("CREATE TABLE k2 (name VARCHAR(20), g INT, n INT, PRIMARY KEY (g, name))")
	must("CREATE TABLE scan (name VARCHAR(20), g INT, n INT)")
	for _, tbl := range []string{"k", "k2", "scan"} {
		must("INSERT INTO " + tbl + " VALUES " + rows)
	}
	for _, where := range []string{
		"name = 'ALICE'", "name = 'Alice'", "name = 'ＡＬＩＣＥ'", "name = 'Emile'", "name = 'SS'", "name = 'x y'", "name = 'X Y '",
		"name = 'ǆ'", "name = 'dž'", "name = 'a\x03'", "name = 'a\x01'", "name IN ('alice', 'bob', 'nobody')", "name > 'b'", "name = 'nobody'",
		"g = 1 AND name = 'ALICE'", "g = 2 AND name = 'BOB'", "g IN (1, 2) AND name IN ('ALICE', 'x Y')",
	} {
		want := must("SELECT n FROM scan WHERE " + where + " ORDER BY n")
		for _, tbl := range []string{"k", "k2"} {
			if got := must("SELECT n FROM " + tbl + " WHERE " + where + " ORDER BY n"); got != want {
				t.Errorf("%s WHERE %s: %s; a scan finds %s", tbl, where, got, want)
			}
		}
	}
	if got, want := must("SELECT s.n, k.n FROM scan s JOIN k ON k.name = s.name ORDER BY 1, 2"), must("SELECT s.n, k.n FROM scan s JOIN scan k ON k.name = s.name ORDER BY 1, 2"); got != want {
		t.Errorf("join on the key: %s; on a scan %s", got, want)
	}
	must("UPDATE k SET n = n + 100 WHERE name = 'ALICE'")
	if got := must("SELECT n FROM k WHERE n > 100 ORDER BY n"); got != "[[101] [102]]" {
		t.Errorf("UPDATE … WHERE name = 'ALICE' changed %s; want [[101] [102]]", got)
	}
}
