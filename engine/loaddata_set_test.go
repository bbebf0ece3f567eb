package engine_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ldpsql/ldpsql/engine"
)

// LOAD DATA with user variables and a SET clause of expressions over them, as ETL scripts write it,
// runs on ldpsql's fast path (its errors name the line of the file, GMS's do not), and a SET expression
// may read the record's columns, as in MySQL.
func TestLoadDataSetAndUserVariables(t *testing.T) {
	dir := t.TempDir()
	q, must, _ := fileSQL(t, dir, engine.WithSecureFilePriv(dir))
	file := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("good.csv", "1,2.5,7,\n2,3,8,hello\n3,\\N,9,z\n")
	must("CREATE TABLE w (id INT PRIMARY KEY, x DOUBLE, b INT, y VARCHAR(10), d INT DEFAULT 42)")
	load := "LOAD DATA INFILE '%s' INTO TABLE w FIELDS TERMINATED BY ',' (id, @a, b, @c) SET x = @a * 2, y = NULLIF(@c, '')"
	if got := must(fmt.Sprintf(load, good)); !strings.Contains(got, "Records: 3  Deleted: 0  Skipped: 0") {
		t.Errorf("LOAD DATA: %s", got)
	}
	if got := must("SELECT id, x, b, y, d FROM w ORDER BY id"); got != "[[1 5 7 <nil> 42] [2 6 8 hello 42] [3 <nil> 9 z 42]]" {
		t.Errorf("after LOAD DATA with SET: %s", got)
	}
	// A record with a field too many fails as the fast path says it, naming the file's line, and
	// loads nothing.
	bad := file("bad.csv", "4,1,1,a\n5,1,1,b,extra\n")
	if _, err := q(fmt.Sprintf(load, bad)); err == nil || !strings.Contains(err.Error(), "line 2 of the file") {
		t.Errorf("a record with an extra field: %v", err)
	}
	if got := must("SELECT count(*) FROM w"); got != "[[3]]" {
		t.Errorf("the failed load left rows: %s", got)
	}
	// A SET expression over a column reads the row's field (GMS's own path stored NULL).
	must("DELETE FROM w")
	must(fmt.Sprintf("LOAD DATA INFILE '%s' INTO TABLE w FIELDS TERMINATED BY ',' (id, @a, b, @c) SET x = b + 1, y = CONCAT(@c, id)", good))
	if got := must("SELECT id, x, b, y FROM w ORDER BY id"); got != "[[1 8 7 1] [2 9 8 hello2] [3 10 9 z3]]" {
		t.Errorf("after LOAD DATA with SET over a column: %s", got)
	}
	// A listed column may also be a SET target, listed last or not, beside a SET column that is not
	// listed: the file still has one field per listed name (this was error 1262, a field too many).
	for _, c := range []struct{ list, data string }{
		{"(id, @a, b, y) SET y = UPPER(y), x = @a", "1,2.5,7,a\n2,3,8,b\n"},
		{"(id, @a, b, y) SET y = 'A', x = @a", "1,2.5,7,a\n2,3,8,A\n"},
		{"(id, y, @a, b) SET x = @a, y = UPPER(y)", "1,a,2.5,7\n2,b,3,8\n"},
	} {
		must("DELETE FROM w")
		if _, err := q(fmt.Sprintf("LOAD DATA INFILE '%s' INTO TABLE w FIELDS TERMINATED BY ',' %s", file("listed_set.csv", c.data), c.list)); err != nil {
			t.Errorf("%s: %v", c.list, err)
			continue
		}
		if got := must("SELECT id, x, b, y FROM w ORDER BY id"); got != "[[1 2.5 7 A] [2 3 8 B]]" && !(strings.Contains(c.list, "'A'") && got == "[[1 2.5 7 A] [2 3 8 A]]") {
			t.Errorf("%s: %s", c.list, got)
		}
	}
}
