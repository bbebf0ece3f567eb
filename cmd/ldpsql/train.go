package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ldpsql/ldpsql/engine"
)

func trainCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("train", "Train a mechanism's encoder on an auxiliary table as a job (the same job as\nCALL ldp_train_mechanism), in process on a DuckDB file (--db) or on a running `ldpsql serve`\n(--addr), showing its progress until it ends; Ctrl-C cancels it.",
		`  ldpsql train --name my_vlm --table d1 --column features --params '{"d": 8, "l": 10, "eps_pretrain": 27, "epochs": 20}'
  LDPSQL_PASSWORD=secret ldpsql train --addr 127.0.0.1:3306 --name my_vlm --table d1 --params '{"d": 8}'
`, stderr)
	tgt := addTargetFlags(fs, "DuckDB file")
	name := fs.String("name", "", "name of the mechanism to create")
	kind := fs.String("kind", "vlm", "encoder to train: vlm, clm, or task_aware (params name the \"label\" column)")
	table := fs.String("table", "", "auxiliary table")
	column := fs.String("column", "features", "features column (packed float32 BLOB or JSON array)")
	params := fs.String("params", "{}", "hyperparameters as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *name == "" || *table == "" {
		return fmt.Errorf("--name and --table are required")
	}
	ctx := context.Background()
	s, err := tgt.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	call := fmt.Sprintf("CALL ldp_train_mechanism(%s, %s, %s, %s, %s)", sqlQuote(*name), sqlQuote(*kind), sqlQuote(*table), sqlQuote(*column), sqlQuote(*params))
	r, err := queryAll(ctx, s, call)
	if err != nil {
		return err
	}
	id, ok := int64Value(r.firstValue())
	if !ok {
		return fmt.Errorf("%s returned %v, not a job id", call, r.firstValue())
	}
	fmt.Fprintf(stdout, "job %d: training %s %q on %s\n", id, *kind, *name, *table)
	job, err := followJob(ctx, s, id, stderr)
	if err != nil {
		return err
	}
	if job.State != engine.JobSucceeded {
		return fmt.Errorf("job %d %s: %s", id, job.State, job.Error)
	}
	fmt.Fprintf(stdout, "job %d succeeded: mechanism %q is registered (SELECT * FROM ldpsql_catalog.ldp_mechanisms)\n", id, *name)
	if job.Warning != "" {
		fmt.Fprintf(stdout, "WARNING: %s\n(diagnostics in ldpsql_catalog.ldp_models.params; ldpsql mechanisms compare for more)\n", job.Warning)
	}
	return s.close()
}

// followJob reads job id from ldpsql_catalog.ldp_jobs every half second until it has ended, drawing its
// progress on stderr; SIGINT or SIGTERM cancels it (CALL ldp_cancel_job). An account that cannot read
// the job's row is told how to follow it instead.
func followJob(ctx context.Context, s session, id int64, stderr io.Writer) (engine.Job, error) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(signals)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		job, err := readJob(ctx, s, id)
		if err != nil {
			fmt.Fprintln(stderr)
			return job, fmt.Errorf("job %d was started on %s, but its progress cannot be read: %w\n"+
				"it goes on running; an account that may read ldpsql_catalog.ldp_jobs (a DBA) follows it with\n"+
				"  SELECT state, epoch, epochs, error FROM ldpsql_catalog.ldp_jobs WHERE id = %d\n"+
				"and stops it with CALL ldp_cancel_job(%d)", id, s.where(), err, id, id)
		}
		fmt.Fprintf(stderr, "\r%s", progressLine(job))
		if job.State != engine.JobRunning {
			fmt.Fprintln(stderr)
			return job, nil
		}
		select {
		case <-signals:
			fmt.Fprintln(stderr, "\ncancelling…")
			if _, _, err := s.query(ctx, fmt.Sprintf("CALL ldp_cancel_job(%d)", id), nil); err != nil {
				fmt.Fprintf(stderr, "cancelling job %d: %v\n", id, err)
			}
		case <-tick.C:
		}
	}
}

// readJob reads the progress columns of one row of ldp_jobs.
func readJob(ctx context.Context, s session, id int64) (engine.Job, error) {
	job := engine.Job{ID: id}
	r, err := queryAll(ctx, s, fmt.Sprintf("SELECT state, epoch, epochs, loss, rows_per_s, eta_s, error, warning FROM ldpsql_catalog.ldp_jobs WHERE id = %d", id))
	if err != nil {
		return job, err
	}
	if len(r.rows) == 0 {
		return job, fmt.Errorf("ldpsql_catalog.ldp_jobs has no row for job %d that this account may see", id)
	}
	row := r.rows[0]
	job.State = stringValue(row[0])
	epoch, _ := int64Value(row[1])
	epochs, _ := int64Value(row[2])
	job.Epoch, job.Epochs = int(epoch), int(epochs)
	job.Loss, _ = float64Value(row[3])
	job.RowsPerS, _ = float64Value(row[4])
	job.ETAS, _ = float64Value(row[5])
	job.Error, job.Warning = stringValue(row[6]), stringValue(row[7])
	return job, nil
}

// progressLine renders a job's progress as a one-line bar.
func progressLine(j engine.Job) string {
	const width = 30
	if j.Epochs == 0 {
		return fmt.Sprintf("[%s] reading data…", strings.Repeat(" ", width))
	}
	done := width * j.Epoch / j.Epochs
	return fmt.Sprintf("[%s%s] epoch %d/%d  loss %.2f  %.0f rows/s  ETA %s   ",
		strings.Repeat("#", done), strings.Repeat(".", width-done), j.Epoch, j.Epochs, j.Loss, j.RowsPerS,
		(time.Duration(j.ETAS) * time.Second).Round(time.Second))
}

func sqlQuote(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", "''") + "'"
}
