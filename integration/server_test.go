package integration

import (
	"bufio"
	"database/sql"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
)

var (
	ldpsqlBin string // the server, with the built-in plugins beside it
	pluginBin string // directory of the third-party and deliberately faulty plugins
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ldpsql-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ldpsqlBin = filepath.Join(dir, "bin", "ldpsql")
	pluginBin = filepath.Join(dir, "plugins")
	for out, pkg := range map[string]string{
		ldpsqlBin: "./cmd/ldpsql",
		filepath.Join(dir, "bin", "ldpsql-plugin-identity"):          "./plugins/builtin/identity",
		filepath.Join(dir, "bin", "ldpsql-plugin-pca"):               "./plugins/builtin/pca",
		filepath.Join(dir, "bin", "ldpsql-plugin-vlm"):               "./plugins/builtin/vlm",
		filepath.Join(dir, "bin", "ldpsql-plugin-task_aware_linear"): "./plugins/builtin/task_aware_linear",
		filepath.Join(dir, "bin", "ldpsql-plugin-task_aware"):        "./plugins/builtin/task_aware",
		filepath.Join(dir, "bin", "ldpsql-plugin-clm"):               "./plugins/builtin/clm",
		filepath.Join(pluginBin, "meanpool"):                         "./examples/thirdparty-encoder",
		filepath.Join(pluginBin, "liar"):                             "./plugins/host/testdata/liar",
		filepath.Join(pluginBin, "crash"):                            "./plugins/host/testdata/crash",
		filepath.Join(pluginBin, "hang"):                             "./plugins/host/testdata/hang",
	} {
		build := exec.Command("go", "build", "-o", out, pkg)
		build.Dir = ".."
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n", pkg, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is a running `ldpsql serve` process.
type server struct {
	t      testing.TB
	cmd    *exec.Cmd
	addr   string
	stderr *strings.Builder
	exited chan error

	outMu sync.Mutex
	out   strings.Builder // what the server printed on stdout
}

// stdoutText returns what the server has printed on stdout so far.
func (s *server) stdoutText() string {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	return s.out.String()
}

var listeningRE = regexp.MustCompile(`listening on (\S+)`)

// startServer runs `ldpsql serve` on a free loopback port over dbPath and waits until it listens.
func startServer(t testing.TB, dbPath string, extraArgs ...string) *server {
	t.Helper()
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--db", dbPath, "--plugin-timeout", "3s"}, extraArgs...)
	cmd := exec.Command(ldpsqlBin, args...)
	cmd.Env = append(os.Environ(), "LDPSQL_ROOT_PASSWORD=")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, cmd: cmd, stderr: &strings.Builder{}, exited: make(chan error, 1)}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			s.outMu.Lock()
			s.out.WriteString(sc.Text() + "\n")
			s.outMu.Unlock()
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				lines <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { s.exited <- cmd.Wait() }()
	select {
	case s.addr = <-lines:
	case err := <-s.exited:
		t.Fatalf("ldpsql serve exited before listening: %v\n%s", err, s.stderr)
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("ldpsql serve did not start listening in 60 s\n%s", s.stderr)
	}
	t.Cleanup(func() { s.stop() })
	return s
}

// kill ends the server with SIGKILL (no clean shutdown) and waits for it to exit.
func (s *server) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop() {
	s.t.Helper()
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.exited:
		if err != nil {
			s.t.Errorf("ldpsql serve exited with %v after SIGTERM\n%s", err, s.stderr)
		}
		if !strings.Contains(s.stderr.String(), "database closed cleanly") {
			s.t.Errorf("no clean-close message after SIGTERM:\n%s", s.stderr)
		}
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		s.t.Errorf("ldpsql serve did not stop within 30 s of SIGTERM")
	}
}

// connect opens a go-sql-driver/mysql connection pool to the server.
func (s *server) connect(user, password string) *sql.DB {
	s.t.Helper()
	db, err := sql.Open("mysql", fmt.Sprintf("%s:%s@tcp(%s)/ldpsql?interpolateParams=false", user, password, s.addr))
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { db.Close() })
	return db
}

