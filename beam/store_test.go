package beam

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/ldpsql/ldpsql/client"
	"github.com/ldpsql/ldpsql/internal/rowfile"
)

// s3Server starts an S3 server on loopback (gofakes3, the one Beam's own S3 file system is tested
// against) with the given buckets, and points the AWS SDK of this process at it through the
// variables a user sets for any S3-compatible store. The SDK talks to it over HTTP as to AWS.
func s3Server(t *testing.T, buckets ...string) {
	t.Helper()
	backend := s3mem.New()
	for _, b := range buckets {
		if err := backend.CreateBucket(b); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	for k, v := range s3Env(srv.URL) {
		t.Setenv(k, v)
	}
}

// gcsServer starts a GCS server on loopback (fake-gcs-server, over its HTTP JSON API) with the given
// buckets, and points Google's storage client of this process at it (STORAGE_EMULATOR_HOST, which the
// client reads for any GCS emulator).
func gcsServer(t *testing.T, buckets ...string) {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", PublicHost: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	for _, b := range buckets {
		srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: b})
	}
	t.Setenv("STORAGE_EMULATOR_HOST", srv.URL())
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "none.json")) // no real credentials are looked for
}

// s3Env is the environment that points the AWS SDK at an S3 server at url, with no other source of
// configuration or credentials.
func s3Env(url string) map[string]string {
	return map[string]string{
		"AWS_ENDPOINT_URL_S3": url, "AWS_REGION": "us-east-1",
		"AWS_ACCESS_KEY_ID": "ldpsql", "AWS_SECRET_ACCESS_KEY": "secret",
		"AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull, "AWS_EC2_METADATA_DISABLED": "true",
	}
}

// putObject copies a local file to the object url through Beam's file system, as a user's upload.
func putObject(t *testing.T, local, url string) {
	t.Helper()
	raw, err := os.ReadFile(local)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fs, err := filesystem.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	if err := filesystem.Write(ctx, fs, url, raw); err != nil {
		t.Fatal(err)
	}
}

// objects lists the objects of a bucket under prefix, at any depth.
func objects(t *testing.T, prefix string) []string {
	t.Helper()
	ctx := context.Background()
	fs, err := filesystem.New(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	var all []string
	for _, p := range []string{"*", "*/*", "*/*/*"} {
		got, err := fs.List(ctx, strings.TrimSuffix(prefix, "/")+"/"+p)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, got...)
	}
	slices.Sort(all)
	return all
}

// A job reads its files from a bucket and writes its releases to another: Parquet and CSV parts in, a
// bad row in each, over S3's and GCS's protocols on loopback. The releases come out in place with their
// metadata, the bad rows are named by their objects' URLs, nothing is left in the staging prefix, a
// second job into the same prefix is refused before it runs, and a killed job's staged objects are
// replaced by its rerun.
func TestObjectStorePaths(t *testing.T) {
	t.Run("s3", func(t *testing.T) {
		s3Server(t, "lake", "exports")
		objectStoreJobs(t, "s3")
	})
	t.Run("gs", func(t *testing.T) {
		gcsServer(t, "lake", "exports")
		objectStoreJobs(t, "gs")
	})
}

