package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ldpsql/ldpsql/internal/rowfile"
	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/plugins/sdk"
	"github.com/ldpsql/ldpsql/udf"
)

// importReleasesCmd is `ldpsql import-releases`: releases made on data owners' machines become a table
// like one ldp_privatize writes (the same metadata in its comment), so TRAIN_NOISY_CLASSIFIER and
// PREDICT work on it.
func importReleasesCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("import-releases", `Load releases made with ldpsql privatize into a new table that TRAIN_NOISY_CLASSIFIER and
PREDICT treat as an ldp_privatize table: its key, features (the released vector) and the released
label, and the release metadata in the table's comment. The key is every column of the file other
than the release and the label: one integer column becomes id (the row number when there is none);
several, or a non-integer one, keep their names (BIGINT where every value is an integer, else a binary
VARCHAR(255)), as ldp_export writes a table whose primary key has several columns. The releases are a CSV file with its
.meta.json, or a Parquet file with the metadata inside (by the extension, .csv or .parquet). The
mechanism must be registered here with the model and the dimension the releases were made with, and
the metadata must be what privatize writes (every key, ε split as λ·eps and (1 − λ)·eps, the row
count); anything that does not match is an error and nothing is written. Several files (--in given
again, or a glob: a Beam job's shards) go into one table when they were released the same way and
have the same key columns; row-number ids run on from file to file.`,
		`  ldpsql import-releases --db ./ldpsql.duckdb --in releases.csv --table collected
  ldpsql import-releases --addr 127.0.0.1:3306 --in releases.csv --meta releases.csv.meta.json --table collected
  ldpsql import-releases --db ./ldpsql.duckdb --in releases.parquet --table collected
  ldpsql import-releases --db ./ldpsql.duckdb --in 'out/releases-*.parquet' --table collected
`, stderr)
	tgt := addTargetFlags(fs, "DuckDB file")
	var ins []string
	fs.Func("in", "the releases, .csv or .parquet; give it again, or a glob pattern such as 'out/releases-*.parquet', for several files into one table", func(v string) error {
		ins = append(ins, v)
		return nil
	})
	metaPath := fs.String("meta", "", "a CSV file's metadata (default IN.meta.json; a Parquet file carries its own); only with one --in")
	table := fs.String("table", "", "table to create")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(ins) == 0 || *table == "" {
		fs.Usage()
		return errors.New("--in and --table are required")
	}
	paths, err := expandReleaseFiles(ins)
	if err != nil {
		return err
	}
	if *metaPath != "" && len(paths) > 1 {
		return fmt.Errorf("--meta names one file's metadata, but --in gives %d files: each CSV file's metadata must be beside it, as FILE.meta.json", len(paths))
	}
	for _, path := range paths { // names first: a wrong one opens nothing
		if err := checkReleaseName(path, *metaPath); err != nil {
			return err
		}
	}
	first, err := openReleaseFile(paths[0], *metaPath)
	if err != nil {
		return err
	}
	defer first.src.Close()
	meta := first.meta
	ctx := context.Background()
	s, err := tgt.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	desc, err := releasingMechanism(ctx, s, meta, first.from)
	if err != nil {
		return err
	}
	// Every row of every file is checked before the table is made, so that bad input writes nothing;
	// then the files are read again into the table, so that memory does not grow with them. One file
	// is open at a time (a Parquet file holds a DuckDB instance while it is).
	files := make([]releaseFile, len(paths))
	var keyInt []bool
	for i, path := range paths {
		f := first
		if i > 0 {
			if f, err = openReleaseFile(path, *metaPath); err != nil {
				return err
			}
		}
		fileKeyInt, err := checkReleaseFile(first, &f, desc.OutputDim)
		if err != nil {
			return err
		}
		if i == 0 {
			first.keys, keyInt = f.keys, fileKeyInt
		} else if !slices.Equal(f.keys, first.keys) {
			return fmt.Errorf("%s has the key columns %v, %s %v: files imported into one table must have the same", f.path, f.keys, first.path, first.keys)
		}
		for j := range keyInt {
			keyInt[j] = keyInt[j] && fileKeyInt[j]
		}
		files[i] = f
	}
	rr, err := newMultiReleaseReader(files, desc.OutputDim, keyInt)
	if err != nil {
		return err
	}
	defer rr.close()
	n, err := createReleaseTable(ctx, s, *table, rr, meta, desc)
	if err != nil {
		return err
	}
	from := ""
	if len(files) > 1 {
		from = fmt.Sprintf(" from %d files", len(files))
	}
	fmt.Fprintf(stdout, "imported %d releases of mechanism %q%s into %s (ε_x %.6g%s)\n", n, meta.Mechanism, from, *table, meta.EpsX,
		map[bool]string{true: fmt.Sprintf(", label by %d-RR at ε_y %.6g", meta.K, meta.EpsY), false: ""}[meta.Label != ""])
	return s.close()
}

