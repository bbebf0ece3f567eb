package engine

import (
	"fmt"
	"strings"
	"testing"
)

// Filters on the primary key are pushed into DuckDB through the PRIMARY index; the results must equal
// what the filter means, for points, ranges, IN lists, open bounds, composite keys and empty ranges.
func TestPrimaryKeyLookups(t *testing.T) {
	e := openT(t, MemoryPath)
	defer e.Close()
	mustQuery(t, e, "CREATE TABLE k (id INT PRIMARY KEY, v INT)")
	mustQuery(t, e, "CREATE TABLE c (a INT, b VARCHAR(5), v INT, PRIMARY KEY (a, b))")
	var vals, cvals []string
	for i := 0; i < 200; i++ {
		vals = append(vals, fmt.Sprintf("(%d, %d)", i, i*10))
		cvals = append(cvals, fmt.Sprintf("(%d, '%c', %d)", i/4, 'a'+rune(i%4), i))
	}
	mustQuery(t, e, "INSERT INTO k VALUES "+strings.Join(vals, ","))
	mustQuery(t, e, "INSERT INTO c VALUES "+strings.Join(cvals, ","))
	ids := func(q string) string {
		var out []string
		for _, r := range mustQuery(t, e, q) {
			out = append(out, fmt.Sprint(r[0]))
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct{ where, want string }{
		{"id = 7", "7"},
		{"id = 7 OR id = 150", "7,150"},
		{"id IN (3, 5, 199, 400)", "3,5,199"},
		{"id BETWEEN 10 AND 13", "10,11,12,13"},
		{"id > 196", "197,198,199"},
		{"id >= 197 AND id < 199", "197,198"},
		{"id < 2", "0,1"},
		{"id <= 1 OR id > 198", "0,1,199"},
		{"id = 500", ""},
		{"id > 5 AND id < 3", ""},
		{"id = 7 AND v = 70", "7"},
		{"id = 7 AND v = 71", ""},
		{"id IS NULL", ""},
	} {
		if got := ids("SELECT id FROM k WHERE " + tc.where + " ORDER BY id"); got != tc.want {
			t.Errorf("WHERE %s: got [%s], want [%s]", tc.where, got, tc.want)
		}
	}
	for _, tc := range []struct{ where, want string }{
		{"a = 3", "12,13,14,15"},
		{"a = 3 AND b = 'c'", "14"},
		{"a = 3 AND b > 'a'", "13,14,15"},
		{"a BETWEEN 2 AND 3 AND b = 'd'", "11,15"},
	} {
		if got := ids("SELECT v FROM c WHERE " + tc.where + " ORDER BY v"); got != tc.want {
			t.Errorf("composite WHERE %s: got [%s], want [%s]", tc.where, got, tc.want)
		}
	}
	// The plan really uses the index (not a full scan with a filter on top).
	plan := rowsString(mustQuery(t, e, "EXPLAIN PLAN SELECT v FROM k WHERE id = 7"))
	if !strings.Contains(plan, "IndexedTableAccess") {
		t.Fatalf("no index access in the plan:\n%s", plan)
	}
	// Updates and deletes by key go through the same path.
	mustQuery(t, e, "UPDATE k SET v = -1 WHERE id BETWEEN 5 AND 6")
	mustQuery(t, e, "DELETE FROM k WHERE id IN (0, 199)")
	if got := ids("SELECT id FROM k WHERE v = -1 ORDER BY id"); got != "5,6" {
		t.Errorf("update by key: %s", got)
	}
	if r := mustQuery(t, e, "SELECT COUNT(*) FROM k"); r[0][0] != int64(198) {
		t.Errorf("delete by key: %v", r)
	}
}
