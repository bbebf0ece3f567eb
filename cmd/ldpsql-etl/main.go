// Command ldpsql-etl privatises row files at scale on Apache Beam (package beam): `ldpsql-etl
// privatize`, which `ldpsql etl privatize` runs. It is a binary of its own so that ldpsql itself does
// not link Beam and its runners (see README, "Privatising at scale on Apache Beam").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	ldpbeam "github.com/ldpsql/ldpsql/beam"
	"github.com/ldpsql/ldpsql/client"
	"github.com/ldpsql/ldpsql/mechanisms"
)

const usage = `Usage: ldpsql etl privatize [flags]   (or ldpsql-etl privatize [flags])

Release every row of the files --in matches (CSV or Parquet, by each file's extension; a glob such as
'data/part-*.parquet') with a published mechanism file, as ldpsql privatize does one file, on Apache
Beam: in this process on Prism (the default), on a Flink or Spark cluster through its Beam job
server (--runner flink --endpoint HOST:PORT), or on Google Cloud Dataflow (--runner dataflow, with
gs:// or s3:// --in and --out, and Beam's --project, --region and --staging_location given before
privatize; Beam's --template_location stages the job as a template instead). Each row's features are encoded, clipped into the
mechanism's declared set and released with the randomiser's noise (crypto/rand) at λ·eps, its label by
k-RR at (1 − λ)·eps; without --label, the features at eps.

With --from-db the rows come from a table on an ldpsql server over the MySQL protocol (--table; its
primary key, any columns, is the releases' id, and the table is read in --partitions key ranges in
parallel; a table without one is read as one part, its releases without an id or with a row_id),
and with --to-db the releases go into a new table there (--into) with the metadata an ldp_privatize
table carries, so TRAIN_NOISY_CLASSIFIER trains on it. When the source table is protected (it has a
privacy budget), the --from-db user must be a DBA: every released row is charged to its unit through
the server (CALL ldp_charge_external) before any output is final, and the rows of units over their
budget are left out and counted. A killed job rerun with the same --job-id (printed when it starts)
charges each unit once per release.

--out is a new directory: releases.parquet (or releases-00000… with --shards), each file with ldpsql
privatize's metadata so that ldpsql import-releases takes it; bad_rows.jsonl, the rows left out (a NaN,
the wrong number of features, a label out of range, a cell that is not a number) by file and row; and
_SUMMARY.json. Nothing is final there until every file is written. With --to-db, --out (default a new
temporary directory) holds only bad_rows.jsonl and _SUMMARY.json.

--in, --out and --mechanism may be object-store URLs: s3://bucket/key (credentials, region and an
S3-compatible store's endpoint as the AWS SDK reads them: AWS_ACCESS_KEY_ID, AWS_REGION,
AWS_ENDPOINT_URL_S3, ~/.aws) and gs://bucket/object (Google's application default credentials). Each
worker copies an object it reads to a local temporary file, reads it whole, and removes the copy.

Flags:
`

// examples closes the usage text.
const examples = `
Examples:
  ldpsql etl privatize --mechanism vlm_cdp.ldpm --in 'data/part-*.parquet' --id id --label y --k 10 --eps 4 --lambda 0.7 --out out/
  ldpsql etl privatize --mechanism my_pca.ldpm --in 'rows-*.csv' --features f1,f2,f3 --eps 8 --out out/ --format csv
  ldpsql etl privatize --mechanism my_pca.ldpm --in '/shared/data/part-*.parquet' --label y --eps 4 --out /shared/out \
      --runner flink --endpoint flink-jobserver:8099 --environment-type DOCKER
  ldpsql etl privatize --mechanism s3://models/pca4.ldpm --in 's3://lake/rows/part-*.parquet' --label y --k 2 --eps 4 \
      --out s3://exports/rows-eps4/
  ldpsql etl --project my-project --region europe-west1 --staging_location gs://my-bucket/beam privatize \
      --mechanism gs://models/pca4.ldpm --in 'gs://lake/rows/part-*.parquet' --label y --k 2 --eps 4 \
      --out gs://exports/rows-eps4/ --runner dataflow
  ldpsql etl privatize --mechanism pca4.ldpm --from-db 'dba:pw@tcp(db:3306)/ldpsql' --table people --features f --label y --k 2 \
      --eps 4 --to-db 'dba:pw@tcp(db:3306)/ldpsql' --into people_released
`

