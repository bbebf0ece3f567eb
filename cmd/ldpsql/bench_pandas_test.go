package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Without python3, or with Python but without its packages, the pandas benchmark says what is missing
// and how to install it (errPandasMissing), and the bench report goes on without it. When the python3
// on PATH lacks them and Debian's /usr/bin/python3 has them, it runs with the latter.
func TestBenchPandasSaysWhatIsMissing(t *testing.T) {
	defer func(p []string) { pandasPythons = p }(pandasPythons)
	empty := t.TempDir()
	t.Setenv("PATH", empty)
	pandasPythons = []string{"python3", filepath.Join(empty, "python3")}
	err := benchPandas("127.0.0.1:1", nil, 10)
	if !errors.Is(err, errPandasMissing) || !strings.Contains(err.Error(), "no python3 (looked for python3 and "+empty) {
		t.Errorf("without python3: %v", err)
	}

	// A python3 that starts without its site packages (-S) finds none of the three.
	real := ""
	for _, p := range []string{"/usr/bin/python3", "/bin/python3"} {
		if _, err := os.Stat(p); err == nil {
			real = p
			break
		}
	}
	if real == "" {
		t.Skip("no /usr/bin/python3 to wrap")
	}
	bare := t.TempDir()
	wrapper := filepath.Join(bare, "python3")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\nexec "+real+" -S \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bare+string(os.PathListSeparator)+"/usr/bin:/bin")
	pandasPythons = []string{"python3"}
	err = benchPandas("127.0.0.1:1", nil, 10)
	if !errors.Is(err, errPandasMissing) || !strings.Contains(err.Error(), wrapper+": missing Python packages: python3-pandas") ||
		!strings.Contains(err.Error(), "apt-get install -y") {
		t.Errorf("without the packages: %v", err)
	}

	// The bare python3 first, then the real one: with the packages there, the benchmark runs with it
	// (and fails here only for want of a server at 127.0.0.1:1).
	if exec.Command(real, "-c", "import pandas, sqlalchemy, pymysql").Run() != nil {
		t.Skipf("%s lacks pandas, sqlalchemy or pymysql (scripts/test.sh installs them)", real)
	}
	pandasPythons = []string{"python3", real}
	err = benchPandas("127.0.0.1:1", nil, 10)
	if err == nil || errors.Is(err, errPandasMissing) || !strings.Contains(err.Error(), "pandas to_sql with "+real) {
		t.Errorf("with %s after a bare python3: %v", real, err)
	}
}
