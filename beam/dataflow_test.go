package beam

import (
	"context"
	"flag"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// setFlags sets Beam's command-line flags for a test, and restores them after it.
func setFlags(t *testing.T, kv map[string]string) {
	t.Helper()
	for k, v := range kv {
		f := flag.Lookup(k)
		if f == nil {
			t.Fatalf("no flag %s", k)
		}
		old := f.Value.String()
		if err := flag.Set(k, v); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { flag.Set(k, old) })
	}
}

// A job for Dataflow goes through everything but the submission itself, which needs Google Cloud: with
// --template_location, Beam's Dataflow runner translates the pipeline into a Dataflow job, stages the
// worker binary and the pipeline in --staging_location and writes the job there as a template, here
// into a GCS server on loopback. Local input or output paths, which Dataflow's workers cannot reach,
// are refused first.
func TestDataflowJobStagedAsTemplate(t *testing.T) {
	if testing.Short() {
		t.Skip("stages the test binary as the workers'")
	}
	gcsServer(t, "lake", "exports", "staging")
	rows, labels := wdbc(t)
	dir := t.TempDir()
	writeCSV(t, filepath.Join(dir, "rows.csv"), rows, labels, 0, 1)
	putObject(t, filepath.Join(dir, "rows.csv"), "gs://lake/rows/part-0.csv")
	job := Job{In: "gs://lake/rows/part-*.csv", Cols: Columns{ID: "id", Label: "y"}, Spec: Spec{Mechanism: pcaFile(t, rows), Eps: 4, Label: "y", K: 2, Lambda: 0.7},
		Out: Output{Dir: filepath.Join(dir, "out")}, Runner: "dataflow"}
	if _, err := Run(context.Background(), job); err == nil || !strings.Contains(err.Error(), "runner dataflow: --out must be a gs:// (or s3://) prefix") {
		t.Errorf("a local --out on Dataflow: %v", err)
	}
	local := job
	local.In, local.Out.Dir = filepath.Join(dir, "rows.csv"), "gs://exports/df"
	if _, err := Run(context.Background(), local); err == nil || !strings.Contains(err.Error(), "runner dataflow: --in must be gs:// (or s3://) objects") {
		t.Errorf("a local --in on Dataflow: %v", err)
	}

	setFlags(t, map[string]string{"project": "ldpsql-test", "region": "europe-west1", "staging_location": "gs://staging/beam",
		"template_location": "gs://staging/templates/privatize.json"})
	job.Out.Dir = "gs://exports/df"
	sum, err := Run(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Template != "gs://staging/templates/privatize.json" || sum.Rows != 0 {
		t.Errorf("summary %+v, want the template and no rows", sum)
	}
	staged := objects(t, "gs://staging")
	if !slices.Contains(staged, "gs://staging/templates/privatize.json") ||
		!slices.ContainsFunc(staged, func(o string) bool {
			return strings.HasPrefix(o, "gs://staging/beam/") && strings.HasSuffix(o, "/worker")
		}) {
		t.Errorf("staged: %v; want the template and the worker binary", staged)
	}
	raw, err := readFile(context.Background(), "gs://staging/templates/privatize.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"projectId":"ldpsql-test"`, `"region":"europe-west1"`, `"pipelineUrl":"gs://staging/beam/`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("the template lacks %s: %.2000s", want, raw)
		}
	}
	// The pipeline it points at (a Beam pipeline proto) is this job's.
	i := slices.IndexFunc(staged, func(o string) bool { return strings.HasSuffix(o, "/model") })
	if i < 0 {
		t.Fatalf("no pipeline staged: %v", staged)
	}
	model, err := readFile(context.Background(), staged[i])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ldpsql.ReadAndPrivatize", "ldpsql.WriteReleases"} {
		if !strings.Contains(string(model), want) {
			t.Errorf("the staged pipeline lacks %s", want)
		}
	}
	if got := objects(t, "gs://exports"); len(got) != 0 {
		t.Errorf("a staged template left objects in the output prefix: %v", got)
	}
}