func objectStoreJobs(t *testing.T, scheme string) {
	u := func(path string) string { return scheme + "://" + path }
	rows, labels := wdbc(t)
	mech := pcaFile(t, rows[:300])
	dir := t.TempDir()
	db := duck(t)
	writeCSV(t, filepath.Join(dir, "p0.csv"), rows[300:450], labels[300:450], 1, 1)
	toParquet(t, db, filepath.Join(dir, "p0.csv"), filepath.Join(dir, "part-0.parquet"), 30,
		"CASE id WHEN 7 THEN list_transform(f, x -> CAST('nan' AS FLOAT)) ELSE f END", "y")
	writeCSV(t, filepath.Join(dir, "part-1.csv"), rows[450:569], labels[450:569], 151, 1)
	setCSVCell(t, filepath.Join(dir, "part-1.csv"), 3, 1, "abc")
	putObject(t, filepath.Join(dir, "part-0.parquet"), u("lake/rows/part-0.parquet"))
	putObject(t, filepath.Join(dir, "part-1.csv"), u("lake/rows/part-1.csv"))
	putObject(t, filepath.Join(dir, "p0.csv"), u("lake/elsewhere/p0.csv")) // not matched

	spec := Spec{Mechanism: mech, Eps: 4, Label: "y", K: 2, Lambda: 0.7}
	none := Job{In: u("lake/rows/none-*"), Cols: Columns{ID: "id", Label: "y"}, Spec: spec, Out: Output{Dir: u("exports/none")}}
	if _, err := Run(context.Background(), none); err == nil || err.Error() != "no object matches "+u("lake/rows/none-*") {
		t.Errorf("a glob that matches no object: %v", err)
	}
	job := Job{In: u("lake/rows/part-*"), Cols: Columns{ID: "id", Label: "y"}, Spec: spec, Out: Output{Dir: u("exports/job1/")}}
	sum, err := Run(context.Background(), job)
	if err != nil {
		t.Fatal(err, objects(t, u("exports")))
	}
	good := 150 + 119 - 2
	if sum.Rows != good || sum.Bad != 2 || !slices.Equal(sum.Files, []string{u("exports/job1/releases.parquet")}) ||
		sum.BadFile != u("exports/job1/bad_rows.jsonl") {
		t.Fatalf("summary %+v: want %d rows in %s, 2 bad", sum, good, u("exports/job1/releases.parquet"))
	}
	want := []string{u("exports/job1/_SUMMARY.json"), u("exports/job1/bad_rows.jsonl"), u("exports/job1/releases.parquet")}
	if got := objects(t, u("exports")); !slices.Equal(got, want) {
		t.Errorf("objects in the output bucket: %v, want %v (nothing staged left)", got, want)
	}

	local, done, err := fetch(context.Background(), u("exports/job1/bad_rows.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	bad, _ := os.ReadFile(local)
	done()
	for _, w := range []string{u(`lake/rows/part-0.parquet row 7: feature 1 is NaN`), u(`lake/rows/part-1.csv line 4, column f1: \"abc\" is not a number`)} {
		if !strings.Contains(string(bad), w) {
			t.Errorf("bad rows %s: want %s", bad, w)
		}
	}
	if _, err := os.Stat(local); !os.IsNotExist(err) {
		t.Errorf("the local copy of an object is left: %v", err)
	}

	local, done, err = fetch(context.Background(), sum.Files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if got := readReleases(t, local); len(got) != good {
		t.Errorf("%d distinct ids released, want %d", len(got), good)
	}
	src, err := rowfile.Open(local)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	metaRaw, _, err := src.Metadata()
	var meta client.Meta
	if err != nil || json.Unmarshal(metaRaw, &meta) != nil || meta.Rows != good || meta.Mechanism != "pca4" || meta.EpsX != 0.7*4 {
		t.Errorf("the releases' metadata %s (%v)", metaRaw, err)
	}

	if _, err := Run(context.Background(), job); err == nil || !strings.Contains(err.Error(), u("exports/job1/ already holds")) {
		t.Errorf("a second job into %s: %v", u("exports/job1/"), err)
	}
	// A job id's staged objects are its own: a rerun of a killed try replaces them, another job's are refused.
	putObject(t, filepath.Join(dir, "p0.csv"), u("exports/job2/")+StagingDir+"/releases.parquet")
	writeFile(context.Background(), u("exports/job2/")+StagingDir+"/"+jobFile, []byte("killed"))
	other := job
	other.Out.Dir, other.ID = u("exports/job2"), "another"
	if _, err := Run(context.Background(), other); err == nil || !strings.Contains(err.Error(), "already holds "+StagingDir) {
		t.Errorf("a job into another's staging prefix: %v", err)
	}
	other.ID = "killed"
	if sum, err := Run(context.Background(), other); err != nil || sum.Rows != good {
		t.Errorf("the killed job's rerun: %+v, %v", sum, err)
	}
	// filepath.Dir of a URL is a local path ("s3:/exports/…"): nothing may be made there.
	if _, err := os.Stat(scheme + ":"); !os.IsNotExist(err) {
		t.Errorf("a local directory %s: was made: %v", scheme, err)
	}
	if got := objects(t, u("exports/job2")); len(got) != 3 || slices.ContainsFunc(got, func(o string) bool { return strings.Contains(o, StagingDir) }) {
		t.Errorf("after the rerun: %v", got)
	}
}

// TestObjectStoreConfigErrors: an S3 path with the AWS SDK misconfigured is an error that says what to
// set, not the SDK's "Invalid region" on every request, nor a panic in Beam's S3 file system (which it
// raised for a profile that does not exist).
func TestObjectStoreConfigErrors(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no region", map[string]string{"AWS_REGION": "", "AWS_DEFAULT_REGION": ""}, "set AWS_REGION"},
		{"unknown profile", map[string]string{"AWS_PROFILE": "no-such-profile"}, "AWS_PROFILE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s3Server(t, "lake")
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			for _, op := range []func() error{
				func() error { _, err := readFile(ctx, "s3://lake/x.csv"); return err },
				func() error { _, err := countMatches(ctx, "s3://lake/*.csv"); return err },
				func() error { return writeFile(ctx, "s3://lake/out/x.csv", []byte("a\n")) },
			} {
				err := op()
				if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "s3://lake/") {
					t.Errorf("got %v, want an error naming the path and saying %q", err, c.want)
				}
			}
		})
	}
}