func main() {
	// Beam's own flags first: a remote runner starts this binary as its workers with them.
	flag.Parse()
	beam.Init()
	if err := run(flag.Args(), os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "ldpsql etl:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "privatize" && args[0] != "privatise" {
		fmt.Fprint(stderr, usage)
		return errors.New("the one command is privatize")
	}
	job, verbose, err := parseJob(args[1:], stderr)
	if err != nil {
		return err
	}
	if !verbose {
		slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	}
	if job.ID == "" {
		job.ID = ldpbeam.NewJobID()
	}
	fmt.Fprintf(stderr, "job %s (if it is killed, rerun it with --job-id %s)\n", job.ID, job.ID)
	rel, err := job.Spec.Releaser()
	if err != nil {
		return err
	}
	if c := rel.Caveat(); c != "" {
		fmt.Fprintf(stderr, "warning: mechanism %q: %s\n", rel.M.File.Name, c)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	done := make(chan struct{})
	if job.Runner == "prism" {
		go reportProgress(stderr, start, job.From != nil, done)
	}
	sum, err := ldpbeam.Run(ctx, job)
	close(done)
	if err != nil {
		return err
	}
	printSummary(stdout, job, rel, sum, time.Since(start))
	return nil
}

// parseJob reads privatize's flags into a job (with no ID unless --job-id gives one) and --verbose,
// and loads the mechanism file.
func parseJob(args []string, stderr io.Writer) (ldpbeam.Job, bool, error) {
	fs := flag.NewFlagSet("ldpsql etl privatize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
		fmt.Fprint(stderr, examples)
	}
	mechPath := fs.String("mechanism", "", "mechanism file (.ldpm, from ldpsql mechanisms export), a path or an s3:// or gs:// URL")
	in := fs.String("in", "", "input files, a glob (quote it): .csv with a header or .parquet, local or s3://bucket/… or gs://bucket/…")
	features := fs.String("features", "", "feature columns, comma-separated, in order (default: every column but --id and --label)")
	idCol := fs.String("id", "", "a column copied to the output as it is (a row id; never privatised)")
	labelCol := fs.String("label", "", "a label column (integers 0..k−1), released by k-RR")
	k := fs.Int("k", 2, "label classes")
	eps := fs.Float64("eps", 0, "total ε of each row's release")
	lambda := fs.Float64("lambda", 0.7, "share of eps for the features when --label is given")
	randomiser := fs.String("randomiser", mechanisms.RandomiserLaplace, "laplace, duchi, privunit or rrB (a box mechanism only: randomised response on B bins per coordinate, e.g. rr2)")
	out := fs.String("out", "", "output directory (new, or without releases in it), local or an s3:// or gs:// prefix")
	format := fs.String("format", "parquet", "output format: parquet or csv")
	shards := fs.Int("shards", 1, "release files to write (each importable on its own)")
	runner := fs.String("runner", "prism", "prism (in process), flink, spark or universal (a Beam job server), or dataflow (Beam's flags --project, --region and --staging_location before privatize)")
	endpoint := fs.String("endpoint", "", "the job server's HOST:PORT (flink, spark, universal)")
	envType := fs.String("environment-type", "", "how a remote runner runs the workers: DOCKER (Beam's default), PROCESS, EXTERNAL or LOOPBACK")
	fromDB := fs.String("from-db", "", "read the rows from an ldpsql server: a DSN, user:pass@tcp(host:port)/db")
	table := fs.String("table", "", "with --from-db: the table to read (db.table, or a table of the DSN's database)")
	partitions := fs.Int("partitions", 4, "with --from-db: key ranges read in parallel (a table without a primary key: one)")
	chargeBatch := fs.Int("charge-batch", 1000, "with a protected --from-db table: rows charged per call")
	toDB := fs.String("to-db", "", "write the releases into a new table on an ldpsql server: a DSN")
	into := fs.String("into", "", "with --to-db: the table to create (db.table, or a table of the DSN's database)")
	jobID := fs.String("job-id", "", "the job's id (default: a new one); rerun a killed job with its id")
	verbose := fs.Bool("verbose", false, "show the runner's log")
	if err := fs.Parse(args); err != nil {
		return ldpbeam.Job{}, false, err
	}
	switch {
	case *mechPath == "" || !(*eps > 0) || (*in == "") == (*fromDB == "") || *out == "" && *toDB == "":
		fs.Usage()
		return ldpbeam.Job{}, false, errors.New("--mechanism, --eps, --in or --from-db, and --out or --to-db are required")
	case *fromDB != "" && (*table == "" || *features == ""):
		return ldpbeam.Job{}, false, errors.New("--from-db needs --table and --features")
	case (*toDB == "") != (*into == ""):
		return ldpbeam.Job{}, false, errors.New("--to-db and --into go together")
	case *toDB != "" && *fromDB == "":
		return ldpbeam.Job{}, false, errors.New("--to-db writes releases read --from-db; load releases made from files with ldpsql import-releases")
	}
	if *format != "parquet" && *format != "csv" {
		return ldpbeam.Job{}, false, fmt.Errorf("--format %q: want parquet or csv", *format)
	}
	raw, err := ldpbeam.ReadFile(context.Background(), *mechPath)
	if err != nil {
		return ldpbeam.Job{}, false, err
	}
	job := ldpbeam.Job{ID: *jobID, In: *in, Cols: ldpbeam.Columns{ID: *idCol, Label: *labelCol},
		Spec: ldpbeam.Spec{Mechanism: raw, Randomiser: *randomiser, Eps: *eps, Label: *labelCol, K: *k, Lambda: *lambda},
		Out:  ldpbeam.Output{Dir: *out, Format: *format, Shards: *shards}, Runner: *runner, Endpoint: *endpoint, EnvironmentType: *envType}
	if *features != "" {
		for f := range strings.SplitSeq(*features, ",") {
			job.Cols.Features = append(job.Cols.Features, strings.TrimSpace(f))
		}
	}
	if *fromDB != "" {
		job.From = &ldpbeam.DBSource{DSN: *fromDB, Table: *table, Features: job.Cols.Features, Partitions: *partitions, ChargeBatch: *chargeBatch}
	}
	if *toDB != "" {
		job.To = &ldpbeam.DBSink{DSN: *toDB, Table: *into}
	}
	return job, *verbose, nil
}

// reportProgress prints the job's counters every 2 s until done closes. Prism runs the workers in
// this process, so their counters are the job's.
func reportProgress(stderr io.Writer, start time.Time, fromDB bool, done <-chan struct{}) {
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			read, released, bad := ldpbeam.Progress()
			charged := ""
			if fromDB {
				charged = fmt.Sprintf(", charged %d", ldpbeam.Charged())
			}
			fmt.Fprintf(stderr, "  %s: read %d rows, released %d%s, bad %d (%.0f rows/s)\n", time.Since(start).Round(time.Second), read, released, charged, bad, float64(released)/time.Since(start).Seconds())
		}
	}
}

