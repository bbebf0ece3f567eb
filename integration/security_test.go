package integration

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// wantMySQLError fails unless err is the MySQL error number code.
func wantMySQLError(t *testing.T, what string, err error, code uint16) {
	t.Helper()
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != code {
		t.Errorf("%s: got %v, want MySQL error %d", what, err, code)
	}
}

// queryString returns the first column of the first row of q.
func queryString(t *testing.T, db *sql.DB, q string, args ...any) (string, error) {
	t.Helper()
	var s sql.NullString
	err := db.QueryRow(q, args...).Scan(&s)
	return s.String, err
}

// The server's file and settings boundary (issue #16), over the MySQL protocol with the README's analyst
// grants: an analyst cannot read or write any file, change server-wide settings, see other users'
// statements or grants, or read statistics of a protected table's raw columns; a user with FILE reads
// and writes only under secure_file_priv and never ldpsql's own files.
func TestFileAccessAndServerSettings(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "data.duckdb")
	s := startServer(t, dbPath)
	secure := filepath.Join(dir, "ldpsql-files") // the default: beside the database file, made by serve
	if fi, err := os.Stat(secure); err != nil || !fi.IsDir() {
		t.Fatalf("serve did not create the default secure_file_priv directory %s: %v", secure, err)
	}
	if err := os.WriteFile(filepath.Join(secure, "in.txt"), []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secure, "in.csv"), []byte("1,2\n3,4\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dbPath, filepath.Join(secure, "db-link")); err != nil {
		t.Fatal(err)
	}
	plugin := filepath.Join(filepath.Dir(ldpsqlBin), "ldpsql-plugin-pca")

	root := s.connect("root", "")
	mustExec(t, root, "CREATE TABLE sec (id INT PRIMARY KEY, name VARCHAR(20), age INT)")
	mustExec(t, root, "INSERT INTO sec VALUES (1, 'dee', 34), (2, 'ann', 50)")
	mustExec(t, root, "CALL ldp_set_budget('sec', 1)")
	analyst := s.readmeAnalyst(root)
	mustExec(t, root, "CREATE TABLE scratch.loaded (a INT, b INT)")
	mustExec(t, root, "CREATE USER filer@'%' IDENTIFIED BY 'pw'")
	mustExec(t, root, "GRANT FILE ON *.* TO filer@'%'")
	filer := s.connect("filer", "pw")

	t.Run("analyst reads no file", func(t *testing.T) {
		for _, p := range []string{dbPath, dbPath + ".wal", plugin, filepath.Join(secure, "in.txt"), "in.txt", "/etc/hostname"} {
			_, err := queryString(t, analyst, "SELECT LOAD_FILE('"+p+"')")
			wantMySQLError(t, "analyst LOAD_FILE("+p+")", err, 1227)
			_, err = queryString(t, analyst, "SELECT LENGTH(LOAD_FILE(?))", p) // a server-side prepared statement
			wantMySQLError(t, "analyst prepared LOAD_FILE("+p+")", err, 1227)
		}
		// GMS refuses it at parse time (it asks for FILE itself), before ldpsql's check.
		_, err := analyst.Exec("LOAD DATA INFILE 'in.csv' INTO TABLE scratch.loaded FIELDS TERMINATED BY ','")
		if err == nil || !strings.Contains(err.Error(), "denied") {
			t.Errorf("analyst LOAD DATA INFILE: %v, want access denied", err)
		}
	})

	t.Run("analyst writes no file", func(t *testing.T) {
		for i, p := range []string{filepath.Join(secure, "a.txt"), filepath.Join(dir, "b.txt"), "c.txt"} {
			kind := []string{"OUTFILE", "DUMPFILE"}[i%2]
			for _, k := range []string{kind, "OUTFILE"} {
				_, err := analyst.Exec("SELECT 'x' INTO " + k + " '" + p + "'")
				wantMySQLError(t, "analyst INTO "+k+" "+p, err, 1227)
			}
		}
		for _, p := range []string{filepath.Join(secure, "a.txt"), filepath.Join(dir, "b.txt"), filepath.Join(secure, "c.txt")} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("the analyst's refused INTO OUTFILE wrote %s", p)
			}
		}
	})

	t.Run("analyst changes no server setting", func(t *testing.T) {
		for _, v := range []string{"read_only", "max_connections", "local_infile"} {
			before, err := queryString(t, root, "SELECT @@GLOBAL."+v)
			if err != nil {
				t.Fatal(err)
			}
			newValue := "1"
			if before == "1" {
				newValue = "0"
			}
			for _, q := range []string{"SET GLOBAL " + v + " = " + newValue, "SET @@GLOBAL." + v + " = " + newValue, "SET PERSIST " + v + " = " + newValue} {
				_, err := analyst.Exec(q)
				wantMySQLError(t, "analyst "+q, err, 1227)
			}
			if after, _ := queryString(t, root, "SELECT @@GLOBAL."+v); after != before {
				t.Errorf("@@GLOBAL.%s was %s and is %s after the analyst's refused SET GLOBAL", v, before, after)
			}
		}
		// A session variable is the analyst's own business.
		mustExec(t, analyst, "SET SESSION sql_select_limit = 10")
	})

	t.Run("analyst runs no statement that changes the server or other users", func(t *testing.T) {
		// Each of these is refused by GMS's own privilege checks; kept here so that a GMS upgrade that
		// loosens one fails a test.
		for _, q := range []string{
			"CREATE USER intruder@'%'",
			"GRANT SUPER ON *.* TO analyst@'%'",
			"DROP USER filer@'%'",
			"FLUSH PRIVILEGES",
			"LOCK TABLES sec READ",
			"CREATE EVENT scratch.e ON SCHEDULE EVERY 1 SECOND DO INSERT INTO scratch.loaded VALUES (1, 1)",
			"CREATE PROCEDURE scratch.p() SELECT 1",
			"CREATE TRIGGER scratch.tr BEFORE INSERT ON scratch.loaded FOR EACH ROW SET NEW.a = 1",
			"CHANGE REPLICATION SOURCE TO SOURCE_HOST = '127.0.0.1'",
			"START REPLICA",
			"BINLOG 'AAAA'",
			"SHOW BINARY LOGS",
			"SHOW PROCESSLIST",
			"CREATE SPATIAL REFERENCE SYSTEM 4000000 NAME 'x' DEFINITION 'x'",
			"SELECT * FROM mysql.user",
			"CALL ldp_register_mechanism('m', '/bin/true', '00')",
		} {
			if _, err := analyst.Exec(q); err == nil || !strings.Contains(strings.ToLower(err.Error()), "denied") {
				t.Errorf("analyst %s: %v, want access denied", q, err)
			}
		}
		// KILL of another user's connection (MySQL's 1095; 1094 if it is gone): own connections are the
		// analyst's to kill (TestKillOwnConnection).
		if _, err := analyst.Exec("KILL 1"); err == nil || !(strings.Contains(err.Error(), "1095") || strings.Contains(err.Error(), "1094")) {
			t.Errorf("analyst KILL 1: %v, want error 1095 (not owner) or 1094", err)
		}
	})

	t.Run("SHOW GRANTS", func(t *testing.T) {
		for _, q := range []string{"SHOW GRANTS", "SHOW GRANTS FOR CURRENT_USER()", "SHOW GRANTS FOR analyst@'%'"} {
			rows, err := queryAll(analyst, q)
			if err != nil {
				t.Fatalf("analyst %s: %v", q, err)
			}
			if !strings.Contains(strings.Join(flatten(rows), "\n"), "GRANT SELECT, EXECUTE ON `ldpsql`.* TO `analyst`@`%`") {
				t.Errorf("analyst %s: %v, want their grants", q, rows)
			}
		}
		_, err := queryAll(analyst, "SHOW GRANTS FOR root")
		wantMySQLError(t, "analyst SHOW GRANTS FOR root", err, 1044)
		if rows, err := queryAll(root, "SHOW GRANTS FOR analyst@'%'"); err != nil || len(rows) < 2 {
			t.Errorf("root SHOW GRANTS FOR analyst: %v, %v", rows, err)
		}
	})

	t.Run("processlist shows an analyst only their own statements", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := root.ExecContext(ctx, "SELECT SLEEP(3), 'raw-value-typed-by-the-dba'")
			done <- err
		}()
		for { // wait until root itself sees the statement running
			rows, err := queryAll(root, "SELECT INFO FROM information_schema.processlist")
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(strings.Join(flatten(rows), " "), "raw-value-typed-by-the-dba") {
				break
			}
			if ctx.Err() != nil {
				t.Fatal("root's statement never appeared in the process list")
			}
			time.Sleep(20 * time.Millisecond)
		}
		rows, err := queryAll(analyst, "SELECT USER, INFO FROM information_schema.processlist")
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 0 {
			t.Errorf("the analyst does not see their own statement in the process list")
		}
		for _, r := range rows {
			if r[0] != "analyst" || strings.Contains(r[1], "raw-value") {
				t.Errorf("the analyst sees another user's statement: %v", r)
			}
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})

	t.Run("FILE holders read and write under secure_file_priv only", func(t *testing.T) {
		for _, db := range []*sql.DB{root, filer} {
			for _, p := range []string{"in.txt", filepath.Join(secure, "in.txt")} {
				if got, err := queryString(t, db, "SELECT LOAD_FILE(?)", p); err != nil || got != "hello" {
					t.Errorf("LOAD_FILE(%s) = %q, %v; want hello", p, got, err)
				}
			}
			if got, err := queryString(t, db, "SELECT LOAD_FILE('missing.txt') IS NULL"); err != nil || got != "1" {
				t.Errorf("LOAD_FILE of a missing file in secure_file_priv: %q, %v; want NULL", got, err)
			}
			for _, p := range []string{dbPath, plugin, ldpsqlBin, "db-link", "../data.duckdb", "/etc/hostname", "/proc/self/environ"} {
				_, err := queryString(t, db, "SELECT LOAD_FILE(?)", p)
				wantMySQLError(t, "LOAD_FILE("+p+")", err, 1290)
			}
		}
		mustExec(t, filer, "SELECT 'out', 1 INTO OUTFILE 'out.txt'")
		if b, err := os.ReadFile(filepath.Join(secure, "out.txt")); err != nil || string(b) != "out\t1\n" {
			t.Errorf("INTO OUTFILE 'out.txt' wrote %q, %v", b, err)
		}
		_, err := filer.Exec("SELECT 'again' INTO OUTFILE 'out.txt'")
		if err == nil || !strings.Contains(err.Error(), "exists") {
			t.Errorf("INTO OUTFILE over an existing file: %v, want an error saying it exists", err)
		}
		mustExec(t, root, "SELECT 'dump' INTO DUMPFILE '"+filepath.Join(secure, "dump.bin")+"'")
		for _, p := range []string{filepath.Join(dir, "outside.txt"), filepath.Join(filepath.Dir(plugin), "new-plugin")} {
			_, err := root.Exec("SELECT 'x' INTO DUMPFILE '" + p + "'")
			wantMySQLError(t, "INTO DUMPFILE "+p, err, 1290)
			if _, err := os.Stat(p); err == nil {
				t.Errorf("a refused INTO DUMPFILE wrote %s", p)
			}
		}
		mustExec(t, root, "LOAD DATA INFILE 'in.csv' INTO TABLE scratch.loaded FIELDS TERMINATED BY ','")
		if rows, err := queryAll(root, "SELECT a, b FROM scratch.loaded ORDER BY a"); err != nil || len(rows) != 2 || rows[1][1] != "4" {
			t.Errorf("LOAD DATA INFILE in.csv loaded %v, %v", rows, err)
		}
		_, err = root.Exec("LOAD DATA INFILE '/etc/hostname' INTO TABLE scratch.loaded")
		wantMySQLError(t, "LOAD DATA INFILE /etc/hostname", err, 1290)
	})

	t.Run("statistics of raw columns are hidden from analysts", func(t *testing.T) {
		mustExec(t, root, "CREATE TABLE visits (patient INT, visit INT, cost INT, PRIMARY KEY (patient, visit))")
		mustExec(t, root, "INSERT INTO visits VALUES (1, 20240101, 5), (1, 20240301, 7), (2, 20240102, 9)")
		mustExec(t, root, "CALL ldp_set_budget('visits', 1, 'charge', 'patient')")
		mustExec(t, root, "ANALYZE TABLE visits")
		q := "SELECT COLUMN_NAME FROM information_schema.column_statistics WHERE TABLE_NAME = 'visits'"
		if rows, err := queryAll(root, q); err != nil || !strings.Contains(strings.Join(flatten(rows), " "), "visit") {
			t.Fatalf("root's column statistics of visits: %v, %v (the test needs them)", rows, err)
		}
		rows, err := queryAll(analyst, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r[0] != "patient" {
				t.Errorf("the analyst sees statistics of raw column visits.%s", r[0])
			}
		}
	})

	s.stop()

	// secure_file_priv set to the directory of the database itself: its own files stay out of reach.
	s = startServer(t, dbPath, "--secure-file-priv", dir)
	root = s.connect("root", "")
	for _, p := range []string{dbPath, "data.duckdb", "data.duckdb.wal"} {
		_, err := queryString(t, root, "SELECT LOAD_FILE(?)", p)
		wantMySQLError(t, "LOAD_FILE("+p+") with secure_file_priv = the database's directory", err, 1290)
	}
	_, err := root.Exec("SELECT 'x' INTO DUMPFILE 'data.duckdb.wal'")
	wantMySQLError(t, "INTO DUMPFILE the WAL", err, 1290)
	if got, err := queryString(t, root, "SELECT LOAD_FILE('ldpsql-files/in.txt')"); err != nil || got != "hello" {
		t.Errorf("LOAD_FILE under the new secure_file_priv: %q, %v", got, err)
	}
	s.stop()

	// NULL: no file access for anyone.
	s = startServer(t, dbPath, "--secure-file-priv", "NULL")
	root = s.connect("root", "")
	_, err = queryString(t, root, "SELECT LOAD_FILE(?)", filepath.Join(secure, "in.txt"))
	wantMySQLError(t, "LOAD_FILE with secure_file_priv NULL", err, 1290)
	if got, err := queryString(t, root, "SELECT @@secure_file_priv IS NULL"); err != nil || got != "1" {
		t.Errorf("@@secure_file_priv with --secure-file-priv NULL: %q, %v; want NULL", got, err)
	}
}