// expandReleaseFiles expands the --in values: a value with a glob metacharacter becomes the files it
// matches, in order of name (none is an error); each file once.
func expandReleaseFiles(ins []string) ([]string, error) {
	var paths []string
	seen := map[string]bool{}
	for _, in := range ins {
		matches := []string{in}
		if strings.ContainsAny(in, "*?[") {
			var err error
			if matches, err = filepath.Glob(in); err != nil {
				return nil, fmt.Errorf("--in %q: %w", in, err)
			}
			// Only .csv and .parquet files: out/* also matches a CSV file's .meta.json and what a Beam job
			// writes beside its releases (_SUMMARY.json, bad_rows.jsonl).
			matches = slices.DeleteFunc(matches, func(m string) bool { _, err := rowfile.FormatOf(m); return err != nil })
			if len(matches) == 0 {
				return nil, fmt.Errorf("--in %q matches no .csv or .parquet file", in)
			}
		}
		for _, m := range matches {
			if !seen[m] {
				seen[m] = true
				paths = append(paths, m)
			}
		}
	}
	return paths, nil
}

// releaseFile is one release file to import, with its metadata and where that was read.
type releaseFile struct {
	path, from string
	src        rowfile.Source // open from openReleaseFile until checkReleaseFile
	meta       releaseMeta
	keys       []string // its key columns' names, once checked
}

// checkReleaseName checks a release file's name before anything is opened: a .csv or .parquet file,
// and --meta only for a CSV file.
func checkReleaseName(path, metaPath string) error {
	format, err := rowfile.FormatOf(path)
	if err != nil {
		return fmt.Errorf("--in: %w", err)
	}
	if metaPath != "" && format == rowfile.Parquet {
		return fmt.Errorf("--meta: %s carries its metadata inside (%s); --meta is for a CSV file's", path, rowfile.MetadataAt(path))
	}
	return nil
}

// openReleaseFile opens path and reads its metadata (from metaPath when given).
func openReleaseFile(path, metaPath string) (releaseFile, error) {
	f := releaseFile{path: path}
	src, err := rowfile.Open(path)
	if err != nil {
		return f, err
	}
	if f.meta, f.from, err = readReleaseMeta(src, metaPath); err != nil {
		src.Close()
		return f, err
	}
	f.src = src
	return f, nil
}

// checkReleaseFile checks that f was released as first was, then every row of it, and closes it. It
// sets f.keys and returns which of its key columns hold integers only.
func checkReleaseFile(first releaseFile, f *releaseFile, dim int) ([]bool, error) {
	defer f.src.Close()
	if err := sameRelease(first, *f); err != nil {
		return nil, err
	}
	keyInt, keys, err := checkReleases(f.src, f.path, f.meta, f.from, dim)
	f.keys = keys
	return keyInt, err
}

// sameRelease checks that b's releases were made as a's were (mechanism and its model, randomiser, ε
// and its split, label and classes), so that one table's metadata describes both; only the row
// counts and release times may differ.
func sameRelease(a, b releaseFile) error {
	x, y := a.meta, b.meta
	for _, d := range []struct {
		key    string
		ax, by any
	}{
		{"mechanism", x.Mechanism, y.Mechanism}, {"mechanism_sha256", x.SHA256, y.SHA256}, {"model_sha256", x.ModelSHA, y.ModelSHA},
		{"randomiser", x.Randomiser, y.Randomiser}, {"eps", x.Eps, y.Eps}, {"eps_x", x.EpsX, y.EpsX}, {"eps_y", x.EpsY, y.EpsY},
		{"label", x.Label, y.Label}, {"k", x.K, y.K}, {"lambda", x.Lambda, y.Lambda},
	} {
		if d.ax != d.by {
			return fmt.Errorf("%s has %s %v, %s %v: files imported into one table must be releases made the same way", b.from, d.key, d.by, a.from, d.ax)
		}
	}
	return nil
}

