package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pythonModules are what testdata/python_clients.py imports; scripts/test.sh installs them from Debian
// (python3-pymysql, python3-sqlalchemy, python3-pandas, python3-mysqldb).
var pythonModules = []string{"pymysql", "sqlalchemy", "pandas", "MySQLdb"}

// pythonWithClients returns a python3 that imports pythonModules: the first python3 on PATH, else
// Debian's /usr/bin/python3 (where the packages go when PATH leads to another Python, e.g. pyenv's). It
// skips the test, or fails it under CI (the environment variable CI set), when there is none.
func pythonWithClients(t *testing.T) string {
	t.Helper()
	var tried []string
	for _, name := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(name)
		if err != nil {
			tried = append(tried, name+": not found")
			continue
		}
		out, err := exec.Command(path, "-c", "import "+strings.Join(pythonModules, ", ")).CombinedOutput()
		if err == nil {
			return path
		}
		tried = append(tried, path+": "+strings.TrimSpace(lastLine(string(out))))
	}
	msg := "no python3 with " + strings.Join(pythonModules, ", ") + " (" + strings.Join(tried, "; ") +
		"); scripts/test.sh installs python3-pymysql, python3-sqlalchemy and python3-pandas"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// Python analysts' clients against `ldpsql serve` (issue #18): pymysql's and MySQLdb's commit() and
// rollback() (which undoes inserts), SQLAlchemy's reflection, pooled connections and engine.begin() (committed, and rolled
// back by an exception), pandas' read_sql and to_sql through an engine and inside a transaction, and a
// 50,000-row to_sql → read_sql round trip, plain and through FLIP_LABEL. testdata/python_clients.py makes the checks and names the one that fails.
func TestPythonClients(t *testing.T) {
	python := pythonWithClients(t)
	s := startServer(t, filepath.Join(t.TempDir(), "data.duckdb"))
	host, port, _ := strings.Cut(s.addr, ":")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, filepath.Join("testdata", "python_clients.py"), host, port).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "all Python client checks passed") {
		t.Fatalf("python_clients.py: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "ok ") {
			t.Log(line)
		}
	}
}
