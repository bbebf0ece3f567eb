package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `ldpsql etl privatize` runs ldpsql-etl (Beam, on Prism in process) over a glob of Parquet files, and
// `ldpsql import-releases` takes its output as it takes ldpsql privatize's: the same metadata, checked
// against the registered mechanism.
func TestEtlPrivatizeThenImport(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ldpsql-etl")
	}
	f := newReleaseFixture(t)
	build := exec.Command("go", "build", "-o", filepath.Join(f.dir, "ldpsql-etl"), "github.com/ldpsql/ldpsql/cmd/ldpsql-etl")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building ldpsql-etl: %v\n%s", err, out)
	}
	t.Setenv("PATH", f.dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	in := filepath.Join(f.dir, "lake")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(f.list)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(in, "part-0.parquet"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(f.dir, "out")
	if got := mustCLI(t, "etl", "privatize", "--mechanism", f.mech, "--in", filepath.Join(in, "part-*.parquet"), "--id", "id", "--label", "y",
		"--k", "2", "--eps", "20", "--lambda", "0.5", "--out", out); !strings.Contains(got, `released 269 rows with "pca4" at ε = 20 (features 10, label 10)`) {
		t.Fatalf("etl privatize: %s", got)
	}
	if got := mustCLI(t, "import-releases", "--db", f.db, "--in", filepath.Join(out, "releases.parquet"), "--table", "from_beam"); !strings.Contains(got, `imported 269 releases of mechanism "pca4" into from_beam (ε_x 10, label by 2-RR at ε_y 10)`) {
		t.Fatalf("import-releases: %s", got)
	}
	if got := mustCLI(t, "sql", "--db", f.db, "-e", "SELECT COUNT(*) AS n, COUNT(DISTINCT id) AS ids FROM from_beam"); !strings.Contains(got, "| 269 | 269 |") {
		t.Errorf("the imported table:\n%s", got)
	}
}

// Without ldpsql-etl beside ldpsql or on PATH, ldpsql etl says how to build it.
func TestEtlWithoutItsBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	code, _, errOut := runCLI(t, "", "etl", "privatize", "--help")
	if code != 1 || !strings.Contains(errOut, "ldpsql-etl is not beside ldpsql nor on $PATH: build it with scripts/build.sh") {
		t.Errorf("exit %d: %s", code, errOut)
	}
}