// multiReleaseReader reads the rows of several release files in turn, for one table. Where the files
// have no key, the row numbers that become ids run on from one file to the next.
type multiReleaseReader struct {
	files  []releaseFile
	dim    int
	keyInt []bool
	at     int
	cur    *releaseReader
	again  rowfile.Source
	n      int64 // rows of the files before the current one
}

func newMultiReleaseReader(files []releaseFile, dim int, keyInt []bool) (*multiReleaseReader, error) {
	m := &multiReleaseReader{files: files, dim: dim, keyInt: keyInt, at: -1}
	return m, m.advance()
}

// advance opens the next file again (the first pass read it to its end).
func (m *multiReleaseReader) advance() error {
	if m.cur != nil {
		m.n = m.cur.n
	}
	m.close()
	m.at++
	if m.at >= len(m.files) {
		return nil
	}
	f := m.files[m.at]
	src, err := rowfile.Open(f.path)
	if err != nil {
		return err
	}
	m.again = src
	if m.cur, err = newReleaseReader(src, f.path, f.meta, m.dim); err != nil {
		return err
	}
	m.cur.keyInt, m.cur.n = m.keyInt, m.n
	return nil
}

// next returns the next row for the table, io.EOF after the last file's last.
func (m *multiReleaseReader) next() ([]any, error) {
	for m.at < len(m.files) {
		row, err := m.cur.next()
		if err != io.EOF {
			return row, err
		}
		if err := m.advance(); err != nil {
			return nil, err
		}
	}
	return nil, io.EOF
}

// keyColumns are the table's key columns and their definitions, from the first file's columns (every
// file has the same) and what every file's key values are.
func (m *multiReleaseReader) keyColumns() ([]string, string) { return m.cur.keyColumns() }

func (m *multiReleaseReader) close() {
	if m.again != nil {
		m.again.Close()
		m.again = nil
	}
}

// readReleaseMeta reads and checks the releases' metadata: from metaPath when given, else from beside
// (CSV) or inside (Parquet) the releases. It also returns where it read them, for messages.
func readReleaseMeta(src rowfile.Source, metaPath string) (releaseMeta, string, error) {
	var raw []byte
	var err error
	from := metaPath
	if from != "" {
		raw, err = os.ReadFile(from)
	} else {
		raw, from, err = src.Metadata()
	}
	if err != nil {
		return releaseMeta{}, from, fmt.Errorf("the releases' metadata: %w", err)
	}
	meta, err := parseReleaseMeta(raw, from)
	return meta, from, err
}

// releasingMechanism returns the description of the registered mechanism the releases name, after
// checking that its model is the one they were made with and that their randomiser can release its
// output set.
func releasingMechanism(ctx context.Context, s session, meta releaseMeta, from string) (sdk.Description, error) {
	var desc sdk.Description
	r, err := queryAll(ctx, s, fmt.Sprintf("SELECT k.description, SHA2(m.artifact, 256) FROM ldpsql_catalog.ldp_mechanisms k "+
		"LEFT JOIN ldpsql_catalog.ldp_models m ON m.name = k.model WHERE k.name = %s", sqlQuote(meta.Mechanism)))
	if err != nil {
		return desc, err
	}
	if len(r.rows) != 1 {
		return desc, fmt.Errorf("the releases were made with mechanism %q, which is not registered here", meta.Mechanism)
	}
	if err := json.Unmarshal([]byte(stringValue(r.rows[0][0])), &desc); err != nil {
		return desc, fmt.Errorf("mechanism %q: its description: %w", meta.Mechanism, err)
	}
	// The name alone could be a mechanism refitted since the releases were made, with another model.
	if model := strings.ToLower(stringValue(r.rows[0][1])); model != meta.ModelSHA {
		return desc, fmt.Errorf("the releases were made with a model of mechanism %q whose SHA-256 is %s (%s), but the model registered here under that name has %s: "+
			"release with a file exported from this server's mechanism (ldpsql mechanisms export)", meta.Mechanism, meta.ModelSHA, from, cmp.Or(model, "none"))
	}
	// The randomiser named must be one that can release this mechanism's output set (rrB needs a box,
	// Laplace an ℓ1 ball): releases that no ldpsql randomiser could have made are not imported.
	if rs, ok := desc.RandomiserSet(); !ok {
		return desc, fmt.Errorf("mechanism %q has no fitted model (no output set), so no releases were made with it", meta.Mechanism)
	} else if _, err := mechanisms.NewRandomiser(meta.Randomiser, rs, meta.EpsX); err != nil {
		return desc, fmt.Errorf("%s: randomiser %q cannot release mechanism %q (output set %s): %w", from, meta.Randomiser, meta.Mechanism, desc.OutputSet.Describe(), err)
	}
	return desc, nil
}

