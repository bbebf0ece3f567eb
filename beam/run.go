package beam

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/dataflow"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/flink"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/spark"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal"
)

// Job is a whole privatisation job: the files In matches, released with Spec, written to Out.
type Job struct {
	In   string
	Cols Columns
	Spec Spec
	Out  Output
	// Runner is "prism" (in process, the default), "flink", "spark" or "universal"; any but prism
	// needs Endpoint, a job server's host:port, and runs its workers as EnvironmentType says
	// (DOCKER, PROCESS, LOOPBACK or EXTERNAL; Beam's default is DOCKER).
	Runner, Endpoint, EnvironmentType string
	// From reads the rows from a table on an ldpsql server instead of In's files (db.go); To writes
	// the releases into a new table there instead of files, Out.Dir then holding only the bad rows
	// and the summary (a new temporary directory when it is ""). To needs From: releases made from
	// files go into a server with ldpsql import-releases.
	From *DBSource
	To   *DBSink
	// ID names the job (letters, digits and _, at most 40; a new random one when ""): a protected
	// source's charge batches are ID/p<part>/b<n>, so a rerun of a killed job with the same ID over
	// the same rows is charged each unit once per release, and replaces what the killed try staged.
	ID string
}

var jobIDRE = regexp.MustCompile(`^[A-Za-z0-9_]{1,40}$`)

// NewJobID returns a new random job id.
func NewJobID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Pipeline builds the job's pipeline: ReadAndPrivatize, WriteReleases, with the releases in batches
// (batches.go).
func (j Job) Pipeline() *beam.Pipeline {
	p, s := beam.NewPipelineWithRoot()
	rel, bad := readAndPrivatizeBatches(s, j.In, j.Cols, j.Spec)
	out := j.Out
	if out.ID == nil && j.Cols.ID != "" {
		out.ID = []string{j.Cols.ID}
	}
	writeReleases(s, rel, bad, nil, j.Spec, out)
	return p
}

// Run checks the job, runs its pipeline on its runner and returns what it committed. The output
// directory must hold no releases yet; nothing is final in it until the job's commit.
func Run(ctx context.Context, j Job) (Summary, error) {
	if err := checkRunner(j.Runner); err != nil {
		return Summary{}, err
	}
	if _, err := j.Spec.Releaser(); err != nil {
		return Summary{}, err
	}
	if j.ID == "" {
		j.ID = NewJobID()
	} else if !jobIDRE.MatchString(j.ID) {
		return Summary{}, fmt.Errorf("job id %q: want letters, digits and _, at most 40", j.ID)
	}
	if j.To != nil && j.From == nil {
		return Summary{}, fmt.Errorf("a job writing to a server reads from one (--from-db); load releases made from files with ldpsql import-releases")
	}
	if j.Runner == "dataflow" && !isRemote(j.Out.Dir) {
		// Its workers write the summary (and the releases) where this process then reads them.
		return Summary{}, fmt.Errorf("runner dataflow: --out must be a gs:// (or s3://) prefix, not %q: Dataflow's workers cannot write this machine's files", j.Out.Dir)
	}
	if j.Runner == "dataflow" && j.From == nil && !isRemote(j.In) {
		return Summary{}, fmt.Errorf("runner dataflow: --in must be gs:// (or s3://) objects, not %q: Dataflow's workers cannot read this machine's files", j.In)
	}
	if j.Out.Dir == "" && j.To != nil {
		// The job's summary (and a bad_rows.jsonl) need a directory; the releases go to the server.
		removeKilledScratch(j.ID)
		dir, err := os.MkdirTemp("", "ldpsql-etl-"+j.ID+"-")
		if err != nil {
			return Summary{}, err
		}
		j.Out.Dir = dir
		defer removeScratchOutput(dir)
	}
	if j.Out.Dir == "" {
		return Summary{}, fmt.Errorf("no output directory")
	}
	if j.Cols.Label != j.Spec.Label {
		return Summary{}, fmt.Errorf("the label column is %q to read and %q to release", j.Cols.Label, j.Spec.Label)
	}
	var err error
	if !isRemote(j.Out.Dir) {
		if j.Out.Dir, err = filepath.Abs(j.Out.Dir); err != nil {
			return Summary{}, err
		}
	}
	if j.From == nil && isRemote(j.In) {
		// Said here rather than by the pipeline's first stage, in a runner's error.
		if n, err := countMatches(ctx, j.In); err != nil {
			return Summary{}, err
		} else if n == 0 {
			return Summary{}, fmt.Errorf("no object matches %s", j.In)
		}
	} else if j.From == nil && !isURL(j.In) {
		if j.In, err = filepath.Abs(j.In); err != nil {
			return Summary{}, err
		}
		// Said here rather than by the pipeline's first stage, in a runner's error.
		if m, err := filepath.Glob(j.In); err != nil {
			return Summary{}, fmt.Errorf("%s: %w", j.In, err)
		} else if len(m) == 0 && (j.Runner == "" || j.Runner == "prism") {
			return Summary{}, fmt.Errorf("no file matches %s", j.In)
		}
	}
	if err := checkOutput(j.Out.Dir, j.ID); err != nil {
		return Summary{}, err
	}
	staging := joinPath(j.Out.Dir, StagingDir)
	if err := mkdirAll(staging); err != nil {
		return Summary{}, err
	}
	if err := writeFile(ctx, joinPath(staging, jobFile), []byte(j.ID)); err != nil {
		return Summary{}, err
	}
	if !beam.Initialized() {
		// A program that runs jobs on a remote runner calls beam.Init first thing in main, so that
		// the same binary can serve as its workers; in process (Prism) this is enough.
		beam.Init()
	}
	var sink *sinkPlan
	err = j.plan(ctx, &sink)
	if err != nil {
		removeAll(context.WithoutCancel(ctx), staging)
		if sink != nil {
			dropStaging(*sink)
		}
		return Summary{}, err
	}
	var sum Summary
	if j.Runner == "dataflow" && dataflowTemplate() != "" {
		// Dataflow staged the job as a template to launch later: nothing ran, and the output prefix
		// is left as it was.
		if err := removeAll(ctx, staging); err != nil {
			return Summary{}, err
		}
		return Summary{Template: dataflowTemplate()}, nil
	}
	raw, err := readFile(ctx, joinPath(j.Out.Dir, SummaryFile))
	if err != nil {
		return sum, fmt.Errorf("the job ended without its summary: %w", err)
	}
	return sum, json.Unmarshal(raw, &sum)
}

