package beam

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
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
}

// Pipeline builds the job's pipeline: ReadRows, PrivatizeWithErrors, WriteReleases.
func (j Job) Pipeline() *beam.Pipeline {
	p, s := beam.NewPipelineWithRoot()
	rows := ReadRows(s, j.In, j.Cols, j.Spec)
	rel, bad := PrivatizeWithErrors(s, rows, j.Spec)
	out := j.Out
	if out.ID == "" {
		out.ID = j.Cols.ID
	}
	WriteReleases(s, rel, bad, j.Spec, out)
	return p
}

// Run checks the job, runs its pipeline on its runner and returns what it committed. The output
// directory must hold no releases yet; nothing is final in it until the job's commit.
func Run(ctx context.Context, j Job) (Summary, error) {
	if _, err := j.Spec.Releaser(); err != nil {
		return Summary{}, err
	}
	if j.Out.Dir == "" {
		return Summary{}, fmt.Errorf("no output directory")
	}
	if j.Cols.Label != j.Spec.Label {
		return Summary{}, fmt.Errorf("the label column is %q to read and %q to release", j.Cols.Label, j.Spec.Label)
	}
	var err error
	if j.Out.Dir, err = filepath.Abs(j.Out.Dir); err != nil {
		return Summary{}, err
	}
	if !isURL(j.In) {
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
	if err := CheckOutput(j.Out.Dir); err != nil {
		return Summary{}, err
	}
	if !beam.Initialized() {
		// A program that runs jobs on a remote runner calls beam.Init first thing in main, so that
		// the same binary can serve as its workers; in process (Prism) this is enough.
		beam.Init()
	}
	p := j.Pipeline()
	switch j.Runner {
	case "", "prism":
		_, err = prism.Execute(ctx, p)
	case "flink", "spark", "universal":
		if j.Endpoint == "" {
			return Summary{}, fmt.Errorf("runner %s needs a job server's endpoint", j.Runner)
		}
		*jobopts.Endpoint = j.Endpoint
		if j.EnvironmentType != "" {
			*jobopts.EnvironmentType = j.EnvironmentType
		}
		if *jobopts.WorkerBinary == "" && runtime.GOOS == "linux" && runtime.GOARCH == "amd64" {
			// This binary is its own worker (the SDK container runs it with --worker); elsewhere
			// Beam would compile one from the source, or --worker_binary names it.
			if self, err := os.Executable(); err == nil {
				*jobopts.WorkerBinary = self
			}
		}
		_, err = beam.Run(ctx, j.Runner, p)
	default:
		return Summary{}, fmt.Errorf("runner %q: want prism, flink, spark or universal", j.Runner)
	}
	if err != nil {
		os.RemoveAll(filepath.Join(j.Out.Dir, StagingDir))
		return Summary{}, err
	}
	var sum Summary
	raw, err := os.ReadFile(filepath.Join(j.Out.Dir, SummaryFile))
	if err != nil {
		return sum, fmt.Errorf("the job ended without its summary: %w", err)
	}
	return sum, json.Unmarshal(raw, &sum)
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
