package engine

import (
	"context"
	gosql "database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dolthub/go-mysql-server/sql"
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

// JobsTable is the catalog table of jobs.
const JobsTable = "ldp_jobs"

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
	// No params were once stored as '', which is not JSON: every full read of the table (ldp_jobs as a
	// user who is not a DBA reads it, jobsTable) failed on them.
	if _, err := db.Exec(`UPDATE ` + CatalogSchema + `.ldp_jobs SET params = NULL WHERE params = ''`); err != nil {
		return nil, err
	}
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
		id, kind, target, JobRunning, nullString(string(params)), createdBy, time.Now().UTC()); err != nil {
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

// SessionUser names the session's account as jobs, models and releases record it: user@host, with the
// account's host (sessionBuilder puts it in every session), or "embedded" for an in-process session
// without a user.
func SessionUser(ctx *sql.Context) string {
	if c := ctx.Session.Client(); c.User != "" {
		return c.User + "@" + c.Address
	}
	return "embedded"
}

// IsDBA reports whether the session's user is a DBA of e: root or a holder of the global SUPER
// privilege (everyone while user accounts are disabled).
func (e *Engine) IsDBA(ctx *sql.Context) bool {
	return HasGlobalPrivilege(ctx, e.GMS.Analyzer.Catalog.MySQLDb, sql.PrivilegeType_Super)
}

// jobsForEveryone lets every user read ldpsql_catalog.ldp_jobs without a grant, where jobsTable shows
// them their own jobs; the rest of the catalog keeps its grants (the ledger stays a DBA's). GMS decides
// access from the session's privilege set, its cached copy of the user's grants (recomputed when any
// grant changes); this adds SELECT on ldp_jobs to that copy, never to the grants themselves (SHOW GRANTS
// does not list it, REVOKE has nothing to take). The parser calls it for every statement, before GMS
// checks any privilege; ctx is the parser's context (a *sql.Context in a session).
func (p *Provider) jobsForEveryone(ctx any) {
	sctx, ok := ctx.(*sql.Context)
	if !ok || sctx == nil || sctx.Session == nil || p.grants == nil || sctx.Session.Client().User == "" {
		return
	}
	mdb := p.grants()
	if mdb == nil || !mdb.Enabled() {
		return
	}
	// The copy cached in the session (a user who does not exist gets an empty set, not cached).
	mdb.UserActivePrivilegeSet(sctx).AddTable(CatalogSchema, JobsTable, sql.PrivilegeType_Select)
}

// jobsTable is the catalog table ldp_jobs as a session sees it: a DBA (IsDBA) every job, any other user
// the jobs they started (created_by is theirs). The filter is in the scan, so every plan that reads the
// table — a UNION's branch, a subquery, a CTE — goes through it, and the table offers GMS no other way
// in: no projections, index lookups or row-count statistics, and no underlying table to unwrap.
type jobsTable struct {
	t *Table
	p *Provider // its isDBA and grants; nil before installServerBoundary: nobody is a DBA
}

var _ sql.Table = jobsTable{}
var _ sql.PrimaryKeyTable = jobsTable{}
var _ sql.CommentedTable = jobsTable{}

func (j jobsTable) Name() string                       { return j.t.Name() }
func (j jobsTable) String() string                     { return j.t.String() }
func (j jobsTable) Schema(ctx *sql.Context) sql.Schema { return j.t.Schema(ctx) }
func (j jobsTable) PrimaryKeySchema(ctx *sql.Context) sql.PrimaryKeySchema {
	return j.t.PrimaryKeySchema(ctx)
}
func (j jobsTable) Collation() sql.CollationID { return j.t.Collation() }
func (j jobsTable) Comment() string            { return j.t.Comment() }
func (j jobsTable) Partitions(ctx *sql.Context) (sql.PartitionIter, error) {
	return j.t.Partitions(ctx)
}

// PartitionRows implements sql.Table: a DBA's scan is the table's; anyone else's keeps their own rows.
func (j jobsTable) PartitionRows(ctx *sql.Context, part sql.Partition) (sql.RowIter, error) {
	col := j.t.Schema(ctx).IndexOfColName("created_by")
	if col < 0 {
		return nil, fmt.Errorf("%s.%s has no created_by column", CatalogSchema, JobsTable)
	}
	iter, err := j.t.PartitionRows(ctx, part)
	if err != nil || (j.p.isDBA != nil && j.p.isDBA(ctx)) {
		return iter, err
	}
	return &ownJobsIter{RowIter: iter, user: SessionUser(ctx), col: col}, nil
}

// ownJobsIter keeps the rows whose created_by is user.
type ownJobsIter struct {
	sql.RowIter
	user string
	col  int
}

func (it *ownJobsIter) Next(ctx *sql.Context) (sql.Row, error) {
	for {
		r, err := it.RowIter.Next(ctx)
		if err != nil || r[it.col] == it.user {
			return r, err
		}
	}
}
