package engine_test

import (
	"strings"
	"testing"
)

// INSERT … ON DUPLICATE KEY UPDATE, INSERT IGNORE and REPLACE as MySQL has them, on a table with a
// primary key, also for keys repeated within one statement; a plain INSERT of a taken key still fails
// whole; a table without a key takes every row.
func TestUpserts(t *testing.T) {
	q, must := memorySQL(t)
	table := func() string { return must("SELECT * FROM u ORDER BY id") }
	must("CREATE TABLE u (id INT PRIMARY KEY, x INT, n VARCHAR(10))")
	must("INSERT INTO u VALUES (1, 1, 'a')")

	if got := must("INSERT INTO u VALUES (1, 2, 'b'), (2, 2, 'b') ON DUPLICATE KEY UPDATE x = x + 10"); got != "[[{<nil> 3 0}]]" {
		t.Errorf("ON DUPLICATE KEY UPDATE affected %s; want 3 (2 for the update, 1 for the insert, as MySQL counts)", got)
	}
	if got := table(); got != "[[1 11 a] [2 2 b]]" {
		t.Errorf("after ON DUPLICATE KEY UPDATE: %s", got)
	}
	must("INSERT INTO u VALUES (3, 0, 'c'), (3, 0, 'd') ON DUPLICATE KEY UPDATE n = VALUES(n)") // a key twice in one statement
	if got := table(); got != "[[1 11 a] [2 2 b] [3 0 d]]" {
		t.Errorf("after a repeated key with ON DUPLICATE KEY UPDATE: %s", got)
	}
	must("INSERT IGNORE INTO u VALUES (1, 5, 'x'), (4, 5, 'e'), (4, 6, 'f')")
	if got := table(); got != "[[1 11 a] [2 2 b] [3 0 d] [4 5 e]]" {
		t.Errorf("after INSERT IGNORE: %s", got)
	}
	must("REPLACE INTO u VALUES (1, 7, 'r'), (5, 5, 's'), (5, 6, 't')")
	if got := table(); got != "[[1 7 r] [2 2 b] [3 0 d] [4 5 e] [5 6 t]]" {
		t.Errorf("after REPLACE: %s", got)
	}
	if _, err := q("INSERT INTO u VALUES (6, 0, 'g'), (2, 0, 'h')"); err == nil || !strings.Contains(err.Error(), "Duplicate entry") {
		t.Errorf("a plain INSERT of a taken key: %v", err)
	}
	if got := must("SELECT count(*) FROM u WHERE id = 6"); got != "[[0]]" {
		t.Errorf("the failed INSERT left row 6: %s", got)
	}
	must("CREATE TABLE nokey (x INT)")
	must("INSERT IGNORE INTO nokey VALUES (1), (1)")
	must("REPLACE INTO nokey VALUES (1)")
	if got := must("SELECT count(*) FROM nokey"); got != "[[3]]" {
		t.Errorf("a table without a key has %s rows; want 3", got)
	}
}