func mustExec(t testing.TB, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// insertLabelsSQL is one INSERT of count rows (id, id mod 10) into labels(id, y), ids from start.
func insertLabelsSQL(start, count int) string {
	var sb strings.Builder
	sb.WriteString("INSERT INTO labels VALUES ")
	for i := start; i < start+count; i++ {
		if i > start {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, "(%d,%d)", i, i%10)
	}
	return sb.String()
}

// insertRows inserts rows (id, y = id mod k, note) in multi-row statements of 1,000.
func insertRows(t *testing.T, db *sql.DB, table string, n, k int) {
	t.Helper()
	for start := 0; start < n; start += 1000 {
		var vals []string
		for i := start; i < start+1000 && i < n; i++ {
			vals = append(vals, fmt.Sprintf("(%d, %d, 'row %d')", i, i%k, i))
		}
		mustExec(t, db, "INSERT INTO "+table+" VALUES "+strings.Join(vals, ","))
	}
}

func TestRowsSurviveRestart(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "data.duckdb")
	s := startServer(t, dbPath)
	db := s.connect("root", "")
	mustExec(t, db, "CREATE TABLE items (id INT PRIMARY KEY, y INT NOT NULL, note VARCHAR(40))")
	insertRows(t, db, "items", 10_000, 7)
	db.Close()
	s.stop()

	s = startServer(t, dbPath)
	db = s.connect("root", "")
	rows, err := db.Query("SELECT id, y, note FROM items ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id, y int
		var note string
		if err := rows.Scan(&id, &y, &note); err != nil {
			t.Fatal(err)
		}
		if id != n || y != n%7 || note != fmt.Sprintf("row %d", n) {
			t.Fatalf("row %d read back as (%d, %d, %q)", n, id, y, note)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 10_000 {
		t.Fatalf("read back %d rows, want 10000", n)
	}
}

func TestFlipLabelKeepRateOverTheWire(t *testing.T) {
	const n, k, eps = 100_000, 4, 1.5
	s := startServer(t, filepath.Join(t.TempDir(), "data.duckdb"))
	db := s.connect("root", "")
	mustExec(t, db, "CREATE TABLE labels (id INT PRIMARY KEY, y INT NOT NULL, note VARCHAR(40))")
	insertRows(t, db, "labels", n, k)
	// Bind parameters go through server-side prepared statements.
	rows, err := db.Query("SELECT y, FLIP_LABEL(y, ?, ?) FROM labels", eps, k)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	kept, total := 0, 0
	for rows.Next() {
		var y, out int
		if err := rows.Scan(&y, &out); err != nil {
			t.Fatal(err)
		}
		if out < 0 || out >= k {
			t.Fatalf("FLIP_LABEL returned %d", out)
		}
		if out == y {
			kept++
		}
		total++
	}
	if total != n {
		t.Fatalf("%d rows", total)
	}
	p := math.Exp(eps) / (math.Exp(eps) + k - 1)
	se := math.Sqrt(p * (1 - p) / n)
	// 6 standard errors: false-failure probability 2e-9.
	if got := float64(kept) / n; math.Abs(got-p) > 6*se {
		t.Fatalf("keep rate %.4f, want e^eps/(e^eps+K-1) = %.4f ± %.4f", got, p, 6*se)
	}
}

func TestBadInputKeepsServing(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "data.duckdb"))
	db := s.connect("root", "")
	mustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, y INT)")
	mustExec(t, db, "INSERT INTO t VALUES (1, 0), (2, 1)")
	for _, tc := range []struct{ query, want string }{
		{"SELECT FLIP_LABEL(y, 1, 2) FROM t WHERE id = 1 UNION ALL SELECT FLIP_LABEL(5, 1, 2)", "argument y = 5"},
		{"SELECT FLIP_LABEL(y, -1, 2) FROM t", "argument eps = -1"},
		{"SELECT FLIP_LABEL(y, 1, 1) FROM t", "argument K = 1"},
		{"SELECT LDP_LAPLACE(1, 1, 5, 0)", "argument lo, hi"},
		{"INSERT INTO t VALUES (3, 0), (1, 9)", "Duplicate entry"},
		{"SELECT * FROM missing_table", "missing_table"},
		{"SELEC 1", "syntax"},
	} {
		_, err := db.Exec(tc.query)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.query, err, tc.want)
		}
	}
	var count int
	if err := db.QueryRow("SELECT COUNT(*) FROM t").Scan(&count); err != nil || count != 2 {
		t.Fatalf("after the errors: count %d, err %v (the failed INSERT must write nothing)", count, err)
	}
	var noisy int
	if err := db.QueryRow("SELECT FLIP_LABEL(1, 1, 2)").Scan(&noisy); err != nil {
		t.Fatalf("server stopped serving after bad input: %v", err)
	}
}

func TestRootPassword(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "data.duckdb"), "--root-password", "s3cret")
	var one int
	if err := s.connect("root", "s3cret").QueryRow("SELECT 1").Scan(&one); err != nil {
		t.Fatalf("right password refused: %v", err)
	}
	for _, pw := range []string{"", "wrong"} {
		if err := s.connect("root", pw).QueryRow("SELECT 1").Scan(&one); err == nil || !strings.Contains(err.Error(), "Access denied") {
			t.Errorf("password %q: %v, want access denied", pw, err)
		}
	}
}

