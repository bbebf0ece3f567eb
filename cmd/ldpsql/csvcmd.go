package main

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"
)

// loadCmd is `ldpsql load`: a CSV file into an existing table.
func loadCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("load", "Load a CSV file (or - for standard input) into an existing table, in process on a DuckDB file (--db)\nor on a running `ldpsql serve` as multi-row INSERTs (--addr). The first line names the columns, in any\norder (columns left out get their defaults); an empty field is NULL; the values are converted to the\ncolumns' types as an INSERT converts them. Each INSERT commits on its own: a bad row stops the load\nwith the rows before its batch in place.",
		`  ldpsql sql -e "CREATE TABLE people (id INT PRIMARY KEY, age INT, city VARCHAR(40))"
  ldpsql load --table people people.csv
  LDPSQL_PASSWORD=secret ldpsql load --addr 127.0.0.1:3306 --table people people.csv
`, stderr)
	tgt := addTargetFlags(fs, "DuckDB file")
	table := fs.String("table", "", "table to load into (db.table for another database)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *table == "" || fs.NArg() != 1 {
		return fmt.Errorf("usage: ldpsql load --table TABLE [--db PATH | --addr HOST:PORT] FILE.csv (or - for standard input)")
	}
	in, name := stdin, "standard input"
	if path := fs.Arg(0); path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		in, name = f, path
	}
	r := csv.NewReader(in)
	r.ReuseRecord = false
	header, err := r.Read()
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%s is empty: its first line must name the columns", name)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	for i, h := range header {
		header[i] = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
	}

	ctx := context.Background()
	s, err := tgt.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	cols, _, err := s.query(ctx, "SELECT * FROM "+quoteTable(*table)+" LIMIT 0", nil)
	if err != nil {
		return fmt.Errorf("%w (ldpsql load fills an existing table: CREATE TABLE it first)", err)
	}
	known := map[string]bool{}
	for _, c := range cols {
		known[strings.ToLower(c)] = true
	}
	for _, h := range header {
		if !known[strings.ToLower(h)] {
			return fmt.Errorf("%s names column %q, which %s does not have (its columns: %s)", name, h, *table, strings.Join(cols, ", "))
		}
	}

	start := time.Now()
	n, err := s.insertRows(ctx, *table, header, func() ([][]any, error) {
		var batch [][]any
		for len(batch) < 1000 {
			rec, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			row := make([]any, len(rec))
			for i, v := range rec {
				if v != "" {
					row[i] = v
				}
			}
			batch = append(batch, row)
		}
		return batch, nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "loaded %d rows from %s into %s in %.1f s\n", n, name, *table, time.Since(start).Seconds())
	return s.close()
}

// exportCmd is `ldpsql export`: a table or a query's result as CSV.
func exportCmd(args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlagSet("export", "Write a table, or the result of a query, as CSV with a header line, from a DuckDB file in process (--db)\nor from a running `ldpsql serve` (--addr). NULL is an empty field; a binary value that is not UTF-8\ntext is written as 0x followed by its bytes in hex.",
		`  ldpsql export --table people > people.csv
  ldpsql export --query "SELECT id, FLIP_LABEL(y, 1.0, 2) AS y FROM labels" --out released.csv
  LDPSQL_PASSWORD=secret ldpsql export --addr 127.0.0.1:3306 --table people --out people.csv
`, stderr)
	tgt := addTargetFlags(fs, "DuckDB file")
	table := fs.String("table", "", "table to export")
	query := fs.String("query", "", "query whose result to export (instead of --table)")
	out := fs.String("out", "-", "file to write (- for standard output)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*table == "") == (*query == "") || fs.NArg() != 0 {
		return fmt.Errorf("usage: ldpsql export --table TABLE | --query SQL [--out FILE] [--db PATH | --addr HOST:PORT]")
	}
	stmt := *query
	if *table != "" {
		stmt = "SELECT * FROM " + quoteTable(*table)
	}
	ctx := context.Background()
	s, err := tgt.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	w := stdout
	var f *os.File
	if *out != "-" {
		if f, err = os.Create(*out); err != nil {
			return err
		}
		defer func() {
			f.Close()
			if err != nil {
				_ = os.Remove(*out) // no half-written export
			}
		}()
		w = f
	}
	cw := csv.NewWriter(w)
	var n int64
	var rec []string
	cols, _, err := s.query(ctx, stmt, func(cols []string, row []any) error {
		if n == 0 {
			if err := cw.Write(cols); err != nil {
				return err
			}
		}
		rec = rec[:0]
		for _, v := range row {
			rec = append(rec, csvValue(v))
		}
		n++
		return cw.Write(rec)
	})
	if err != nil {
		return err
	}
	if len(cols) == 0 {
		return fmt.Errorf("%s returned no result set to export", truncate(stmt, 60))
	}
	if n == 0 {
		if err := cw.Write(cols); err != nil {
			return err
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	if f != nil {
		if err := f.Close(); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "exported %d rows to %s\n", n, *out)
	}
	return s.close()
}

// csvValue is a value as one CSV field: NULL empty, text as it is, other binary values as 0x-hex.
func csvValue(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case []byte:
		if utf8.Valid(x) && !strings.ContainsRune(string(x), 0) {
			return string(x)
		}
		return fmt.Sprintf("0x%X", x)
	}
	return formatValue(v)
}
