package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/dolthub/go-mysql-server/sql"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/training/datasets"
	"github.com/ldpsql/ldpsql/udf"
)

func demoCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", "Load the WDBC breast-cancer data into a DuckDB file, release every diagnosis with\nFLIP_LABEL at the given eps, and print the debiased class frequencies beside the true ones.",
		`  ldpsql demo
  ldpsql demo --db /tmp/demo.duckdb --eps 0.5
`, stderr)
	db := fs.String("db", engine.DefaultPath, "DuckDB file (created if missing), or :memory:")
	eps := fs.Float64("eps", 1.0, "privacy parameter of the label release")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !(*eps > 0) || math.IsInf(*eps, 0) {
		return fmt.Errorf("--eps %v: the privacy parameter must be a finite number > 0", *eps)
	}
	e, err := openEngine(*db, udf.Config{})
	if err != nil {
		return err
	}
	defer e.Close()
	ctx := e.NewContext(context.Background())
	run := func(q string) ([]sql.Row, error) {
		_, rows, err := e.Query(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", firstLine(q), err)
		}
		return rows, nil
	}
	data, err := datasets.LoadWDBC()
	if err != nil {
		return err
	}
	if err := loadWDBC(run, data); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "ldpsql demo: database %s\n", *db)
	fmt.Fprintf(stdout, "Loaded %d rows of the WDBC breast-cancer data into table wdbc (30 features, diagnosis 0 = malignant, 1 = benign).\n\n", len(data.Labels))

	release := fmt.Sprintf("CREATE TABLE wdbc_released AS SELECT id, FLIP_LABEL(diagnosis, %s, 2) AS diagnosis FROM wdbc", fmtFloat(*eps))
	if _, err := run("DROP TABLE IF EXISTS wdbc_released"); err != nil {
		return err
	}
	if _, err := run(release); err != nil {
		return err
	}
	krr, err := mechanisms.NewKRR(*eps, 2)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Released every diagnosis under %s-LDP with k-ary randomised response:\n  %s;\n", fmtFloat(*eps), release)
	fmt.Fprintf(stdout, "Each label is kept with probability e^eps/(e^eps+1) = %.3f and flipped otherwise.\n\n", krr.KeepProbability())

	fmt.Fprintln(stdout, "Class frequencies: true, as released, and debiased from the release with")
	fmt.Fprintf(stdout, "  SELECT RR_FREQUENCY(diagnosis, %s, 2, class) FROM wdbc_released;\n\n", fmtFloat(*eps))
	header := []string{"class", "true", "released (naive)", "debiased", "± 1 s.e."}
	var table [][]string
	n := int64(len(data.Labels))
	for class, name := range datasets.WDBCClassNames {
		trueRows, err := run(fmt.Sprintf("SELECT COUNT(*) FROM wdbc WHERE diagnosis = %d", class))
		if err != nil {
			return err
		}
		releasedRows, err := run(fmt.Sprintf("SELECT COUNT(*) FROM wdbc_released WHERE diagnosis = %d", class))
		if err != nil {
			return err
		}
		debiased, err := run(fmt.Sprintf("SELECT RR_FREQUENCY(diagnosis, %s, 2, %d) FROM wdbc_released", fmtFloat(*eps), class))
		if err != nil {
			return err
		}
		trueCount, releasedCount := trueRows[0][0].(int64), releasedRows[0][0].(int64)
		se, err := mechanisms.WarnerStdErr(releasedCount, n, *eps, 2)
		if err != nil {
			return err
		}
		table = append(table, []string{
			fmt.Sprintf("%s (%d)", name, class),
			fmt.Sprintf("%.3f", float64(trueCount)/float64(n)),
			fmt.Sprintf("%.3f", float64(releasedCount)/float64(n)),
			fmt.Sprintf("%.3f", debiased[0][0].(float64)),
			fmt.Sprintf("%.3f", se),
		})
	}
	printStrings(stdout, header, table)
	fmt.Fprintln(stdout, "\nThe released labels over-represent the minority class; RR_FREQUENCY removes that bias.")
	fmt.Fprintf(stdout, "Explore further with: ldpsql sql --db %s\n", *db)
	return e.Close()
}

// loadWDBC (re)creates table wdbc(id, 30 DOUBLE features, diagnosis INT) and fills it.
func loadWDBC(run func(string) ([]sql.Row, error), data *datasets.WDBC) error {
	if _, err := run("DROP TABLE IF EXISTS wdbc"); err != nil {
		return err
	}
	cols := []string{"id INT PRIMARY KEY"}
	for _, f := range datasets.WDBCFeatureNames {
		cols = append(cols, f+" DOUBLE NOT NULL")
	}
	cols = append(cols, "diagnosis INT NOT NULL")
	if _, err := run("CREATE TABLE wdbc (" + strings.Join(cols, ", ") + ")"); err != nil {
		return err
	}
	var values []string
	for i, x := range data.Features {
		parts := []string{strconv.Itoa(i + 1)}
		for _, v := range x {
			parts = append(parts, fmtFloat(v))
		}
		parts = append(parts, strconv.Itoa(data.Labels[i]))
		values = append(values, "("+strings.Join(parts, ",")+")")
	}
	_, err := run("INSERT INTO wdbc VALUES " + strings.Join(values, ","))
	return err
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func firstLine(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return strings.SplitN(s, "\n", 2)[0]
}

// printStrings prints a table of preformatted cells.
func printStrings(w io.Writer, header []string, rows [][]string) {
	schema := make(sql.Schema, len(header))
	for i, h := range header {
		schema[i] = &sql.Column{Name: h}
	}
	sqlRows := make([]sql.Row, len(rows))
	for i, r := range rows {
		sqlRows[i] = make(sql.Row, len(r))
		for j, c := range r {
			sqlRows[i][j] = c
		}
	}
	printTable(w, schema, sqlRows)
}
