// Command ldpsql is a MySQL-compatible SQL engine over DuckDB whose functions privatise data under local
// differential privacy. Run "ldpsql help" for its commands and examples.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/udf"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

const usage = `ldpsql — local differential privacy inside a SQL database.

Usage:
  ldpsql <command> [flags]

Commands:
  serve     serve the MySQL wire protocol
  sql       run SQL statements (an interactive shell without -e)
  demo      load the WDBC breast-cancer data, privatise its labels, print debiased frequencies
  bench     measure INSERT, FLIP_LABEL and LDP_ENCODE throughput on this machine;
            bench load: many clients at once over the MySQL protocol, with a ledger audit;
            bench etl: ldp_privatize against ldpsql-etl on Prism on 1 and 2 CPUs
  dataset   load a data set into tables (dataset load fashion-mnist | breast-cancer)
  load      load a CSV file into a table
  export    write a table or a query's result as CSV
  train     train a mechanism's encoder (VLM) as a job, with a progress bar
  mechanisms compare mechanisms' diagnostics on an auxiliary table (mechanisms compare --table aux pca vlm);
            mechanisms export NAME --out NAME.ldpm writes a mechanism as a file data owners privatise with
  privatize release rows (CSV or Parquet) on this machine with a mechanism file (privatize --mechanism m.ldpm --eps 4 --in rows.parquet --out rel.parquet)
  import-releases load such releases into a table TRAIN_NOISY_CLASSIFIER trains on (import-releases --in rel.csv|rel.parquet --table t)
  etl       privatise many files on Apache Beam, in process on Prism or on a Flink/Spark job server
            (etl privatize --mechanism m.ldpm --in 'data/part-*.parquet' --eps 4 --out out/; runs ldpsql-etl)
  audit     estimate a randomiser's privacy loss from samples and test it against its ε (audit krr --eps 1)
  repro     reproduce an experiment end to end (repro data-collection --dataset fashion-mnist)
  version   print the version

sql, dataset load, load, export and train open the DuckDB file in process (--db, default
./ldpsql.duckdb), which DuckDB allows while no other process has it open; beside a running
serve, give them --addr HOST:PORT instead (--user, default root; --password or $LDPSQL_PASSWORD).

Examples:
  ldpsql demo
  ldpsql serve --addr 127.0.0.1:3306 --db ./ldpsql.duckdb
  mysql -h 127.0.0.1 -P 3306 -u root ldpsql
  ldpsql sql --addr 127.0.0.1:3306 -e "SELECT FLIP_LABEL(1, 1.0, 2)"
  ldpsql sql --db ./ldpsql.duckdb -e "SELECT FLIP_LABEL(1, 1.0, 2)"
  ldpsql sql --db :memory:
  ldpsql dataset load fashion-mnist

Run "ldpsql <command> --help" for a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes one command line and returns the process exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = serveCmd(args[1:], stdout, stderr)
	case "sql":
		err = sqlCmd(args[1:], stdin, stdout, stderr)
	case "demo":
		err = demoCmd(args[1:], stdout, stderr)
	case "train":
		err = trainCmd(args[1:], stdout, stderr)
	case "load":
		err = loadCmd(args[1:], stdin, stdout, stderr)
	case "export":
		err = exportCmd(args[1:], stdout, stderr)
	case "mechanisms", "mechanism":
		err = mechanismsCmd(args[1:], stdout, stderr)
	case "privatize", "privatise":
		err = privatizeCmd(args[1:], stdout, stderr)
	case "import-releases":
		err = importReleasesCmd(args[1:], stdout, stderr)
	case "etl":
		err = etlCmd(args[1:], stdin, stdout, stderr)
	case "dataset":
		err = datasetCmd(args[1:], stdout, stderr)
	case "repro":
		err = reproCmd(args[1:], stdout, stderr)
	case "bench":
		err = benchCmd(args[1:], stdout, stderr)
	case "audit":
		err = auditCmd(args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintf(stdout, "ldpsql %s\n", version)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "ldpsql: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "ldpsql %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// newFlagSet returns a flag set whose --help prints the command's usage and examples.
func newFlagSet(name, summary, examples string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("ldpsql "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: ldpsql %s [flags]\n\n%s\n\nFlags:\n", name, summary)
		fs.PrintDefaults()
		fmt.Fprintf(stderr, "\nExamples:\n%s", examples)
	}
	return fs
}

// openEngine opens the database file with every ldpsql SQL function and procedure installed and the
// built-in plugins registered. A file that another process (a running server) holds is an error that
// says so and names the --addr to use instead.
func openEngine(path string, cfg udf.Config, opts ...engine.Option) (*engine.Engine, error) {
	e, err := engine.Open(path, opts...)
	if err != nil {
		return nil, explainLock(path, err)
	}
	if _, err := udf.Install(e, cfg); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}