func TestEmptyPasswordOnlyOnLoopback(t *testing.T) {
	cmd := exec.Command(ldpsqlBin, "serve", "--addr", "0.0.0.0:0", "--db", filepath.Join(t.TempDir(), "d.duckdb"))
	cmd.Env = append(os.Environ(), "LDPSQL_ROOT_PASSWORD=")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "empty root password") {
		t.Fatalf("serve on 0.0.0.0 without a password: err %v, output %s", err, out)
	}
}

// mariaDBTool returns the path of a client program of Debian's mariadb-client (mysql, mysqldump), which
// scripts/test.sh installs: missing, the test fails in CI and is skipped elsewhere.
func mariaDBTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed; scripts/test.sh installs mariadb-client", name)
		}
		t.Skipf("%s not installed (apt-get install mariadb-client)", name)
	}
	return path
}

func TestMySQLCommandLineClient(t *testing.T) {
	client := mariaDBTool(t, "mysql")
	s := startServer(t, filepath.Join(t.TempDir(), "data.duckdb"))
	host, port, _ := strings.Cut(s.addr, ":")
	run := func(stmt string) (string, error) {
		out, err := exec.Command(client, "-h", host, "-P", port, "-u", "root", "--batch", "ldpsql", "-e", stmt).CombinedOutput()
		return string(out), err
	}
	if out, err := run("CREATE TABLE v (id INT PRIMARY KEY, y INT); INSERT INTO v VALUES (1, 1), (2, 0)"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	out, err := run("SELECT id, y FROM v ORDER BY id; SELECT FLIP_LABEL(y, 2, 2) IN (0, 1) AS ok FROM v")
	if err != nil || !strings.Contains(out, "id\ty\n1\t1\n2\t0\n") || !strings.Contains(out, "ok\n1\n1\n") {
		t.Fatalf("mysql client output (err %v):\n%s", err, out)
	}
	out, err = run("SELECT FLIP_LABEL(2, 1, 2)")
	if err == nil || !strings.Contains(out, "ERROR") || !strings.Contains(out, "argument y = 2") {
		t.Fatalf("bad input through the mysql client: err %v, output %s", err, out)
	}
}

// SQL-level prepared statements through the mysql CLI: PREPARE's OK packet carries an info text
// ("Statement prepared") that the MariaDB client once rejected as a malformed packet.
func TestMySQLCommandLinePreparedStatements(t *testing.T) {
	client := mariaDBTool(t, "mysql")
	s := startServer(t, filepath.Join(t.TempDir(), "data.duckdb"))
	host, port, _ := strings.Cut(s.addr, ":")
	out, err := exec.Command(client, "-h", host, "-P", port, "-u", "root", "--batch", "ldpsql", "-e",
		"CREATE TABLE p (id INT PRIMARY KEY, y INT); INSERT INTO p VALUES (1, 10), (2, 20);"+
			"PREPARE s FROM 'SELECT y FROM p WHERE id = ?'; SET @id = 2; EXECUTE s USING @id;"+
			"PREPARE u FROM 'UPDATE p SET y = ? WHERE id = ?'; SET @y = 7; EXECUTE u USING @y, @id;"+
			"DEALLOCATE PREPARE s; SELECT id, y FROM p ORDER BY id").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "y\n20\n") || !strings.Contains(string(out), "id\ty\n1\t10\n2\t7\n") {
		t.Fatalf("prepared statements through the mysql client (err %v):\n%s", err, out)
	}
}

// ledgerTotals is how many releases of table the ledger holds and the ε they charged in all.
func ledgerTotals(t testing.TB, root *sql.DB, table string) (releases int64, spent float64) {
	t.Helper()
	var sp sql.NullFloat64
	if err := root.QueryRow("SELECT COUNT(*), SUM(eps) FROM ldpsql_catalog.ldp_releases WHERE table_name = ?", table).Scan(&releases, &sp); err != nil {
		t.Fatal(err)
	}
	return releases, sp.Float64
}

// execFails fails the test unless running q on db fails with an error whose text holds want (any case).
func execFails(t testing.TB, db *sql.DB, q, want string) {
	t.Helper()
	if _, err := db.Exec(q); err == nil || !strings.Contains(strings.ToLower(err.Error()), want) {
		t.Fatalf("%s: %v, want an error with %q", q, err, want)
	}
}
