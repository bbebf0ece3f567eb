package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func runCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestDemo(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.duckdb")
	code, out, errOut := runCLI(t, "", "demo", "--db", db)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// The true frequencies of WDBC are fixed: 212/569 malignant, 357/569 benign.
	for _, want := range []string{"Loaded 569 rows", "| malignant (0) | 0.373", "| benign (1)    | 0.627", "RR_FREQUENCY(diagnosis, 1, 2, class)"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	// The debiased estimate must be within 5 standard errors of the truth.
	row := regexp.MustCompile(`\| malignant \(0\) \| 0\.373 \| [0-9.]+ +\| ([0-9.]+) +\| ([0-9.]+)`).FindStringSubmatch(out)
	if row == nil {
		t.Fatalf("no malignant row:\n%s", out)
	}
	est, _ := strconv.ParseFloat(row[1], 64)
	se, _ := strconv.ParseFloat(row[2], 64)
	if d := est - 212.0/569; d > 5*se || d < -5*se {
		t.Errorf("debiased %v, true 0.373, s.e. %v", est, se)
	}
	// The demo can run again on the same file, and the data is there for `ldpsql sql`.
	if code, _, errOut := runCLI(t, "", "demo", "--db", db, "--eps", "2"); code != 0 {
		t.Fatalf("second run: exit %d: %s", code, errOut)
	}
	code, out, errOut = runCLI(t, "", "sql", "--db", db, "-e", "SELECT COUNT(*) AS n FROM wdbc; SELECT COUNT(*) AS m FROM wdbc_released")
	if code != 0 || !strings.Contains(out, "| 569 |") {
		t.Fatalf("sql after demo: exit %d, %s %s", code, out, errOut)
	}
}

// The README's first command: the demo on the default ./ldpsql.duckdb.
func TestDemoDefaultPath(t *testing.T) {
	t.Chdir(t.TempDir())
	if code, out, errOut := runCLI(t, "", "demo"); code != 0 || !strings.Contains(out, "Loaded 569 rows") {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	if _, err := os.Stat("ldpsql.duckdb"); err != nil {
		t.Fatal(err)
	}
}

func TestSQLCommand(t *testing.T) {
	db := filepath.Join(t.TempDir(), "t.duckdb")
	code, _, errOut := runCLI(t, "", "sql", "--db", db, "-e", "CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(10)); INSERT INTO t VALUES (1, 'a;b')")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	code, out, _ := runCLI(t, "SELECT s FROM t;\nSELECT FLIP_LABEL(7, 1, 2);\nSELECT\n  id FROM t;\nexit\n", "sql", "--db", db)
	if code != 0 || !strings.Contains(out, "| a;b |") || !strings.Contains(out, "| 1  |") {
		t.Fatalf("shell: exit %d, output:\n%s", code, out)
	}
	code, _, errOut = runCLI(t, "", "sql", "--db", db, "-e", "SELECT FLIP_LABEL(7, 1, 2)")
	if code != 1 || !strings.Contains(errOut, "argument y = 7") {
		t.Fatalf("bad input: exit %d, stderr %s", code, errOut)
	}
	// A bare path is refused, not ignored for ./ldpsql.duckdb (and the -e after it run as a shell).
	wd := t.TempDir()
	t.Chdir(wd)
	code, _, errOut = runCLI(t, "", "sql", db, "-e", "SELECT 1")
	if code == 0 || !strings.Contains(errOut, "unexpected argument") || !strings.Contains(errOut, "--db FILE") {
		t.Fatalf("bare path: exit %d, stderr %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(wd, "ldpsql.duckdb")); err == nil {
		t.Fatal("a bare path opened ./ldpsql.duckdb")
	}
}

func TestCommandLine(t *testing.T) {
	if code, out, _ := runCLI(t, "", "version"); code != 0 || !strings.HasPrefix(out, "ldpsql ") {
		t.Errorf("version: %d %q", code, out)
	}
	if code, _, errOut := runCLI(t, "", "frobnicate"); code != 2 || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: %d %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "", "serve", "--help"); code != 0 || !strings.Contains(errOut, "Examples:") {
		t.Errorf("serve --help: %d %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "", "demo", "--db", ":memory:", "--eps", "-1"); code != 1 || !strings.Contains(errOut, "--eps -1") {
		t.Errorf("bad eps: %d %q", code, errOut)
	}
	if code, _, _ := runCLI(t, ""); code != 2 {
		t.Errorf("no command: %d", code)
	}
}

func TestDatasetLoad(t *testing.T) {
	db := filepath.Join(t.TempDir(), "d.duckdb")
	if code, out, errOut := runCLI(t, "", "dataset", "load", "breast-cancer", "--db", db); code != 0 || !strings.Contains(out, "loaded 569") {
		t.Fatalf("breast-cancer: %d %s %s", code, out, errOut)
	}
	code, out, _ := runCLI(t, "", "sql", "--db", db, "-e", "SELECT COUNT(*), SUM(label), MIN(LENGTH(features)) FROM breast_cancer")
	if code != 0 || !strings.Contains(out, "| 569      | 357        | 120 ") {
		t.Fatalf("table: %s", out)
	}
	t.Setenv("LDPSQL_DATA", filepath.Join(t.TempDir(), "nothing-here"))
	if _, err := os.Stat("/usr/share/datasets/fashion-mnist"); err == nil {
		t.Skip("the Debian package is installed, so Fashion-MNIST is always found")
	}
	code, _, errOut := runCLI(t, "", "dataset", "load", "fashion-mnist", "--db", db)
	if code != 1 || !strings.Contains(errOut, "/usr/share/datasets/fashion-mnist") || !strings.Contains(errOut, "nothing-here") || !strings.Contains(errOut, "apt-get install dataset-fashion-mnist") {
		t.Fatalf("missing data: %d %s", code, errOut)
	}
	if code, _, _ := runCLI(t, "", "dataset", "load", "cifar"); code != 1 {
		t.Fatal("unknown data set accepted")
	}
}
