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
	"github.com/ldpsql/ldpsql/udf"
)

func trainCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("train", "Train a mechanism's encoder on an auxiliary table as a job (the same job as\nCALL ldp_train_mechanism), showing its progress; Ctrl-C cancels it.",
		`  ldpsql train --name my_vlm --table d1 --column features --params '{"d": 8, "l": 10, "eps_pretrain": 27, "epochs": 20}'
`, stderr)
	db := fs.String("db", engine.DefaultPath, "DuckDB file")
	name := fs.String("name", "", "name of the mechanism to create")
	kind := fs.String("kind", "vlm", "encoder to train")
	table := fs.String("table", "", "auxiliary table")
	column := fs.String("column", "features", "features column (packed float32 BLOB or JSON array)")
	params := fs.String("params", "{}", "hyperparameters as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *name == "" || *table == "" {
		return fmt.Errorf("--name and --table are required")
	}
	e, err := openEngine(*db, udf.Config{})
	if err != nil {
		return err
	}
	defer e.Close()
	call := fmt.Sprintf("CALL ldp_train_mechanism(%s, %s, %s, %s, %s)", sqlQuote(*name), sqlQuote(*kind), sqlQuote(*table), sqlQuote(*column), sqlQuote(*params))
	_, rows, err := e.Query(e.NewContext(context.Background()), call)
	if err != nil {
		return err
	}
	id := rows[0][0].(int64)
	fmt.Fprintf(stdout, "job %d: training %s %q on %s\n", id, *kind, *name, *table)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(signals)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-signals:
			fmt.Fprintln(stderr, "\ncancelling…")
			_ = e.Jobs.Cancel(id)
		case <-tick.C:
		}
		job, err := e.Jobs.Get(context.Background(), id)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "\r%s", progressLine(job))
		if job.State != engine.JobRunning {
			fmt.Fprintln(stderr)
			if job.State != engine.JobSucceeded {
				return fmt.Errorf("job %d %s: %s", id, job.State, job.Error)
			}
			fmt.Fprintf(stdout, "job %d succeeded: mechanism %q is registered (SELECT * FROM ldpsql_catalog.ldp_mechanisms)\n", id, *name)
			if job.Warning != "" {
				fmt.Fprintf(stdout, "WARNING: %s\n(diagnostics in ldpsql_catalog.ldp_models.params; ldpsql mechanisms compare for more)\n", job.Warning)
			}
			return e.Close()
		}
	}
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
