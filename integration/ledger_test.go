package integration

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// readmeAnalyst creates, as root, the analyst of the README (SELECT and EXECUTE on ldpsql, and what
// ldp_privatize needs on the database scratch, which it creates) and connects as them.
func (s *server) readmeAnalyst(root *sql.DB) *sql.DB {
	s.t.Helper()
	mustExec(s.t, root, "CREATE USER analyst@'%' IDENTIFIED BY 'pw'")
	mustExec(s.t, root, "GRANT SELECT, EXECUTE ON ldpsql.* TO analyst@'%'")
	mustExec(s.t, root, "CREATE DATABASE scratch")
	mustExec(s.t, root, "GRANT SELECT, INSERT, CREATE, DROP, ALTER, EXECUTE ON scratch.* TO analyst@'%'")
	return s.connect("analyst", "pw")
}

// queryAll runs q (with args, as a server-side prepared statement) and returns its rows as strings,
// with the error of the query or of reading it.
func queryAll(db *sql.DB, q string, args ...any) ([][]string, error) {
	rows, err := db.Query(q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return out, err
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = v.String
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// The privacy ledger and the analyst role over the MySQL protocol: a DBA (root) protects a table, an
// analyst releases from it through LDP_ENCODE, FLIP_LABEL and ldp_privatize, every release is charged
// and recorded, the analyst cannot read raw columns or the ledger, the budget stops further releases,
// and all of it survives a restart.
func TestLedgerAndRolesOverTheWire(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "data.duckdb")
	s := startServer(t, dbPath)
	root := s.connect("root", "")
	fillAux(t, root, "people", 300) // id, f (8 features), y (0 or 1)
	mustExec(t, root, `CALL ldp_fit_mechanism('p2', 'pca', 'people', 'f', '{"d": 2, "l": 3}')`)
	mustExec(t, root, "CALL ldp_set_budget('people', 3)")
	analyst := s.readmeAnalyst(root)

	for _, q := range []string{
		"SELECT * FROM people",
		"SELECT y FROM people WHERE id = 1",
		"SELECT id FROM people WHERE y = 1",
		"SELECT avg(y) FROM people",
		"SELECT LDP_VECTOR(f) FROM people",
		"SELECT id, FLIP_LABEL(y, 1, 2, 'my unit') FROM people",
		"SELECT * FROM ldpsql_catalog.ldp_releases",
		"CALL ldp_set_budget('people', 100)",
	} {
		if rows, err := queryAll(analyst, q); err == nil || !strings.Contains(strings.ToLower(err.Error()), "denied") {
			t.Errorf("analyst: %s: %d rows, %v; want access denied", q, len(rows), err)
		}
	}

	// Releases: FLIP_LABEL at ε 1, repeated (memoised: the same labels, no charge), LDP_ENCODE at ε 1.
	labels, err := queryAll(analyst, "SELECT id, FLIP_LABEL(y, 1, 2) FROM people ORDER BY id")
	if err != nil || len(labels) != 300 {
		t.Fatalf("analyst FLIP_LABEL: %d rows, %v", len(labels), err)
	}
	again, err := queryAll(analyst, "SELECT id, FLIP_LABEL(y, 1, 2) FROM people ORDER BY id")
	if err != nil || fmt.Sprint(again) != fmt.Sprint(labels) {
		t.Fatalf("the memoised repeat differs: %v", err)
	}
	if rel := queryJSONVectors(t, analyst, "SELECT LDP_ENCODE_JSON(f, 1, 'p2') FROM people"); len(rel) != 300 || len(rel[0]) != 2 {
		t.Fatalf("analyst LDP_ENCODE: %d releases", len(rel))
	}
	// ε 1.5 more would take every unit to 3.5 > 3: an error, and no row at all.
	rows, err := queryAll(analyst, "SELECT id, LDP_ENCODE_JSON(f, 1.5, 'p2', 'duchi') FROM people")
	if err == nil || len(rows) != 0 {
		t.Fatalf("over budget: %d rows, %v", len(rows), err)
	}
	for _, want := range []string{"ldp budget exceeded", "300 of 300 units of table ldpsql.people", "remaining ε 1 of 3", "nothing was released"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	// ldp_privatize spends the last ε 1 (0.5 on the features, 0.5 on the label) into the analyst's database.
	scratch, err := sql.Open("mysql", fmt.Sprintf("analyst:pw@tcp(%s)/scratch", s.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer scratch.Close()
	mustExec(t, scratch, "CALL ldp_privatize('ldpsql.people', 'f', 'y', 'people_released', 1.0, 0.5, 'p2', 'laplace', 2)")
	if got, err := queryAll(scratch, "SELECT count(*) FROM people_released"); err != nil || got[0][0] != "300" {
		t.Fatalf("the analyst's privatised table: %v %v", got, err)
	}
	if _, err := queryAll(scratch, "SELECT id, FLIP_LABEL(y, 0.1, 2) FROM ldpsql.people WHERE id = 7"); err == nil || !strings.Contains(err.Error(), "remaining ε 0 of 3") {
		t.Fatalf("an exhausted unit: %v", err)
	}

	// The DBA's view of the ledger.
	got, err := queryAll(root, "SELECT count(*), min(spent), max(spent), sum(releases) FROM ldpsql_catalog.ldp_budget_units WHERE table_name = 'people'")
	if err != nil || fmt.Sprint(got) != "[[300 3 3 1200]]" {
		t.Fatalf("ldp_budget_units: %v %v", got, err)
	}
	got, err = queryAll(root, "SELECT function_name, mechanism, eps, count(*), min(released_by) FROM ldpsql_catalog.ldp_releases GROUP BY 1, 2, 3 ORDER BY 1, 2, 3")
	if err != nil || len(got) != 4 || !strings.HasPrefix(got[0][4], "analyst@") {
		t.Fatalf("ldp_releases: %v %v", got, err)
	}
	if got, err := queryAll(root, "SELECT table_name, eps_total, mode FROM ldpsql_catalog.ldp_budget"); err != nil || fmt.Sprint(got) != "[[people 3 memoise]]" {
		t.Fatalf("ldp_budget: %v %v", got, err)
	}
	if got, err := queryAll(root, "SELECT y FROM people WHERE id = 3"); err != nil || len(got) != 1 {
		t.Fatalf("the DBA reads raw data: %v %v", got, err)
	}

	// After a restart: the same memoised releases, the same exhausted budget.
	root.Close()
	analyst.Close()
	scratch.Close()
	s.stop()
	s = startServer(t, dbPath)
	analyst = s.connect("analyst", "pw")
	again, err = queryAll(analyst, "SELECT id, FLIP_LABEL(y, 1, 2) FROM people ORDER BY id")
	if err != nil || fmt.Sprint(again) != fmt.Sprint(labels) {
		t.Fatalf("the memoised release after a restart differs: %v", err)
	}
	if _, err := queryAll(analyst, "SELECT id, FLIP_LABEL(y, 0.1, 2) FROM people"); err == nil || !strings.Contains(err.Error(), "300 of 300 units") {
		t.Fatalf("the budget after a restart: %v", err)
	}
}