func flatten(rows [][]string) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}

// Attack campaign (docs/security.md, variant 162): a client with multi-statements on (the mysql CLI
// always is) had its statements parsed by GMS's handler, which dropped the statement-size bound's error
// and ran the statement unchecked: a 60,000-term chain planned for minutes (quadratic), for an analyst
// too. Every such client must get the bound's error at once, as single-statement clients do.
func TestAttackMultiStatementClientKeepsStatementBounds(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "multi.duckdb"))
	root := s.connect("root", "")
	mustExec(t, root, "CREATE TABLE t (id INT PRIMARY KEY, y INT)")
	mustExec(t, root, "INSERT INTO t VALUES (1, 1)")
	mustExec(t, root, "CALL ldp_set_budget('t', 4, 'charge')")
	s.readmeAnalyst(root)
	analyst, err := sql.Open("mysql", "analyst:pw@tcp("+s.addr+")/ldpsql?multiStatements=true")
	if err != nil {
		t.Fatal(err)
	}
	defer analyst.Close()
	for _, q := range []string{
		"SELECT 1" + strings.Repeat(" + 1", 1499),
		"SELECT PRIVATE_ACCURACY((y" + strings.Repeat(" + y", 1499) + ") = 1, 1) FROM t",
		"SELECT 1; SELECT 1" + strings.Repeat(" + 1", 1499),
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rows, err := analyst.QueryContext(ctx, q)
		for err == nil && rows.NextResultSet() {
		}
		if err == nil {
			err = rows.Err()
			rows.Close()
		}
		cancel()
		wantMySQLError(t, "a 1,500-deep chain over a multi-statement connection", err, 1064)
		if err == nil || !strings.Contains(err.Error(), "statement too complex") {
			t.Errorf("a 1,500-deep chain over a multi-statement connection: %v, want the depth bound named", err)
		}
	}
	var one int
	if err := analyst.QueryRow("SELECT 1; SELECT 2").Scan(&one); err != nil || one != 1 {
		t.Errorf("multi-statement SELECT 1; SELECT 2 after the refusals: %d, %v", one, err)
	}
}
