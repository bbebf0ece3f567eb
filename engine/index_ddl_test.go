package engine_test

import (
	"strings"
	"testing"
)

// CREATE INDEX, ALTER TABLE … ADD INDEX and CREATE TABLE with an INDEX clause succeed with a warning and
// keep nothing; a UNIQUE index is refused; the primary key still serves lookups.
func TestSecondaryIndexesAcceptedWithAWarning(t *testing.T) {
	q, _ := memorySQL(t)
	for _, s := range []string{
		"CREATE TABLE p (`index` BIGINT, a DOUBLE)",
		"CREATE INDEX ix_p_index ON p (`index`)", // what pandas' to_sql sends
		"CREATE TABLE s (id INT PRIMARY KEY, k INT, c CHAR(20), INDEX k_1 (k))",
		"ALTER TABLE s ADD INDEX c_1 (c)",
		"INSERT INTO s VALUES (1, 2, 'x'), (2, 3, 'y')",
	} {
		if _, err := q(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	if _, err := q("CREATE INDEX k_2 ON s (k)"); err != nil {
		t.Fatal(err)
	}
	if w, err := q("SHOW WARNINGS"); err != nil || !strings.Contains(w, "k_2") || !strings.Contains(w, "1112") {
		t.Errorf("SHOW WARNINGS after CREATE INDEX: %s %v", w, err)
	}
	if _, err := q("CREATE UNIQUE INDEX u ON s (k)"); err == nil || !strings.Contains(err.Error(), "UNIQUE index") {
		t.Errorf("CREATE UNIQUE INDEX: %v; want a refusal", err)
	}
	if _, err := q("DROP INDEX k_1 ON s"); err == nil {
		t.Error("DROP INDEX of an index that was never kept succeeded")
	}
	if got, err := q("SELECT k FROM s WHERE id = 2"); err != nil || got != "[[3]]" {
		t.Errorf("lookup by primary key: %s %v", got, err)
	}
}