// plan builds the job's pipeline (finding out about a server's source and creating the sink's
// staging table, *sink, first) and runs it.
func (j Job) plan(ctx context.Context, sink **sinkPlan) error {
	if j.From == nil {
		return j.run(ctx, j.Pipeline())
	}
	plan, parts, err := planSource(ctx, *j.From, j.Spec.Label, j.ID)
	if err != nil {
		return err
	}
	if j.To != nil {
		s, err := planSink(ctx, *j.To, j.Spec, plan.Key, fmt.Sprintf("ldpsql etl job %s from %s.%s", j.ID, plan.Database, plan.Table), j.ID)
		if err != nil {
			return err
		}
		*sink = &s
	}
	p, err := j.dbPipeline(plan, parts, *sink)
	if err != nil {
		return err
	}
	return j.run(ctx, p)
}

// run runs p on the job's runner.
func (j Job) run(ctx context.Context, p *beam.Pipeline) error {
	switch j.Runner {
	case "", "prism":
		// Prism runs its workers in loopback unless told otherwise.
		loopback := *jobopts.EnvironmentType == "" || jobopts.IsLoopback()
		return withoutLoopbackLeftovers(loopback, func() error {
			_, err := prism.Execute(ctx, p)
			return err
		})
	case "dataflow":
		// Beam's Dataflow runner reads its options (--project, --region, --staging_location, …) from
		// the command line's flags, given before the command. Its workers run in its SDK container
		// (Prism in this process sets the environment to loopback for good: unset it for this job).
		defer func(env string) { *jobopts.EnvironmentType = env }(*jobopts.EnvironmentType)
		*jobopts.EnvironmentType = j.EnvironmentType
		defer selfAsWorker()()
		return withoutLoopbackLeftovers(false, func() error {
			_, err := beam.Run(ctx, "dataflow", p)
			return err
		})
	case "flink", "spark", "universal":
		if j.Endpoint == "" {
			return fmt.Errorf("runner %s needs a job server's endpoint", j.Runner)
		}
		// Beam reads these from its global flags; they are set for this job only, so that a later
		// job of this process on Prism is not sent to this one's job server.
		defer func(endpoint, env string) {
			*jobopts.Endpoint, *jobopts.EnvironmentType = endpoint, env
		}(*jobopts.Endpoint, *jobopts.EnvironmentType)
		// The job's environment, Beam's default (DOCKER) when it names none: not the loopback an
		// earlier job on Prism in this process set.
		*jobopts.Endpoint, *jobopts.EnvironmentType = j.Endpoint, j.EnvironmentType
		defer selfAsWorker()()
		return withoutLoopbackLeftovers(jobopts.IsLoopback(), func() error {
			_, err := beam.Run(ctx, j.Runner, p)
			return err
		})
	default:
		return checkRunner(j.Runner)
	}
}

// removeScratchOutput removes the directory a job writing to a server made for its summary, once Run
// has read it; a directory that holds the job's bad_rows.jsonl stays, as the summary names that file.
func removeScratchOutput(dir string) {
	os.Remove(filepath.Join(dir, SummaryFile))
	os.RemoveAll(filepath.Join(dir, StagingDir))
	os.Remove(dir) // only if empty
}

// removeKilledScratch removes the scratch directories that killed tries of job left (a killed process
// cannot remove its own): those named for it whose staging directory it holds.
func removeKilledScratch(job string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "ldpsql-etl-"+job+"-*"))
	for _, d := range dirs {
		if raw, err := os.ReadFile(filepath.Join(d, StagingDir, jobFile)); err == nil && string(raw) == job {
			os.RemoveAll(d)
		}
	}
}

// checkRunner refuses a runner a job cannot run on, before anything is read or written.
func checkRunner(runner string) error {
	switch runner {
	case "", "prism", "flink", "spark", "universal", "dataflow":
		return nil
	}
	return fmt.Errorf("runner %q: want prism, flink, spark, universal or dataflow", runner)
}

func isURL(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == ':':
			return i > 1 && len(s) > i+2 && s[i+1:i+3] == "//"
		case !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
			return false
		}
	}
	return false
}

// dataflowTemplate is the Dataflow runner's --template_location: where it stages the job as a template
// instead of running it.
func dataflowTemplate() string {
	if f := flag.Lookup("template_location"); f != nil {
		return f.Value.String()
	}
	return ""
}

// selfAsWorker makes this binary the workers' (Beam's --worker_binary) when none is named, and returns
// what restores the flag. A remote runner's SDK container runs it with --worker; Beam would otherwise
// compile a worker from the source without cgo, which DuckDB needs. Elsewhere than linux/amd64,
// --worker_binary names a build for the workers.
func selfAsWorker() (restore func()) {
	old := *jobopts.WorkerBinary
	if old == "" && runtime.GOOS == "linux" && runtime.GOARCH == "amd64" {
		if self, err := os.Executable(); err == nil {
			*jobopts.WorkerBinary = self
		}
	}
	return func() { *jobopts.WorkerBinary = old }
}