// printSummary prints what a finished job released, where, and what it left out.
func printSummary(stdout io.Writer, job ldpbeam.Job, rel *client.Releaser, sum ldpbeam.Summary, took time.Duration) {
	if sum.Template != "" {
		fmt.Fprintf(stdout, "staged the job as a Dataflow template at %s: nothing was released; launch it to release the rows into %s\n", sum.Template, job.Out.Dir)
		return
	}
	where := strings.Join(sum.Files, ", ")
	if sum.Table != "" {
		where = "table " + sum.Table
	}
	fmt.Fprintf(stdout, "released %d rows with %q at ε = %g (features %.6g, label %.6g) in %v (%.0f rows/s) on %s: %s\n",
		sum.Rows, rel.M.File.Name, job.Spec.Eps, rel.EpsX, rel.EpsY, took.Round(time.Millisecond), float64(sum.Rows)/took.Seconds(), job.Runner, where)
	if job.From != nil {
		parts := "parts"
		if sum.Parts == 1 {
			parts = "part"
		}
		fmt.Fprintf(stdout, "read %s in %d %s\n", job.From.Table, sum.Parts, parts)
	}
	if sum.RefusedRows > 0 {
		fmt.Fprintf(stdout, "%d rows of %d units left out: the server refused to charge them (their budget would be exceeded)\n", sum.RefusedRows, sum.RefusedUnits)
	}
	if sum.Bad > 0 {
		fmt.Fprintf(stdout, "%d bad rows left out, listed in %s\n", sum.Bad, sum.BadFile)
	}
}
