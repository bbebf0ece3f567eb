package udf_test

import (
	"strings"
	"testing"
)

// RR_FREQUENCY on a table that ldp_privatize wrote (its comment records eps_y and K): an eps or K that
// contradicts the recorded ones is an error naming both, literal or not, grouped or not; the recorded
// ones are fine; other columns and tables without the metadata are unaffected.
func TestRRFrequencyChecksRecordedEpsAndK(t *testing.T) {
	e, q := newEngine(t)
	q(`CREATE TABLE rel (id INT PRIMARY KEY, y INT, z INT) COMMENT='{"ldp_privatize": {"eps_y": 2.8, "K": 4, "label_col": "y", "features_col": "f"}}'`)
	q(`CREATE TABLE plain (id INT PRIMARY KEY, y INT)`)
	q(`INSERT INTO rel VALUES (1, 0, 0), (2, 1, 1), (3, 2, 0), (4, 3, 1)`)
	q(`INSERT INTO plain VALUES (1, 0), (2, 1)`)
	for _, ok := range []string{
		"SELECT RR_FREQUENCY(y, 2.8, 4, 1) FROM rel",
		"SELECT z, RR_FREQUENCY(y, 2.8, 4, 1) FROM rel GROUP BY z",
		"SELECT RR_FREQUENCY(r.y, 2.8, 4, 1) FROM rel r JOIN plain p ON r.id = p.id",
		"SELECT RR_FREQUENCY(z, 1, 2, 1) FROM rel",   // not the recorded label column
		"SELECT RR_FREQUENCY(y, 1, 2, 1) FROM plain", // no metadata
		"SELECT RR_FREQUENCY(y, 0.7 * 4, 4, 1) FROM rel",
	} {
		if err := queryErr(e, ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{
		"SELECT RR_FREQUENCY(y, 1, 4, 1) FROM rel",
		"SELECT RR_FREQUENCY(y, 2.8, 3, 1) FROM rel",
		"SELECT z, RR_FREQUENCY(y, 1, 4, 1) FROM rel GROUP BY z",
		"SELECT RR_FREQUENCY(y, id * 0 + 1, 4, 1) FROM rel", // not a literal: checked on the first row
		"SELECT RR_FREQUENCY(y, 1, 4, 1) FROM rel WHERE id < 0",
	} {
		err := queryErr(e, bad) // the last has no row: a literal contradiction is refused before any
		if err == nil || !strings.Contains(err.Error(), "ldpsql.rel were released by ldp_privatize at eps_y = 2.8 with K = 4") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