// checkReleases reads every row of src once, checking it, and the row count against the metadata. It
// returns which key columns hold integers only, and their names.
func checkReleases(src rowfile.Source, in string, meta releaseMeta, from string, dim int) ([]bool, []string, error) {
	rr, err := newReleaseReader(src, in, meta, dim)
	if err != nil {
		return nil, nil, err
	}
	keys := make([]string, len(rr.keyAt))
	for i, c := range rr.keyAt {
		keys[i] = rr.cols[c].Name
	}
	keyInt := make([]bool, len(rr.keyAt))
	for i := range keyInt {
		keyInt[i] = true
	}
	rr.onKey = func(i int, cell any) {
		if _, err := rowfile.Int(cell); err != nil {
			keyInt[i] = false
		}
	}
	rows := 0
	for ; ; rows++ {
		if _, err := rr.next(); err == io.EOF {
			break
		} else if err != nil {
			return nil, nil, err
		}
	}
	if rows != meta.Rows {
		return nil, nil, fmt.Errorf("%s has %d rows, its metadata (%s) %d", in, rows, from, meta.Rows)
	}
	return keyInt, keys, nil
}

// createReleaseTable creates table with the release metadata in its comment, as ldp_privatize writes
// it, and fills it from rr; a failed fill drops the table again.
func createReleaseTable(ctx context.Context, s session, table string, rr *multiReleaseReader, meta releaseMeta, desc sdk.Description) (int64, error) {
	lambda := meta.Lambda
	if meta.Label == "" {
		lambda = 1
	}
	pm := udf.PrivatizeMetadata{Source: "client releases " + meta.SHA256, Mechanism: meta.Mechanism, Randomiser: meta.Randomiser,
		Epsilon: meta.Eps, Lambda: lambda, EpsX: meta.EpsX, EpsY: meta.EpsY, FeaturesCol: "features", OutputDim: desc.OutputDim,
		OutputSet: desc.OutputSet.Describe(), MechanismSHA256: meta.SHA256, ModelSHA256: meta.ModelSHA}
	cols, defs := rr.keyColumns()
	cols = append(cols, "features")
	defs += ", features LONGBLOB NOT NULL"
	if meta.Label != "" {
		pm.K, pm.LabelCol = meta.K, "label"
		cols = append(cols, "label")
		defs += ", label INT NOT NULL"
	}
	comment, _ := json.Marshal(map[string]any{"ldp_privatize": pm})
	if _, err := queryAll(ctx, s, fmt.Sprintf("CREATE TABLE %s (%s) COMMENT=%s", quoteTable(table), defs, sqlQuote(string(comment)))); err != nil {
		return 0, err
	}
	n, err := s.insertRows(ctx, table, cols, func() ([][]any, error) {
		var batch [][]any
		for len(batch) < 1000 {
			row, err := rr.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, err
			}
			batch = append(batch, row)
		}
		return batch, nil // nil at the end
	})
	if err != nil {
		_, _ = queryAll(ctx, s, "DROP TABLE "+quoteTable(table))
		return 0, fmt.Errorf("writing %s: %w (the table was dropped)", table, err)
	}
	return n, nil
}

// releaseReader reads a release file's rows as rows of the imported table (key, features, label),
// checking each: the release's dimension, finite values, a label among the classes, and in the second
// pass each key value against its column's type.
type releaseReader struct {
	src     rowfile.Source
	cols    []rowfile.Column
	meta    releaseMeta
	dim     int
	zAt     []int // z1..zd, one value each; or
	zList   int   // one list column z
	keyAt   []int // the key's columns; none: the row number is the id
	keyInt  []bool
	onKey   func(i int, cell any) // sees each key value in the first pass, which finds keyInt
	labelAt int
	n       int64 // rows read
}

