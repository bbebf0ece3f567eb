package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/udf"
)

const mechanismsUsage = `Usage: ldpsql mechanisms compare --db FILE --table AUX [--column features] [--eps 4] [--k K] NAME...
       ldpsql mechanisms export NAME [--db FILE | --addr HOST:PORT] [--out NAME.ldpm] [--public]

Commands:
  compare   evaluate registered mechanisms on an auxiliary table and print their diagnostics side by
            side (CALL ldp_evaluate_mechanism for each); nothing is released, so it costs no privacy
  export    write a mechanism as one publishable file (.ldpm) that data owners privatise with on their
            own machines (ldpsql privatize); refused for a model trained without CDP on a protected table
`

func mechanismsCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "export" {
		return mechanismExportCmd(args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "compare" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, mechanismsUsage)
			return nil
		}
		fmt.Fprint(stderr, mechanismsUsage)
		return fmt.Errorf("want the subcommand compare or export")
	}
	return compareCmd(args[1:], stdout, stderr)
}

func compareCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("mechanisms compare", "Evaluate mechanisms on an auxiliary table at eps and print their diagnostics side by side:\nclipping, latent spread (collapse), reconstruction error after privatisation against the mean\npredictor, and the accuracy bound. The evaluation is stored in each model's ldp_models.params.",
		`  ldpsql mechanisms compare --db ./ldpsql.duckdb --table aux --eps 4 my_pca my_vlm box
  ldpsql mechanisms compare --table d1 --column features --eps 8 --k 10 pca8 vlm8
`, stderr)
	db := fs.String("db", engine.DefaultPath, "DuckDB file")
	table := fs.String("table", "", "auxiliary table (raw rows; never released)")
	column := fs.String("column", "features", "features column")
	eps := fs.Float64("eps", udf.DefaultDiagnosticsEps, "the eps the releases would be made at")
	k := fs.Int("k", 0, "classes for the accuracy bound (default 2)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	names := fs.Args()
	if *table == "" || len(names) == 0 {
		fs.Usage()
		return fmt.Errorf("--table and at least one mechanism name are required")
	}
	e, err := openEngine(*db, udf.Config{})
	if err != nil {
		return err
	}
	defer e.Close()
	var metrics []string
	values := map[string]map[string]any{} // metric → mechanism → value
	notes := map[string]map[string]string{}
	for _, name := range names {
		call := fmt.Sprintf("CALL ldp_evaluate_mechanism(%s, %s, %s, %s)", sqlQuote(name), sqlQuote(*table), sqlQuote(*column),
			strconv.FormatFloat(*eps, 'g', -1, 64))
		if *k != 0 {
			call = strings.TrimSuffix(call, ")") + fmt.Sprintf(", %d)", *k)
		}
		_, rows, err := e.Query(e.NewContext(context.Background()), call)
		if err != nil {
			return err
		}
		for _, r := range rows {
			m := r[1].(string)
			if values[m] == nil {
				metrics = append(metrics, m)
				values[m], notes[m] = map[string]any{}, map[string]string{}
			}
			values[m][name], notes[m][name] = r[2], r[3].(string)
		}
	}
	schema := sql.Schema{{Name: "metric", Type: types.LongText}}
	for _, name := range names {
		schema = append(schema, &sql.Column{Name: name, Type: types.LongText})
	}
	var out []sql.Row
	for _, m := range metrics {
		row := sql.Row{m}
		for _, name := range names {
			row = append(row, formatMetric(values[m][name]))
		}
		out = append(out, row)
	}
	printTable(stdout, schema, out)
	// What the numbers mean, and why some are NULL: one line per metric and distinct note, naming the
	// mechanisms it is for when they differ.
	fmt.Fprintln(stdout)
	for _, m := range metrics {
		if m == "notes" || m == "collapsed" {
			continue
		}
		var distinct []string
		who := map[string][]string{}
		for _, name := range names {
			note := notes[m][name]
			if note == "" {
				continue
			}
			if _, seen := who[note]; !seen {
				distinct = append(distinct, note)
			}
			who[note] = append(who[note], name)
		}
		for _, note := range distinct {
			if len(who[note]) == len(names) {
				fmt.Fprintf(stdout, "%-19s %s\n", m, note)
			} else {
				fmt.Fprintf(stdout, "%-19s %s: %s\n", m, strings.Join(who[note], ", "), note)
			}
		}
	}
	for _, name := range names {
		if w := notes["collapsed"][name]; w != "" && w != "no" {
			fmt.Fprintf(stdout, "WARNING %s: %s\n", name, w)
		}
		if n := notes["notes"][name]; n != "" {
			fmt.Fprintf(stdout, "note %s: %s\n", name, n)
		}
	}
	return e.Close()
}

func formatMetric(v any) string {
	f, ok := v.(float64)
	if !ok {
		return formatValue(v)
	}
	return strconv.FormatFloat(f, 'g', 4, 64)
}
