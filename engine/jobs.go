package engine

import (
	"context"
	gosql "database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Jobs runs long operations (training a mechanism or a classifier) in the background and records their
// progress in the catalog table ldp_jobs, which clients read from SQL while the job runs. A job that
// was running when the server stopped is marked failed when the engine next opens.
type Jobs struct {
	db *gosql.DB

	mu      sync.Mutex
	running map[int64]context.CancelFunc
	done    map[int64]chan struct{}
	wg      sync.WaitGroup
	closed  bool
}

const createJobsTable = `
CREATE SEQUENCE IF NOT EXISTS ` + CatalogSchema + `.ldp_job_ids;
CREATE TABLE IF NOT EXISTS ` + CatalogSchema + `.ldp_jobs (
	id BIGINT PRIMARY KEY,
	kind VARCHAR NOT NULL,
	target VARCHAR NOT NULL,
	state VARCHAR NOT NULL,
	epoch INTEGER,
	epochs INTEGER,
	loss DOUBLE,
	rows_per_s DOUBLE,
	eta_s DOUBLE,
	params VARCHAR,
	created_by VARCHAR NOT NULL,
	started TIMESTAMP NOT NULL,
	finished TIMESTAMP,
	error VARCHAR);
COMMENT ON COLUMN ` + CatalogSchema + `.ldp_jobs.params IS 'ldpsql:{"type":"json"}';
COMMENT ON COLUMN ` + CatalogSchema + `.ldp_jobs.error IS 'ldpsql:{"type":"text"}';
ALTER TABLE ` + CatalogSchema + `.ldp_jobs ADD COLUMN IF NOT EXISTS warning VARCHAR;
COMMENT ON COLUMN ` + CatalogSchema + `.ldp_jobs.warning IS 'ldpsql:{"type":"text"}';
`

// Job states.
const (
	JobRunning   = "running"
	JobSucceeded = "succeeded"
	JobFailed    = "failed"
	JobCancelled = "cancelled"
)

// Job is one row of ldp_jobs.
type Job struct {
	ID                   int64
	Kind, Target, State  string
	Epoch, Epochs        int
	Loss, RowsPerS, ETAS float64
	Params               json.RawMessage
	CreatedBy            string
	Started              time.Time
	Finished             *time.Time
	Error                string
	Warning              string // e.g. the encoder's diagnostics show collapse; the job may still succeed
}

// JobProgress is what a running job reports. A report with a Warning and no Epochs records only the
// warning (appended to earlier ones), leaving the progress columns as they are.
type JobProgress struct {
	Epoch, Epochs int
	Loss          float64
	RowsPerS      float64
	ETA           time.Duration
	Warning       string
}

// ErrNoJob is returned for an unknown job id.
var ErrNoJob = errors.New("no such job")

func newJobs(db *gosql.DB) (*Jobs, error) {
	j := &Jobs{db: db, running: map[int64]context.CancelFunc{}, done: map[int64]chan struct{}{}}
	// Whatever was running when the previous process stopped did not finish.
	_, err := db.Exec(`UPDATE `+CatalogSchema+`.ldp_jobs SET state = ?, finished = now(), error = ? WHERE state = ?`,
		JobFailed, "interrupted: the server stopped while the job was running; start it again", JobRunning)
	return j, err
}

// Start records a new job and runs it in the background. run receives a context cancelled by Cancel or
// by the engine closing, and a function to report progress.
func (j *Jobs) Start(kind, target string, params json.RawMessage, createdBy string,
	run func(ctx context.Context, report func(JobProgress)) error) (int64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return 0, errors.New("the engine is closing; no new jobs")
	}
	var id int64
	if err := j.db.QueryRow(`SELECT nextval('` + CatalogSchema + `.ldp_job_ids')`).Scan(&id); err != nil {
		return 0, err
	}
	if _, err := j.db.Exec(`INSERT INTO `+CatalogSchema+`.ldp_jobs (id, kind, target, state, params, created_by, started) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		id, kind, target, JobRunning, string(params), createdBy, time.Now().UTC()); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	j.running[id] = cancel
	done := make(chan struct{})
	j.done[id] = done
	j.wg.Add(1)
	go func() {
		defer j.wg.Done()
		defer close(done)
		err := run(ctx, func(p JobProgress) { j.progress(id, p) })
		state, msg := JobSucceeded, ""
		switch {
		case err != nil && ctx.Err() != nil:
			state, msg = JobCancelled, "cancelled"
			if j.isClosed() {
				msg = "cancelled: the server stopped"
			}
		case err != nil:
			state, msg = JobFailed, err.Error()
		}
		_, _ = j.db.Exec(`UPDATE `+CatalogSchema+`.ldp_jobs SET state = ?, finished = ?, error = ? WHERE id = ?`,
			state, time.Now().UTC(), nullString(msg), id)
		j.mu.Lock()
		delete(j.running, id)
		j.mu.Unlock()
		cancel()
	}()
	return id, nil
}

func (j *Jobs) progress(id int64, p JobProgress) {
	if p.Warning != "" {
		_, _ = j.db.Exec(`UPDATE `+CatalogSchema+`.ldp_jobs SET warning = CASE WHEN warning IS NULL THEN ? ELSE warning || '; ' || ? END WHERE id = ?`,
			p.Warning, p.Warning, id)
		if p.Epochs == 0 {
			return
		}
	}
	_, _ = j.db.Exec(`UPDATE `+CatalogSchema+`.ldp_jobs SET epoch = ?, epochs = ?, loss = ?, rows_per_s = ?, eta_s = ? WHERE id = ?`,
		p.Epoch, p.Epochs, p.Loss, p.RowsPerS, p.ETA.Seconds(), id)
}

func (j *Jobs) isClosed() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.closed
}

// Cancel stops a running job; it is then recorded as cancelled.
func (j *Jobs) Cancel(id int64) error {
	j.mu.Lock()
	cancel, ok := j.running[id]
	j.mu.Unlock()
	if ok {
		cancel()
		return nil
	}
	job, err := j.Get(context.Background(), id)
	if err != nil {
		return err
	}
	return fmt.Errorf("job %d is not running (it is %s)", id, job.State)
}

// Wait blocks until the job with id, started by this engine, has finished, or ctx ends.
func (j *Jobs) Wait(ctx context.Context, id int64) (Job, error) {
	j.mu.Lock()
	done, ok := j.done[id]
	j.mu.Unlock()
	if ok {
		select {
		case <-done:
		case <-ctx.Done():
			return Job{}, ctx.Err()
		}
	}
	return j.Get(ctx, id)
}

// Get returns the job with id.
func (j *Jobs) Get(ctx context.Context, id int64) (Job, error) {
	var job Job
	var epoch, epochs gosql.NullInt64
	var loss, rps, eta gosql.NullFloat64
	var params, errMsg, warning gosql.NullString
	var finished gosql.NullTime
	err := j.db.QueryRowContext(ctx, `SELECT id, kind, target, state, epoch, epochs, loss, rows_per_s, eta_s, params, created_by, started, finished, error, warning
		FROM `+CatalogSchema+`.ldp_jobs WHERE id = ?`, id).Scan(&job.ID, &job.Kind, &job.Target, &job.State, &epoch, &epochs,
		&loss, &rps, &eta, &params, &job.CreatedBy, &job.Started, &finished, &errMsg, &warning)
	if errors.Is(err, gosql.ErrNoRows) {
		return job, fmt.Errorf("%w: %d", ErrNoJob, id)
	}
	job.Epoch, job.Epochs = int(epoch.Int64), int(epochs.Int64)
	job.Loss, job.RowsPerS, job.ETAS = loss.Float64, rps.Float64, eta.Float64
	job.Params, job.Error, job.Warning = json.RawMessage(params.String), errMsg.String, warning.String
	if finished.Valid {
		job.Finished = &finished.Time
	}
	return job, err
}

// close cancels every running job and waits for them to record their end.
func (j *Jobs) close() {
	j.mu.Lock()
	j.closed = true
	for _, cancel := range j.running {
		cancel()
	}
	j.mu.Unlock()
	j.wg.Wait()
}