// newReleaseReader finds the columns of a release file (in, read from src): an id, the release as
// z1..zd or as one list column z, and the label its metadata names.
func newReleaseReader(src rowfile.Source, in string, meta releaseMeta, dim int) (*releaseReader, error) {
	r := &releaseReader{src: src, cols: src.Columns(), meta: meta, dim: dim, zList: -1, labelAt: -1}
	for i, c := range r.cols {
		switch {
		case c.Kind == rowfile.KindVector && c.Name == "z" && len(r.zAt) == 0 && r.zList < 0:
			r.zList = i
		case c.Kind == rowfile.KindScalar && c.Name == fmt.Sprintf("z%d", len(r.zAt)+1) && r.zList < 0:
			r.zAt = append(r.zAt, i)
		case c.Kind == rowfile.KindScalar && c.Name == meta.Label && meta.Label != "":
			r.labelAt = i
		case c.Kind == rowfile.KindScalar:
			r.keyAt = append(r.keyAt, i)
		default:
			return nil, fmt.Errorf("%s: unexpected column %q (want the key, the release as z1..z%d or as one list column z, and the label %q)", in, c.Name, dim, meta.Label)
		}
	}
	if r.zList < 0 && len(r.zAt) != dim {
		return nil, fmt.Errorf("%s has %d released values per row, mechanism %q releases %d", in, len(r.zAt), meta.Mechanism, dim)
	}
	if meta.Label != "" && r.labelAt < 0 {
		return nil, fmt.Errorf("%s has no label column %q, which its metadata names", in, meta.Label)
	}
	return r, nil
}

// next returns the next row for the table, io.EOF after the last.
func (r *releaseReader) next() ([]any, error) {
	cells, err := r.src.Next()
	if err != nil {
		return nil, err
	}
	r.n++
	at := r.src.Where()
	z := make([]float32, 0, r.dim)
	if r.zList >= 0 {
		if z, err = rowfile.Floats(z, cells[r.zList]); err != nil {
			return nil, fmt.Errorf("%s: z: %w", at, err)
		}
		if len(z) != r.dim {
			return nil, fmt.Errorf("%s has %d released values, mechanism %q releases %d", at, len(z), r.meta.Mechanism, r.dim)
		}
	} else {
		for _, c := range r.zAt {
			v, err := rowfile.Float32(cells[c])
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", at, r.cols[c].Name, err)
			}
			z = append(z, v)
		}
	}
	for j, v := range z {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("%s: released value %d, %v, is not a finite number", at, j+1, v)
		}
	}
	var row []any
	if len(r.keyAt) == 0 {
		row = append(row, r.n)
	}
	for i, c := range r.keyAt {
		cell := cells[c]
		if cell == nil || rowfile.Text(cell) == "" {
			return nil, fmt.Errorf("%s: key column %s is empty", at, r.cols[c].Name)
		}
		switch {
		case r.onKey != nil:
			r.onKey(i, cell)
		case r.keyInt[i]:
			v, err := rowfile.Int(cell)
			if err != nil {
				return nil, fmt.Errorf("%s: %s %s is not an integer", at, r.cols[c].Name, rowfile.Show(cell))
			}
			cell = v
		default:
			cell = rowfile.Text(cell)
		}
		row = append(row, cell)
	}
	row = append(row, udf.PackVector(z))
	if r.labelAt >= 0 {
		y, err := rowfile.Int(cells[r.labelAt])
		if err != nil || y < 0 || y >= int64(r.meta.K) {
			return nil, fmt.Errorf("%s: label %s is not a class 0..%d", at, rowfile.Show(cells[r.labelAt]), r.meta.K-1)
		}
		row = append(row, y)
	}
	return row, nil
}

// keyColumns are the imported table's key columns and their definitions, PRIMARY KEY included.
func (r *releaseReader) keyColumns() (cols []string, defs string) {
	if len(r.keyAt) == 0 || (len(r.keyAt) == 1 && r.keyInt[0]) {
		return []string{"id"}, "id BIGINT PRIMARY KEY"
	}
	var parts, quoted []string
	for i, c := range r.keyAt {
		name := r.cols[c].Name
		typ := "VARCHAR(255) COLLATE utf8mb4_0900_bin" // a key as it was, byte for byte
		if r.keyInt[i] {
			typ = "BIGINT"
		}
		cols = append(cols, name)
		quoted = append(quoted, quoteIdent(name))
		parts = append(parts, quoteIdent(name)+" "+typ+" NOT NULL")
	}
	parts = append(parts, "PRIMARY KEY ("+strings.Join(quoted, ", ")+")")
	return cols, strings.Join(parts, ", ")
}
