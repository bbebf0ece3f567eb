package main

import (
	"bytes"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// `ldpsql etl privatize` runs ldpsql-etl (Beam, on Prism in process) over a glob of Parquet files, and
// `ldpsql import-releases` takes its output as it takes ldpsql privatize's: the same metadata, checked
// against the registered mechanism.
func TestEtlPrivatizeThenImport(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ldpsql-etl")
	}
	f := newReleaseFixture(t)
	etlOnPath(t, f.dir)
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

// etlOnPath builds ldpsql-etl into dir and puts dir first on PATH, where ldpsql etl finds it.
func etlOnPath(t *testing.T, dir string) {
	t.Helper()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "ldpsql-etl"), "github.com/ldpsql/ldpsql/cmd/ldpsql-etl")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building ldpsql-etl: %v\n%s", err, out)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// `ldpsql etl privatize` reads its mechanism and rows from an S3 bucket and writes the releases to
// another, over the S3 protocol: the real ldpsql-etl against an S3 server on loopback (gofakes3, which
// Beam's own S3 file system is tested against), configured as a user configures the AWS SDK for any
// S3-compatible store. The releases it leaves in the bucket import as local ones do.
func TestEtlObjectStore(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ldpsql-etl")
	}
	f := newReleaseFixture(t)
	etlOnPath(t, f.dir)
	store := s3mem.New()
	for _, b := range []string{"lake", "exports"} {
		if err := store.CreateBucket(b); err != nil {
			t.Fatal(err)
		}
	}
	put := func(local, bucket, key string) {
		raw, err := os.ReadFile(local)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.PutObject(bucket, key, nil, bytes.NewReader(raw), int64(len(raw)), nil); err != nil {
			t.Fatal(err)
		}
	}
	put(f.mech, "lake", "models/pca4.ldpm")
	put(f.list, "lake", "rows/part-0.parquet")
	srv := httptest.NewServer(gofakes3.New(store).Server())
	defer srv.Close()
	for k, v := range map[string]string{"AWS_ENDPOINT_URL_S3": srv.URL, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "ldpsql",
		"AWS_SECRET_ACCESS_KEY": "secret", "AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull, "AWS_EC2_METADATA_DISABLED": "true"} {
		t.Setenv(k, v)
	}

	if got := mustCLI(t, "etl", "privatize", "--mechanism", "s3://lake/models/pca4.ldpm", "--in", "s3://lake/rows/part-*.parquet", "--id", "id",
		"--label", "y", "--k", "2", "--eps", "20", "--lambda", "0.5", "--out", "s3://exports/run1"); !strings.Contains(got, `released 269 rows with "pca4"`) ||
		!strings.Contains(got, "on prism: s3://exports/run1/releases.parquet") {
		t.Fatalf("etl privatize: %s", got)
	}
	list, err := store.ListBucket("exports", nil, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, c := range list.Contents {
		keys = append(keys, c.Key)
	}
	if want := []string{"run1/_SUMMARY.json", "run1/releases.parquet"}; !slices.Equal(keys, want) {
		t.Errorf("objects written: %v, want %v", keys, want)
	}
	obj, err := store.GetObject("exports", "run1/releases.parquet", nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(obj.Contents)
	obj.Contents.Close()
	if err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(f.dir, "releases.parquet")
	if err := os.WriteFile(local, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := mustCLI(t, "import-releases", "--db", f.db, "--in", local, "--table", "from_s3"); !strings.Contains(got, `imported 269 releases of mechanism "pca4" into from_s3 (ε_x 10, label by 2-RR at ε_y 10)`) {
		t.Fatalf("import-releases: %s", got)
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
