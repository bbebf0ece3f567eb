package engine_test

import "testing"

// UPDATE, DELETE and the upserts of a table with DECIMAL columns (also in the key): their values go to
// DuckDB as statement parameters, which once refused a decimal.
func TestDecimalUpdateDeleteUpsert(t *testing.T) {
	_, must := memorySQL(t)
	must("CREATE TABLE m (k DECIMAL(10,2) PRIMARY KEY, d DECIMAL(20,10), n INT)")
	must("INSERT INTO m VALUES (1.50, 1.5, 1), (2.25, 2.125, 2), (-3.00, 0.0000000001, 3)")
	must("UPDATE m SET d = d / 2 WHERE k = 1.50")
	must("UPDATE m SET n = 20 WHERE d = 2.125")
	must("DELETE FROM m WHERE k = -3")
	must("INSERT INTO m VALUES (2.25, 9.9, 9) ON DUPLICATE KEY UPDATE d = d + 1")
	must("REPLACE INTO m VALUES (7.77, 123456789.0123456789, 7)")
	if got := must("SELECT k, d, n FROM m ORDER BY k"); got != "[[1.5 0.75 1] [2.25 3.125 20] [7.77 123456789.0123456789 7]]" {
		t.Errorf("after UPDATE, DELETE and upserts: %s", got)
	}
}
