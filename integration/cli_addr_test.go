package integration

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cliResult is what one run of the ldpsql command line did.
type cliResult struct {
	code           int
	stdout, stderr string
}

// runLdpsql runs the real ldpsql binary as a separate process, with LDPSQL_PASSWORD unset unless env
// sets it.
func runLdpsql(t *testing.T, env []string, stdin string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(ldpsqlBin, args...)
	cmd.Env = append(append(os.Environ(), "LDPSQL_PASSWORD="), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running ldpsql %v: %v", args, err)
	}
	return cliResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errOut.String()}
}

// `ldpsql sql --addr` beside a running `ldpsql serve`; --db on the file the server holds says which
// --addr to use; the server's errors are printed as its messages with a non-zero exit.
func TestCLISQLBesideServe(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "data.duckdb")
	s := startServer(t, dbPath)

	r := runLdpsql(t, nil, "", "sql", "--addr", s.addr, "-e",
		"CREATE TABLE t (id INT PRIMARY KEY, y INT, note VARCHAR(20)); INSERT INTO t VALUES (1, 0, 'a;b'), (2, 1, NULL); SELECT id, y, note, FLIP_LABEL(y, 2, 2) IN (0, 1) AS ok FROM t ORDER BY id")
	if r.code != 0 {
		t.Fatalf("sql --addr: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"Query OK, 2 row(s) affected", "| 1  | 0 | a;b  | 1  |", "| 2  | 1 | NULL | 1  |", "2 row(s)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("sql --addr output lacks %q:\n%s", want, r.stdout)
		}
	}
	// The data is the server's: a MySQL client sees it.
	var n int
	if err := s.connect("root", "").QueryRow("SELECT COUNT(*) FROM t").Scan(&n); err != nil || n != 2 {
		t.Fatalf("the server's t: %d rows, %v", n, err)
	}

	// The shell keeps one session: USE carries over, and an error does not end it.
	r = runLdpsql(t, nil, "CREATE DATABASE other;\nUSE other;\nCREATE TABLE u (a INT);\nSELECT DATABASE() AS db;\nSELECT * FROM nope;\nSELECT COUNT(*) AS n FROM ldpsql.t;\nexit\n", "sql", "--addr", s.addr)
	if r.code != 0 || !strings.Contains(r.stdout, "on "+s.addr+" as root") || !strings.Contains(r.stdout, "| other |") || !strings.Contains(r.stdout, "| 2 |") ||
		!strings.Contains(r.stderr, "ERROR 1146") || !strings.Contains(r.stderr, "nope") {
		t.Fatalf("shell over --addr: exit %d\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}

	// A server error: its message, exit 1.
	r = runLdpsql(t, nil, "", "sql", "--addr", s.addr, "-e", "SELECT FLIP_LABEL(7, 1, 2)")
	if r.code != 1 || !strings.Contains(r.stderr, "ERROR 1105 (HY000): FLIP_LABEL: argument y = 7") {
		t.Errorf("bad input over --addr: exit %d, stderr %q", r.code, r.stderr)
	}

	// --db on the file the server holds: the lock, explained, with the server's address.
	r = runLdpsql(t, nil, "", "sql", "--db", dbPath, "-e", "SELECT 1")
	if r.code != 1 || !strings.Contains(r.stderr, "the database file "+dbPath+" is locked by another process") ||
		!strings.Contains(r.stderr, "use --addr "+s.addr+" to talk to it") {
		t.Errorf("--db on the server's file: exit %d, stderr %q", r.code, r.stderr)
	}
	// Every --db command says so, train included.
	r = runLdpsql(t, nil, "", "train", "--db", dbPath, "--name", "v", "--table", "t")
	if r.code != 1 || !strings.Contains(r.stderr, "use --addr "+s.addr) {
		t.Errorf("train --db on the server's file: exit %d, stderr %q", r.code, r.stderr)
	}

	r = runLdpsql(t, nil, "", "sql", "--addr", s.addr, "--db", dbPath, "-e", "SELECT 1")
	if r.code != 1 || !strings.Contains(r.stderr, "--addr and --db cannot be used together") {
		t.Errorf("--addr with --db: exit %d, stderr %q", r.code, r.stderr)
	}

	// Stopped, the server removes its <db>.serve, and --db works again.
	if _, err := os.Stat(dbPath + ".serve"); err != nil {
		t.Errorf("while serving: %v", err)
	}
	s.stop()
	if _, err := os.Stat(dbPath + ".serve"); !os.IsNotExist(err) {
		t.Errorf("after the server stopped, %s.serve: %v", dbPath, err)
	}
	r = runLdpsql(t, nil, "", "sql", "--db", dbPath, "-e", "SELECT COUNT(*) AS n FROM t")
	if r.code != 0 || !strings.Contains(r.stdout, "| 2 |") {
		t.Errorf("--db after the server stopped: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestCLIPasswordOverAddr(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "data.duckdb"), "--root-password", "s3cret-pw")
	r := runLdpsql(t, nil, "", "sql", "--addr", s.addr, "--password", "wr0ng-pw", "-e", "SELECT 1")
	if r.code != 1 || !strings.Contains(r.stderr, "ERROR 1045 (28000): Access denied for user 'root'") {
		t.Errorf("wrong password: exit %d, stderr %q", r.code, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, "wr0ng-pw") {
		t.Errorf("the password was printed: %q", r.stdout+r.stderr)
	}
	if r := runLdpsql(t, []string{"LDPSQL_PASSWORD=s3cret-pw"}, "", "sql", "--addr", s.addr, "-e", "SELECT 1 AS one"); r.code != 0 || !strings.Contains(r.stdout, "| 1   |") {
		t.Errorf("LDPSQL_PASSWORD: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The flag wins over the variable.
	if r := runLdpsql(t, []string{"LDPSQL_PASSWORD=wr0ng-pw"}, "", "sql", "--addr", s.addr, "--password", "s3cret-pw", "-e", "SELECT 1"); r.code != 0 {
		t.Errorf("--password over a wrong LDPSQL_PASSWORD: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runLdpsql(t, []string{"LDPSQL_PASSWORD=s3cret-pw"}, "", "sql", "--addr", s.addr, "--user", "nobody", "-e", "SELECT 1"); r.code != 1 || !strings.Contains(r.stderr, "Access denied for user 'nobody'") {
		t.Errorf("unknown user: exit %d, stderr %q", r.code, r.stderr)
	}
}

// load, export and dataset load over --addr, and the same rows as in process.
func TestCLILoadExportOverAddr(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, filepath.Join(dir, "data.duckdb"))
	csvPath := filepath.Join(dir, "people.csv")
	csv := "id,age,city\n1,30,Oslo\n2,,\"Bergen, Norway\"\n3,41,\"it's \"\"quoted\"\"\"\n"
	if err := os.WriteFile(csvPath, []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runLdpsql(t, nil, "", "sql", "--addr", s.addr, "-e", "CREATE TABLE people (id INT PRIMARY KEY, age INT, city VARCHAR(40))"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	r := runLdpsql(t, nil, "", "load", "--addr", s.addr, "--table", "people", csvPath)
	if r.code != 0 || !strings.Contains(r.stdout, "loaded 3 rows from "+csvPath+" into people") {
		t.Fatalf("load --addr: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runLdpsql(t, nil, "", "export", "--addr", s.addr, "--query", "SELECT id, age, city FROM people ORDER BY id")
	if r.code != 0 || r.stdout != csv {
		t.Fatalf("export --addr: exit %d, %s\n%q\nwant\n%q", r.code, r.stderr, r.stdout, csv)
	}
	r = runLdpsql(t, nil, "", "sql", "--addr", s.addr, "-e", "SELECT COUNT(*) AS n, SUM(age) AS ages, SUM(age IS NULL) AS nulls FROM people")
	if r.code != 0 || !strings.Contains(r.stdout, "| 3 | 71   | 1     |") {
		t.Fatalf("read back with sql --addr: %s%s", r.stdout, r.stderr)
	}
	// Loading the rows again: the server's duplicate-key error, exit 1.
	r = runLdpsql(t, nil, "", "load", "--addr", s.addr, "--table", "people", csvPath)
	if r.code != 1 || !strings.Contains(r.stderr, "ERROR 1062") {
		t.Errorf("duplicate load: exit %d, stderr %q", r.code, r.stderr)
	}

	// Packed float32 BLOBs over the wire are the bytes the in-process load writes.
	if r := runLdpsql(t, nil, "", "dataset", "load", "breast-cancer", "--addr", s.addr); r.code != 0 || !strings.Contains(r.stdout, "loaded 569") {
		t.Fatalf("dataset load --addr: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	local := filepath.Join(dir, "local.duckdb")
	if r := runLdpsql(t, nil, "", "dataset", "load", "breast-cancer", "--db", local); r.code != 0 {
		t.Fatalf("dataset load --db: %s", r.stderr)
	}
	const dump = "SELECT id, HEX(features) AS f, label FROM breast_cancer ORDER BY id"
	wire := runLdpsql(t, nil, "", "export", "--addr", s.addr, "--query", dump)
	inProc := runLdpsql(t, nil, "", "export", "--db", local, "--query", dump)
	if wire.code != 0 || inProc.code != 0 || wire.stdout != inProc.stdout || strings.Count(wire.stdout, "\n") != 570 {
		t.Fatalf("breast_cancer over --addr and in process differ (exit %d, %d; %s %s)", wire.code, inProc.code, wire.stderr, inProc.stderr)
	}
}

// train over --addr returns when the job has finished, showing its progress; Ctrl-C cancels the job
// on the server.
func TestCLITrainOverAddr(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "data.duckdb"))
	db := s.connect("root", "")
	fillUnit(t, db, "aux", 1000, 20)

	r := runLdpsql(t, nil, "", "train", "--addr", s.addr, "--name", "v", "--table", "aux", "--column", "f",
		"--params", `{"d": 2, "l": 3, "eps_pretrain": 10, "epochs": 3, "hidden": [16, 8], "seed": 1}`)
	if r.code != 0 || !regexp.MustCompile(`job \d+ succeeded: mechanism "v" is registered`).MatchString(r.stdout) || !strings.Contains(r.stderr, "epoch 3/3") {
		t.Fatalf("train --addr: exit %d\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	var kind string
	if err := db.QueryRow("SELECT plugin FROM ldpsql_catalog.ldp_mechanisms WHERE name = 'v'").Scan(&kind); err != nil {
		t.Fatalf("mechanism v after train --addr: %v", err)
	}

	// The server refuses: its message, exit 1.
	r = runLdpsql(t, nil, "", "train", "--addr", s.addr, "--name", "v", "--table", "aux", "--column", "f")
	if r.code != 1 || !strings.Contains(r.stderr, "ERROR 1105 (HY000): ldp_train_mechanism: a mechanism called \"v\" is already registered") {
		t.Errorf("train of an existing name: exit %d, stderr %q", r.code, r.stderr)
	}

	// SIGINT to the client cancels the job on the server.
	cmd := exec.Command(ldpsqlBin, "train", "--addr", s.addr, "--name", "v2", "--table", "aux", "--column", "f",
		"--params", `{"d": 2, "epochs": 100000, "hidden": [16, 8]}`)
	cmd.Env = append(os.Environ(), "LDPSQL_PASSWORD=")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var running int
		if err := db.QueryRow("SELECT COUNT(*) FROM ldpsql_catalog.ldp_jobs WHERE target = 'v2' AND state = 'running' AND epoch > 0").Scan(&running); err != nil {
			t.Fatal(err)
		}
		if running == 1 {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the v2 job did not start an epoch in 60 s:\n%s", errOut.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if err == nil || cmd.ProcessState.ExitCode() != 1 || !strings.Contains(errOut.String(), "cancelling") || !regexp.MustCompile(`job \d+ cancelled`).MatchString(errOut.String()) {
		t.Fatalf("train after SIGINT: %v\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	var state string
	if err := db.QueryRow("SELECT state FROM ldpsql_catalog.ldp_jobs WHERE target = 'v2'").Scan(&state); err != nil || state != "cancelled" {
		t.Fatalf("the server's v2 job: %q, %v", state, err)
	}
}
