package engine

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestJobs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.duckdb")
	e := openT(t, path)
	ctx := context.Background()
	ok, err := e.Jobs.Start("test", "t1", []byte(`{"a":1}`), "root", func(ctx context.Context, report func(JobProgress)) error {
		report(JobProgress{Epoch: 1, Epochs: 2, Loss: 0.5, RowsPerS: 100, ETA: time.Second})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	fail, _ := e.Jobs.Start("test", "t2", nil, "root", func(context.Context, func(JobProgress)) error { return errors.New("boom") })
	started := make(chan struct{})
	slow, _ := e.Jobs.Start("test", "t3", nil, "root", func(ctx context.Context, _ func(JobProgress)) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})
	<-started
	if err := e.Jobs.Cancel(slow); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int64]string{ok: JobSucceeded, fail: JobFailed, slow: JobCancelled} {
		job, err := e.Jobs.Wait(ctx, id)
		if err != nil || job.State != want {
			t.Fatalf("job %d: %+v %v, want %s", id, job, err, want)
		}
	}
	if job, _ := e.Jobs.Get(ctx, ok); job.Epoch != 1 || job.Loss != 0.5 || job.Finished == nil {
		t.Fatalf("progress not recorded: %+v", job)
	}
	if job, _ := e.Jobs.Get(ctx, fail); job.Error != "boom" {
		t.Fatalf("error not recorded: %+v", job)
	}
	if err := e.Jobs.Cancel(ok); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Fatalf("cancel finished job: %v", err)
	}
	if _, err := e.Jobs.Get(ctx, 9999); !errors.Is(err, ErrNoJob) {
		t.Fatalf("unknown job: %v", err)
	}
	// Jobs are readable from SQL.
	if got := rowsString(mustQuery(t, e, "SELECT id, state FROM ldpsql_catalog.ldp_jobs ORDER BY id")); !strings.Contains(got, "succeeded") || !strings.Contains(got, "cancelled") {
		t.Fatalf("ldp_jobs: %q", got)
	}
	// Closing the engine cancels a running job.
	running := make(chan struct{})
	last, _ := e.Jobs.Start("test", "t4", nil, "root", func(ctx context.Context, _ func(JobProgress)) error {
		close(running)
		<-ctx.Done()
		return ctx.Err()
	})
	<-running
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// A job still marked running when the engine opens (the process was killed) is marked failed.
	e = openT(t, path)
	defer e.Close()
	if job, _ := e.Jobs.Get(ctx, last); job.State != JobCancelled || !strings.Contains(job.Error, "server stopped") {
		t.Fatalf("job at close: %+v", job)
	}
	if _, err := e.DuckDB.Exec(`UPDATE ldpsql_catalog.ldp_jobs SET state = 'running', finished = NULL WHERE id = ?`, last); err != nil {
		t.Fatal(err)
	}
	e.Close()
	e = openT(t, path)
	if job, _ := e.Jobs.Get(ctx, last); job.State != JobFailed || !strings.Contains(job.Error, "interrupted") {
		t.Fatalf("job after a crash: %+v", job)
	}
}

// A job records warnings beside its progress, readable from SQL; a file made before the warning column
// existed gains it when it is opened.
func TestJobWarnings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.duckdb")
	e := openT(t, path)
	// The file as an older ldpsql left it: no warning column.
	if _, err := e.DuckDB.Exec(`ALTER TABLE ldpsql_catalog.ldp_jobs DROP COLUMN warning`); err != nil {
		t.Fatal(err)
	}
	e.Close()
	e = openT(t, path)
	defer e.Close()
	ctx := context.Background()
	id, err := e.Jobs.Start("test", "t1", nil, "root", func(ctx context.Context, report func(JobProgress)) error {
		report(JobProgress{Epoch: 1, Epochs: 2, Loss: 0.5})
		report(JobProgress{Warning: "collapse: only 1 of 8"})
		report(JobProgress{Warning: "second"})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	job, err := e.Jobs.Wait(ctx, id)
	if err != nil || job.State != JobSucceeded || job.Warning != "collapse: only 1 of 8; second" || job.Epoch != 1 || job.Loss != 0.5 {
		t.Fatalf("job: %+v %v", job, err)
	}
	if got := rowsString(mustQuery(t, e, "SELECT warning FROM ldpsql_catalog.ldp_jobs")); !strings.Contains(got, "collapse: only 1 of 8") {
		t.Fatalf("ldp_jobs.warning from SQL: %q", got)
	}
	other, _ := e.Jobs.Start("test", "t2", nil, "root", func(context.Context, func(JobProgress)) error { return nil })
	if job, _ := e.Jobs.Wait(ctx, other); job.Warning != "" {
		t.Fatalf("a job without warnings has %q", job.Warning)
	}
}
