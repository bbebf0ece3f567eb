package integration

import (
	"database/sql"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ldp_jobs needs no grant, and shows a user who is not a DBA only their own jobs however it is read: a
// UNION's branch (which once showed every job), a derived table, a CTE, a subquery, COUNT(*), a lookup
// by id. The rest of the catalog keeps its grants, and SHOW GRANTS lists nothing new; a change of
// anyone's grants (which makes GMS recompute a session's privileges) does not take the access away.
func TestJobsReadableWithoutAGrant(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "data.duckdb"))
	root := s.connect("root", "")
	fillClusters(t, root, "aux", 600, 1, false)
	fillClusters(t, root, "d2", 600, 2, true)
	mustExec(t, root, `CALL ldp_fit_mechanism('pca2', 'pca', 'aux', 'f', '{"d": 2, "l": 6}')`)
	mustExec(t, root, "CALL ldp_privatize('d2', 'f', 'y', 'd2_pca', 8, 0.7, 'pca2', 'laplace', 4)")
	var rootJob int64
	if err := root.QueryRow("SELECT TRAIN_NOISY_CLASSIFIER('d2_pca', ?)", `{"model": "m_root", "objective": "forward", "epochs": 3}`).Scan(&rootJob); err != nil {
		t.Fatal(err)
	}
	waitJob(t, root, rootJob, 2*time.Minute)
	rj := strconv.FormatInt(rootJob, 10)
	analyst := s.readmeAnalyst(root)                                                   // no grant on ldpsql_catalog
	mustExec(t, root, "CREATE USER bare@'%' IDENTIFIED BY 'pw'")                       // no grant at all
	bare, err := sql.Open("mysql", "bare:pw@tcp("+s.addr+")/?interpolateParams=false") // no database: bare may use none
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()

	reads := map[string]string{
		"SELECT id FROM ldpsql_catalog.ldp_jobs":                                                        "[]",
		"SELECT id FROM ldpsql_catalog.ldp_jobs UNION SELECT 0":                                         "[[0]]",
		"SELECT * FROM (SELECT id FROM ldpsql_catalog.ldp_jobs) x":                                      "[]",
		"WITH c AS (SELECT id FROM ldpsql_catalog.ldp_jobs) SELECT count(*) FROM c":                     "[[0]]",
		"SELECT (SELECT count(*) FROM ldpsql_catalog.ldp_jobs)":                                         "[[0]]",
		"SELECT count(*) FROM ldpsql_catalog.ldp_jobs":                                                  "[[0]]",
		"SELECT id FROM ldpsql_catalog.ldp_jobs WHERE id = " + rj:                                       "[]",
		"SELECT 1 FROM dual WHERE EXISTS (SELECT 1 FROM ldpsql_catalog.ldp_jobs)":                       "[]",
		"SELECT id FROM ldpsql_catalog.ldp_jobs j WHERE id IN (SELECT id FROM ldpsql_catalog.ldp_jobs)": "[]",
	}
	for user, db := range map[string]*sql.DB{"analyst": analyst, "bare": bare} {
		for q, want := range reads {
			if got, err := queryAll(db, q); err != nil || fmtRows(got) != want {
				t.Errorf("%s: %s: %v %v; want %s", user, q, fmtRows(got), err, want)
			}
		}
	}
	if got, err := queryAll(root, "SELECT id FROM ldpsql_catalog.ldp_jobs UNION SELECT 0 ORDER BY 1"); err != nil || fmtRows(got) != "[[0] ["+rj+"]]" {
		t.Errorf("root: %v %v", got, err)
	}
	for _, q := range []string{"SELECT * FROM ldpsql_catalog.ldp_releases", "SELECT * FROM ldpsql_catalog.ldp_budget", "SELECT name FROM ldpsql_catalog.ldp_mechanisms"} {
		if _, err := queryAll(bare, q); err == nil {
			t.Errorf("bare: %s succeeded", q)
		}
	}
	if got, err := queryAll(bare, "SHOW TABLES FROM ldpsql_catalog"); err != nil || fmtRows(got) != "[[ldp_jobs]]" {
		t.Errorf("bare: SHOW TABLES FROM ldpsql_catalog: %v %v", got, err)
	}
	if got, err := queryAll(bare, "SHOW GRANTS"); err != nil || strings.Contains(fmtRows(got), "ldp_jobs") {
		t.Errorf("bare: SHOW GRANTS: %v %v", got, err)
	}
	mustExec(t, root, "CREATE USER other@'%' IDENTIFIED BY 'pw'")
	mustExec(t, root, "GRANT SELECT ON ldpsql.* TO bare@'%'")
	if got, err := queryAll(bare, "SELECT count(*) FROM ldpsql_catalog.ldp_jobs"); err != nil || fmtRows(got) != "[[0]]" {
		t.Errorf("bare, after grants changed: %v %v", got, err)
	}
}
