package integration

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ldp_privatize into another database than the current one (issue #19, item 3), with ε recorded as
// the user means it and RR_FREQUENCY checked against it (item 5), over the MySQL protocol with the
// README's analyst: from ldpsql they write scratch.d2_rel (eps_x = 0.6 × 7 recorded and returned as 4.2),
// stay in ldpsql, leave no temporary table, are refused where they may not write, and a failure after
// the temporary table was made leaves nothing either.
func TestPrivatizeIntoAnotherDatabase(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "data.duckdb"))
	root := s.connect("root", "")
	fillClusters(t, root, "aux", 600, 1, false)
	fillClusters(t, root, "d2", 600, 2, true) // labels 0..3
	mustExec(t, root, `CALL ldp_fit_mechanism('pca2', 'pca', 'aux', 'f', '{"d": 2, "l": 6}')`)
	analyst := s.readmeAnalyst(root)
	mustExec(t, root, "CREATE DATABASE otherdb")

	ctx := context.Background()
	conn, err := analyst.Conn(ctx) // one session, to see its current database afterwards
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var dst, epsX, epsY string
	var n int64
	var secs, rps float64
	if err := conn.QueryRowContext(ctx, "CALL ldp_privatize('d2', 'f', 'y', 'scratch.d2_rel', 7, 0.6, 'pca2', 'laplace', 4)").
		Scan(&dst, &n, &secs, &rps, &epsX, &epsY); err != nil {
		t.Fatalf("the analyst's ldp_privatize from ldpsql into scratch: %v", err)
	}
	if n != 600 || epsX != "4.2" || epsY != "2.8" {
		t.Errorf("ldp_privatize returned %s %d rows, eps_x %s, eps_y %s; want 600 rows, 4.2 and 2.8", dst, n, epsX, epsY)
	}
	var cur string
	if err := conn.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&cur); err != nil || cur != "ldpsql" {
		t.Errorf("the session's database after ldp_privatize: %q %v", cur, err)
	}
	if got, err := queryAll(analyst, "SELECT count(*) FROM scratch.d2_rel"); err != nil || got[0][0] != "600" {
		t.Errorf("scratch.d2_rel: %v %v", got, err)
	}
	got, err := queryAll(root, "SELECT table_comment FROM information_schema.tables WHERE table_schema = 'scratch' AND table_name = 'd2_rel'")
	if err != nil || len(got) != 1 || !strings.Contains(got[0][0], `"eps_x":4.2,`) || !strings.Contains(got[0][0], `"eps_y":2.8,`) {
		t.Errorf("the recorded metadata: %v %v", got, err)
	}

	// RR_FREQUENCY on it: the recorded eps_y and K are fine; others are an error naming both.
	if _, err := queryAll(analyst, "SELECT RR_FREQUENCY(y, 2.8, 4, 1) FROM scratch.d2_rel"); err != nil {
		t.Errorf("RR_FREQUENCY at the recorded eps and K: %v", err)
	}
	for q, args := range map[string][]any{
		"SELECT RR_FREQUENCY(y, 7, 4, 1) FROM scratch.d2_rel":   nil,
		"SELECT RR_FREQUENCY(y, ?, 3, 1) FROM scratch.d2_rel":   {2.8}, // a server-side prepared statement
		"SELECT RR_FREQUENCY(y, 2.8, ?, 1) FROM scratch.d2_rel": {2},
	} {
		_, err := queryAll(analyst, q, args...)
		if err == nil || !strings.Contains(err.Error(), "scratch.d2_rel were released by ldp_privatize at eps_y = 2.8 with K = 4") {
			t.Errorf("%s: %v", q, err)
		}
	}

	// Where the analyst may not write: refused, and nothing is left there or in ldpsql.
	for _, dst := range []string{"otherdb.x", "ldpsql.x"} {
		if _, err := analyst.Exec("CALL ldp_privatize('d2', 'f', 'y', '" + dst + "', 7, 0.6, 'pca2', 'laplace', 4)"); err == nil {
			t.Errorf("the analyst wrote %s", dst)
		}
	}
	// A failure after the temporary table was made (labels 2 and 3 at K = 2): nothing left.
	if _, err := analyst.Exec("CALL ldp_privatize('d2', 'f', 'y', 'scratch.bad', 7, 0.6, 'pca2', 'laplace', 2)"); err == nil {
		t.Error("ldp_privatize with labels outside 0..K-1 succeeded")
	}
	for db, want := range map[string]string{"scratch": "[[d2_rel]]", "otherdb": "[]", "ldpsql": "[[aux] [d2]]"} {
		got, err := queryAll(root, "SHOW TABLES FROM "+db)
		if err != nil || fmtRows(got) != want {
			t.Errorf("tables of %s: %v %v; want %s", db, got, err, want)
		}
	}

	// Root, in ldpsql, into otherdb.
	mustExec(t, root, "CALL ldp_privatize('d2', 'f', '', 'otherdb.d2_rel', 4, 0.5, 'pca2', 'laplace', 0)")
	if got, err := queryAll(root, "SELECT count(*) FROM otherdb.d2_rel"); err != nil || got[0][0] != "600" {
		t.Errorf("otherdb.d2_rel: %v %v", got, err)
	}
}

func fmtRows(rows [][]string) string {
	var parts []string
	for _, r := range rows {
		parts = append(parts, "["+strings.Join(r, " ")+"]")
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// The same through the mysql command-line client: the README's analyst privatises into another
// database, and root reads LEFT(description, 300) of ldp_mechanisms (a catalog JSON column in a string
// function).
func TestCrossDatabaseAndJSONThroughMySQLClient(t *testing.T) {
	client := mariaDBTool(t, "mysql")
	s := startServer(t, filepath.Join(t.TempDir(), "data.duckdb"))
	root := s.connect("root", "")
	fillClusters(t, root, "aux", 600, 1, false)
	fillClusters(t, root, "d2", 600, 2, true)
	mustExec(t, root, `CALL ldp_fit_mechanism('pca2', 'pca', 'aux', 'f', '{"d": 2, "l": 6}')`)
	s.readmeAnalyst(root)
	host, port, _ := strings.Cut(s.addr, ":")
	run := func(user, password, stmt string) (string, error) {
		args := []string{"-h", host, "-P", port, "-u", user, "--batch", "--skip-column-names"}
		if password != "" {
			args = append(args, "-p"+password)
		}
		out, err := exec.Command(client, append(args, "ldpsql", "-e", stmt)...).CombinedOutput()
		return string(out), err
	}
	out, err := run("analyst", "pw", "CALL ldp_privatize('d2', 'f', 'y', 'scratch.d2_rel', 7, 0.6, 'pca2', 'laplace', 4)")
	if err != nil || !strings.Contains(out, "scratch.d2_rel\t600\t") || !strings.HasSuffix(strings.TrimSpace(out), "\t4.2\t2.8") {
		t.Fatalf("mysql client, cross-database ldp_privatize (err %v):\n%s", err, out)
	}
	out, err = run("root", "", "SELECT name, LEFT(description, 300) FROM ldpsql_catalog.ldp_mechanisms WHERE name = 'pca2'")
	if err != nil || !strings.HasPrefix(out, "pca2\t{") {
		t.Fatalf("mysql client, LEFT of a catalog JSON column (err %v):\n%s", err, out)
	}
}
