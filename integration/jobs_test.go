package integration

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Jobs for their owners (issue #19, item 2), over the MySQL protocol with the README's analyst: every
// user reads ldp_jobs and sees the jobs they started (a DBA sees all), polls their own to success, and
// cancels their own job but not another user's, which is refused as if it did not exist.
func TestJobsForTheirOwners(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "data.duckdb"))
	root := s.connect("root", "")
	fillClusters(t, root, "aux", 600, 1, false)
	fillClusters(t, root, "d2", 600, 2, true)
	mustExec(t, root, `CALL ldp_fit_mechanism('pca2', 'pca', 'aux', 'f', '{"d": 2, "l": 6}')`)
	mustExec(t, root, "CALL ldp_privatize('d2', 'f', 'y', 'd2_pca', 8, 0.7, 'pca2', 'laplace', 4)")
	analyst := s.readmeAnalyst(root)

	var rootJob, longJob, shortJob int64
	if err := root.QueryRow("SELECT TRAIN_NOISY_CLASSIFIER('d2_pca', ?)", `{"model": "m_root", "objective": "forward", "epochs": 3}`).Scan(&rootJob); err != nil {
		t.Fatal(err)
	}
	if err := analyst.QueryRow("SELECT TRAIN_NOISY_CLASSIFIER('d2_pca', ?)", `{"model": "m_long", "objective": "forward", "epochs": 100000, "patience": 100000}`).Scan(&longJob); err != nil {
		t.Fatalf("analyst TRAIN_NOISY_CLASSIFIER: %v", err)
	}

	visible := func() map[string]bool {
		rows, err := queryAll(analyst, "SELECT id, created_by FROM ldpsql_catalog.ldp_jobs ORDER BY id")
		if err != nil {
			t.Fatalf("analyst reading ldp_jobs: %v", err)
		}
		out := map[string]bool{}
		for _, r := range rows {
			out[r[0]] = true
			if !strings.HasPrefix(r[1], "analyst@") {
				t.Errorf("the analyst sees %s's job %s", r[1], r[0])
			}
		}
		return out
	}
	if v := visible(); !v[strconv.FormatInt(longJob, 10)] || v[strconv.FormatInt(rootJob, 10)] || len(v) != 1 {
		t.Errorf("the analyst sees jobs %v; want only their own %d", v, longJob)
	}
	if rows, err := queryAll(root, "SELECT id FROM ldpsql_catalog.ldp_jobs"); err != nil || len(rows) != 2 {
		t.Errorf("root sees %v (%v); want both jobs", rows, err)
	}

	// Another user's job: refused as if it did not exist, and it runs on.
	_, err := analyst.Exec("CALL ldp_cancel_job(?)", rootJob)
	if err == nil || !strings.Contains(err.Error(), "you have no job") {
		t.Errorf("analyst cancelling root's job: %v", err)
	}
	if j := waitJob(t, root, rootJob, 2*time.Minute); j.state != "succeeded" {
		t.Errorf("root's job: %s %s", j.state, j.errMsg)
	}
	// Their own: stopped and recorded as cancelled.
	mustExec(t, analyst, "CALL ldp_cancel_job(?)", longJob)
	if j := waitJob(t, analyst, longJob, time.Minute); j.state != "cancelled" {
		t.Errorf("the analyst's cancelled job: %s %s", j.state, j.errMsg)
	}
	// And polled to success.
	if err := analyst.QueryRow("SELECT TRAIN_NOISY_CLASSIFIER('d2_pca', ?)", `{"model": "m_short", "objective": "forward", "epochs": 3}`).Scan(&shortJob); err != nil {
		t.Fatal(err)
	}
	if j := waitJob(t, analyst, shortJob, 2*time.Minute); j.state != "succeeded" {
		t.Errorf("the analyst's job: %s %s", j.state, j.errMsg)
	}
	// The rest of the catalog keeps its grants: the ledger stays a DBA's.
	if _, err := queryAll(analyst, "SELECT * FROM ldpsql_catalog.ldp_releases"); err == nil {
		t.Error("the analyst reads the ledger")
	}
}

// A job records its account (user@the account's host), so each account sees its jobs from any of its
// connections: go-sql-driver for a password account, the mysql CLI for a passwordless one. (GMS's
// caching_sha2_password path would put the client's address in the session instead; engine's
// sessionBuilder replaces it with the account's host, but neither client here can log in that way.)
func TestJobsRecordTheAccount(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "data.duckdb"))
	root := s.connect("root", "")
	fillClusters(t, root, "d2", 300, 2, true)
	mustExec(t, root, `CALL ldp_fit_mechanism('pca2', 'pca', 'd2', 'f', '{"d": 2, "l": 6}')`)
	mustExec(t, root, "CALL ldp_privatize('d2', 'f', 'y', 'd2_pca', 8, 0.7, 'pca2', 'laplace', 4)")
	analyst := s.readmeAnalyst(root)
	var id int64
	if err := analyst.QueryRow("SELECT TRAIN_NOISY_CLASSIFIER('d2_pca', ?)", `{"model": "m_a", "objective": "forward", "epochs": 2}`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	again := s.connect("analyst", "pw")
	waitJob(t, again, id, 2*time.Minute)
	if rows, err := queryAll(again, "SELECT created_by FROM ldpsql_catalog.ldp_jobs WHERE id = ?", id); err != nil || fmtRows(rows) != "[[analyst@%]]" {
		t.Errorf("the analyst's job from another connection: %v %v; want created_by analyst@%%", fmtRows(rows), err)
	}

	mustExec(t, root, "CREATE USER nopw@'%'")
	mustExec(t, root, "GRANT SELECT, EXECUTE ON ldpsql.* TO nopw@'%'")
	host, port, _ := strings.Cut(s.addr, ":")
	cli := func(q string) string {
		out, err := exec.Command(mariaDBTool(t, "mysql"), "-h", host, "-P", port, "-u", "nopw", "-N", "-B", "ldpsql", "-e", q).CombinedOutput()
		if err != nil {
			t.Fatalf("mysql as nopw: %s: %v: %s", q, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	out := cli(`SELECT TRAIN_NOISY_CLASSIFIER('d2_pca', '{"model": "m_cli", "objective": "forward", "epochs": 2}')`)
	cliJob, err := strconv.ParseInt(out, 10, 64)
	if err != nil {
		t.Fatalf("mysql as nopw printed %q", out)
	}
	waitJob(t, root, cliJob, 2*time.Minute)
	if got := cli("SELECT id, created_by FROM ldpsql_catalog.ldp_jobs"); got != out+"\tnopw@%" {
		t.Errorf("nopw's jobs seen from another mysql CLI connection: %q; want job %d by nopw@%%", got, cliJob)
	}
}
