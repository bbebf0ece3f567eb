package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Without python3, or with Python but without its packages, the pandas benchmark says what is missing
// and how to install it (errPandasMissing), and the bench report goes on without it.
func TestBenchPandasSaysWhatIsMissing(t *testing.T) {
	empty := t.TempDir()
	t.Setenv("PATH", empty)
	err := benchPandas("127.0.0.1:1", nil, 10)
	if !errors.Is(err, errPandasMissing) || !strings.Contains(err.Error(), "python3 is not on PATH") {
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
	if err := os.WriteFile(filepath.Join(bare, "python3"), []byte("#!/bin/sh\nexec "+real+" -S \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bare+string(os.PathListSeparator)+"/usr/bin:/bin")
	err = benchPandas("127.0.0.1:1", nil, 10)
	if !errors.Is(err, errPandasMissing) || !strings.Contains(err.Error(), "python3-pandas") || !strings.Contains(err.Error(), "apt-get install -y") {
		t.Errorf("without the packages: %v", err)
	}
}
