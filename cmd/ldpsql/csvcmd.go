package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ldpsql/ldpsql/internal/rowfile"
	"github.com/ldpsql/ldpsql/udf"
)

// loadCmd is `ldpsql load`: a CSV or Parquet file into an existing table, with feature columns packed
// into one vector column on the way when asked.
func loadCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("load", "Load a CSV or Parquet file (by its extension; - reads CSV from standard input) into an existing table,\nin process on a DuckDB file (--db) or on a running `ldpsql serve` as multi-row INSERTs (--addr). The\nfile's columns are matched to the table's by name, in any order (columns left out get their defaults);\nan empty CSV field is NULL; values are converted to the columns' types as an INSERT converts them.\n--features packs the named numeric columns (a Parquet list column counts as all its values) into one\nvector column, as LDP_VECTOR packs them, and --label loads a column into the table's label column.\nEach INSERT commits on its own: a bad row stops the load with the rows before its batch in place.",
		`  ldpsql sql -e "CREATE TABLE people (id INT PRIMARY KEY, age INT, city VARCHAR(40))"
  ldpsql load --table people people.csv
  ldpsql sql -e "CREATE TABLE patients (id INT PRIMARY KEY, features LONGBLOB, label INT)"
  ldpsql load --table patients --features radius,texture,area --label diagnosis wdbc.parquet
  LDPSQL_PASSWORD=secret ldpsql load --addr 127.0.0.1:3306 --table people people.csv
`, stderr)
	tgt := addTargetFlags(fs, "DuckDB file")
	table := fs.String("table", "", "table to load into (db.table for another database)")
	featureList := fs.String("features", "", "comma-separated columns of the file to pack, in this order, into one vector column (see --vector-column)")
	vectorCol := fs.String("vector-column", "features", "the table's column that --features are packed into")
	labelCol := fs.String("label", "", "a column of the file to load into the table's label column")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *table == "" || fs.NArg() != 1 {
		return fmt.Errorf("usage: ldpsql load --table TABLE [--features COLS [--vector-column COL]] [--label COL] [--db PATH | --addr HOST:PORT] FILE.csv|FILE.parquet (or - for CSV on standard input)")
	}
	path, name := fs.Arg(0), fs.Arg(0)
	if path == "-" {
		tmp, err := spoolStdin(stdin)
		if err != nil {
			return err
		}
		defer os.Remove(tmp)
		path, name = tmp, "standard input"
	}
	src, err := rowfile.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer src.Close()
	plan, err := planLoad(src.Columns(), *featureList, *vectorCol, *labelCol)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
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
	for _, h := range plan.into {
		if !known[strings.ToLower(h)] {
			return fmt.Errorf("%s names column %q, which %s does not have (its columns: %s)", name, h, *table, strings.Join(cols, ", "))
		}
	}

	start := time.Now()
	n, err := s.insertRows(ctx, *table, plan.into, func() ([][]any, error) {
		var batch [][]any
		for len(batch) < 1000 {
			cells, err := src.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			row, err := plan.row(cells)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", strings.Replace(src.Where(), path, name, 1), err)
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

// spoolStdin copies standard input to a temporary CSV file (the row reader reads files) and returns its
// path.
func spoolStdin(stdin io.Reader) (string, error) {
	f, err := os.CreateTemp("", "ldpsql-load-*.csv")
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(f, stdin); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", fmt.Errorf("reading standard input: %w", err)
	}
	return f.Name(), f.Close()
}

// loadPlan maps a file's columns to a table's: into names the table's columns in the order row returns
// their values.
type loadPlan struct {
	names    []string // the file's columns
	into     []string
	plain    []int // file columns loaded as they are, in into's order
	features []int // file columns packed, in order, into the last of into (none: no vector column)
}

// planLoad checks --features and --label against the file's columns.
func planLoad(cols []rowfile.Column, featureList, vectorCol, labelCol string) (loadPlan, error) {
	index := map[string]int{}
	var names []string
	for i, c := range cols {
		index[strings.ToLower(c.Name)] = i
		names = append(names, c.Name)
	}
	find := func(flag, col string) (int, error) {
		i, ok := index[strings.ToLower(strings.TrimSpace(col))]
		if !ok {
			return 0, fmt.Errorf("%s names column %q, which the file does not have (its columns: %s)", flag, strings.TrimSpace(col), strings.Join(names, ", "))
		}
		return i, nil
	}
	p := loadPlan{names: names}
	packed := map[int]bool{}
	if featureList != "" {
		for _, c := range strings.Split(featureList, ",") {
			i, err := find("--features", c)
			if err != nil {
				return p, err
			}
			if packed[i] {
				return p, fmt.Errorf("--features names column %q twice", cols[i].Name)
			}
			packed[i] = true
			p.features = append(p.features, i)
		}
	}
	label := -1
	if labelCol != "" {
		i, err := find("--label", labelCol)
		if err != nil {
			return p, err
		}
		if packed[i] {
			return p, fmt.Errorf("--label column %q is also one of --features", cols[i].Name)
		}
		label = i
	}
	for i, c := range cols {
		switch {
		case packed[i]:
		case i == label:
			p.plain, p.into = append(p.plain, i), append(p.into, "label")
		case c.Kind == rowfile.KindVector:
			return p, fmt.Errorf("column %q holds lists of numbers: name it in --features to pack it into a vector column", c.Name)
		default:
			p.plain, p.into = append(p.plain, i), append(p.into, c.Name)
		}
	}
	if len(p.features) > 0 {
		for _, h := range p.into {
			if strings.EqualFold(h, vectorCol) {
				return p, fmt.Errorf("the file has a column %q besides --features, which are packed into the table's column of that name (choose another with --vector-column)", h)
			}
		}
		p.into = append(p.into, vectorCol)
	}
	return p, nil
}

// row returns the values of one file row for the table's columns in p.into: the plain cells as they
// are (a CSV cell is text; NULL stays NULL), the features packed little-endian float32.
func (p loadPlan) row(cells []any) ([]any, error) {
	row := make([]any, 0, len(p.into))
	for _, i := range p.plain {
		v := cells[i]
		if s, ok := v.(string); ok && s == "" {
			v = nil
		}
		row = append(row, v)
	}
	if len(p.features) == 0 {
		return row, nil
	}
	var vec []float32
	for _, i := range p.features {
		from := len(vec)
		var err error
		switch cells[i].(type) {
		case []any, []float32, []float64: // a Parquet list
			vec, err = rowfile.Floats(vec, cells[i])
		default:
			var f float32
			if f, err = rowfile.Float32(cells[i]); err == nil {
				vec = append(vec, f)
			}
		}
		for _, f := range vec[from:] {
			if err == nil && (math.IsNaN(float64(f)) || math.IsInf(float64(f), 0)) {
				err = fmt.Errorf("%v is not a finite number", f)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("feature column %s: %w", p.names[i], err)
		}
	}
	return append(row, udf.PackVector(vec)), nil
}

// exportCmd is `ldpsql export`: a table or a query's result as CSV or Parquet, with the release
// metadata of a table ldp_privatize (or import-releases) wrote.
func exportCmd(args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlagSet("export", `Write a table, or the result of a query, as CSV with a header line or as Parquet (--format, or by
--out's extension), from a DuckDB file in process (--db) or from a running ldpsql serve (--addr); the file
is written here, on this machine. NULL is an empty CSV field; a binary value that is not UTF-8 text is
written as 0x followed by its bytes in hex. A --table that ldp_privatize (or import-releases) wrote is
written as ldpsql privatize writes releases, for import-releases to read back: the released vector as one
list column z (Parquet) or as z1..zd (CSV), and the release metadata (mechanism, randomiser, eps_x,
eps_y, K, digests, rows) in the Parquet key-value metadata "ldpsql.releases" or in OUT.meta.json beside a
CSV file. Parquet columns are BIGINT when every value is an integer, DOUBLE when every value is a
number, VARCHAR otherwise (CALL ldp_export on the server keeps the stored types).`,
		`  ldpsql export --table people > people.csv
  ldpsql export --query "SELECT id, FLIP_LABEL(y, 1.0, 2) AS y FROM labels" --out released.csv
  ldpsql export --table d1_priv --format parquet --out d1_priv.parquet
  LDPSQL_PASSWORD=secret ldpsql export --addr 127.0.0.1:3306 --table people --out people.csv
`, stderr)
	tgt := addTargetFlags(fs, "DuckDB file")
	table := fs.String("table", "", "table to export")
	query := fs.String("query", "", "query whose result to export (instead of --table)")
	out := fs.String("out", "-", "file to write (- for standard output, CSV only)")
	format := fs.String("format", "", "csv or parquet (default: parquet for an --out ending .parquet, else csv)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*table == "") == (*query == "") || fs.NArg() != 0 {
		return fmt.Errorf("usage: ldpsql export --table TABLE | --query SQL [--format csv|parquet] [--out FILE] [--db PATH | --addr HOST:PORT]")
	}
	f, err := exportFormat(*format, *out)
	if err != nil {
		return err
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
	var pm *udf.PrivatizeMetadata
	qualified := ""
	if *table != "" {
		if pm, qualified, err = releaseMetadataOf(ctx, s, *table); err != nil {
			return err
		}
	}
	if f == rowfile.CSV && pm != nil && *out == "-" {
		fmt.Fprintf(stderr, "note: %s holds releases, but their metadata is written only beside a file: give --out FILE.csv\n", *table)
		pm = nil
	}
	if f == rowfile.Parquet || pm != nil {
		if ff, err := rowfile.FormatOf(*out); err != nil || ff != f {
			return fmt.Errorf("--out %s: name a %s file .%s", *out, f, strings.ToLower(f.String()))
		}
		n, err := exportRowFile(ctx, s, stmt, qualified, *out, pm, stderr)
		if err != nil {
			return err
		}
		where := *out
		if pm != nil {
			where += ", with its release metadata in " + rowfile.MetadataAt(*out)
		}
		fmt.Fprintf(stderr, "exported %d rows to %s\n", n, where)
		return s.close()
	}
	return exportCSV(ctx, s, stmt, *out, stdout, stderr)
}

// exportFormat is the format --format names, or --out's extension's (CSV by default), and checks that
// a Parquet export goes to a .parquet file.
func exportFormat(format, out string) (rowfile.Format, error) {
	f := rowfile.CSV
	switch strings.ToLower(format) {
	case "":
		if ff, err := rowfile.FormatOf(out); err == nil {
			f = ff
		}
	case "csv":
	case "parquet":
		f = rowfile.Parquet
	default:
		return 0, fmt.Errorf("--format %q: csv or parquet", format)
	}
	if f == rowfile.Parquet {
		if out == "-" {
			return 0, errors.New("--format parquet writes a file: give --out FILE.parquet")
		}
		if ff, err := rowfile.FormatOf(out); err != nil || ff != rowfile.Parquet {
			return 0, fmt.Errorf("--out %s: name a Parquet file .parquet", out)
		}
	}
	return f, nil
}

// exportCSV writes stmt's result as CSV with a header line to out (- for stdout), and removes a file it
// could not finish.
func exportCSV(ctx context.Context, s session, stmt, out string, stdout, stderr io.Writer) (err error) {
	w := stdout
	var file *os.File
	if out != "-" {
		if file, err = os.Create(out); err != nil {
			return err
		}
		defer func() {
			file.Close()
			if err != nil {
				_ = os.Remove(out) // no half-written export
			}
		}()
		w = file
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
	if file != nil {
		if err := file.Close(); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "exported %d rows to %s\n", n, out)
	}
	return s.close()
}

// releaseMetadataOf is what ldp_privatize (or import-releases) recorded in table's comment, nil for a
// table it did not write. A table made before the digests were recorded gets those of the mechanism as
// registered now, when the account may read the catalog.
// qualified is table as db.table (the session's database when table names none).
func releaseMetadataOf(ctx context.Context, s session, table string) (pm *udf.PrivatizeMetadata, qualified string, err error) {
	db, name, ok := strings.Cut(table, ".")
	if !ok {
		name = db
		r, err := queryAll(ctx, s, "SELECT DATABASE()")
		if err != nil {
			return nil, "", err
		}
		if len(r.rows) == 1 {
			db = stringValue(r.rows[0][0])
		}
	}
	qualified = db + "." + name
	r, err := queryAll(ctx, s, "SELECT table_comment FROM information_schema.tables WHERE table_schema = "+sqlQuote(db)+" AND table_name = "+sqlQuote(name))
	if err != nil {
		return nil, "", err
	}
	if len(r.rows) != 1 {
		return nil, qualified, nil // SELECT * says what is wrong
	}
	pm = udf.ParsePrivatizeComment(stringValue(r.rows[0][0]))
	if pm == nil || (pm.MechanismSHA256 != "" && pm.ModelSHA256 != "") {
		return pm, qualified, nil
	}
	d, err := queryAll(ctx, s, "SELECT k.sha256, SHA2(m.artifact, 256) FROM ldpsql_catalog.ldp_mechanisms k "+
		"LEFT JOIN ldpsql_catalog.ldp_models m ON m.name = k.model WHERE k.name = "+sqlQuote(pm.Mechanism))
	if err == nil && len(d.rows) == 1 {
		model := strings.ToLower(stringValue(d.rows[0][1]))
		pm.MechanismSHA256, pm.ModelSHA256 = udf.MechanismDigest(pm.Mechanism, stringValue(d.rows[0][0]), model), model
	}
	return pm, qualified, nil
}

// exportRowFile writes stmt's rows to out with rowfile (Parquet through an in-memory DuckDB's COPY),
// the features column of a released table (pm not nil) as the vector z, and pm's release metadata.
func exportRowFile(ctx context.Context, s session, stmt, table, out string, pm *udf.PrivatizeMetadata, stderr io.Writer) (int64, error) {
	var sink rowfile.Sink
	var kinds []rowfile.Column
	vec := -1
	start := func(cols []string) error {
		for i, c := range cols {
			col := rowfile.Column{Name: c, Kind: rowfile.KindScalar}
			if pm != nil && strings.EqualFold(c, pm.FeaturesCol) {
				col, vec = rowfile.Column{Name: "z", Kind: rowfile.KindVector, Width: pm.OutputDim}, i
			}
			kinds = append(kinds, col)
		}
		if pm != nil && vec < 0 {
			return fmt.Errorf("%s has no column %s, which its release metadata names", table, pm.FeaturesCol)
		}
		var err error
		sink, err = rowfile.Create(out, kinds)
		return err
	}
	var n int64
	cells := []any{}
	cols, _, err := s.query(ctx, stmt, func(cols []string, row []any) error {
		if sink == nil {
			if err := start(cols); err != nil {
				return err
			}
		}
		cells = cells[:0]
		for i, v := range row {
			if i != vec {
				cells = append(cells, csvValue(v))
				continue
			}
			b, ok := v.([]byte)
			if !ok {
				if str, isStr := v.(string); isStr {
					b, ok = []byte(str), true
				}
			}
			z, err := udf.UnpackVector(b)
			if !ok || err != nil || len(z) != pm.OutputDim {
				return fmt.Errorf("%s row %d: %s is not a packed vector of %d values", table, n+1, pm.FeaturesCol, pm.OutputDim)
			}
			cells = append(cells, z)
		}
		n++
		return sink.Write(cells...)
	})
	if err == nil && sink == nil {
		if len(cols) == 0 {
			err = fmt.Errorf("%s returned no result set to export", truncate(stmt, 60))
		} else {
			err = start(cols)
		}
	}
	if err != nil {
		if sink != nil {
			sink.Discard()
		}
		return 0, err
	}
	var meta []byte
	if pm != nil {
		m := udf.NewExportReleaseMetadata(pm, table, n)
		if m.SHA256 == "" || m.ModelSHA == "" {
			fmt.Fprintf(stderr, "warning: %s records no digests of mechanism %q and this account cannot read them from the catalog: import-releases will refuse %s (a DBA's export has them)\n", table, pm.Mechanism, out)
		}
		if meta, err = json.MarshalIndent(m, "", "  "); err != nil {
			sink.Discard()
			return 0, err
		}
	}
	return n, sink.Finish(meta)
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
