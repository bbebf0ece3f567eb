package main

import (
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/ldpsql/ldpsql/internal/rowfile"
	"github.com/ldpsql/ldpsql/training/datasets"
	"github.com/ldpsql/ldpsql/udf"
)

// releaseFixture is a database with a PCA mechanism fitted on 300 WDBC rows and exported, and the
// other 269 rows as a data owner's input: rows.csv (id, f1..f30, y), rows_list.parquet (id BIGINT,
// f FLOAT[30], y INTEGER) and rows_cols.parquet (the CSV's columns, f1..f30 FLOAT).
type releaseFixture struct {
	dir, db, mech string
	csv, list     string
	cols          string
}

func newReleaseFixture(t *testing.T) *releaseFixture {
	t.Helper()
	dir := t.TempDir()
	f := &releaseFixture{dir: dir, db: filepath.Join(dir, "pub.duckdb"), mech: filepath.Join(dir, "pca4.ldpm"),
		csv: filepath.Join(dir, "rows.csv"), list: filepath.Join(dir, "rows_list.parquet"), cols: filepath.Join(dir, "rows_cols.parquet")}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "ldpsql-plugin-pca"), "github.com/ldpsql/ldpsql/plugins/builtin/pca")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the PCA plugin: %v\n%s", err, out)
	}
	t.Setenv("LDPSQL_PLUGIN_DIR", dir)
	w, err := datasets.LoadWDBC()
	if err != nil {
		t.Fatal(err)
	}
	var vals []string
	rows := [][]string{{"id"}}
	for j := range 30 {
		rows[0] = append(rows[0], "f"+strconv.Itoa(j+1))
	}
	rows[0] = append(rows[0], "y")
	for i, x := range w.Features {
		s := make([]string, 30)
		for j := range s {
			s[j] = strconv.FormatFloat(x[j], 'g', 7, 64)
		}
		if i < 300 {
			vals = append(vals, fmt.Sprintf("(%d, LDP_VECTOR(%s), %d)", i+1, strings.Join(s, ", "), w.Labels[i]))
		} else {
			rows = append(rows, append(append([]string{strconv.Itoa(i + 1)}, s...), strconv.Itoa(w.Labels[i])))
		}
	}
	mustCLI(t, "sql", "--db", f.db, "-e", "CREATE TABLE aux (id INT PRIMARY KEY, f LONGBLOB NOT NULL, y INT NOT NULL); INSERT INTO aux VALUES "+
		strings.Join(vals, ", ")+`; CALL ldp_fit_mechanism('pca4', 'pca', 'aux', 'f', '{"d": 4, "l": 500}')`)
	mustCLI(t, "mechanisms", "export", "pca4", "--db", f.db, "--out", f.mech)
	file, _ := os.Create(f.csv)
	cw := csv.NewWriter(file)
	_ = cw.WriteAll(rows)
	file.Close()

	// The Parquet inputs come from DuckDB, not from rowfile: parsing the CSV's text straight to FLOAT
	// rounds once, as privatize does with a CSV file, so all three inputs hold the same float32s.
	var list, cols []string
	for j := range 30 {
		list = append(list, fmt.Sprintf("CAST(f%d AS FLOAT)", j+1))
		cols = append(cols, fmt.Sprintf("CAST(f%d AS FLOAT) AS f%d", j+1, j+1))
	}
	from := " FROM read_csv(" + duckString(f.csv) + ", all_varchar = true) ORDER BY CAST(id AS BIGINT)) TO "
	duck(t, "COPY (SELECT CAST(id AS BIGINT) AS id, ["+strings.Join(list, ", ")+"] AS f, CAST(y AS INTEGER) AS y"+from+duckString(f.list)+" (FORMAT parquet)")
	duck(t, "COPY (SELECT CAST(id AS BIGINT) AS id, "+strings.Join(cols, ", ")+", CAST(y AS INTEGER) AS y"+from+duckString(f.cols)+" (FORMAT parquet)")
	return f
}

// privatize runs ldpsql privatize with a fixed noise seed.
func (f *releaseFixture) privatize(t *testing.T, in, out string) {
	t.Helper()
	seed := uint64(13)
	testNoiseSeed = &seed
	defer func() { testNoiseSeed = nil }()
	if out := mustCLI(t, "privatize", "--mechanism", f.mech, "--eps", "20", "--id", "id", "--label", "y", "--k", "2", "--lambda", "0.5", "--in", in, "--out", out); !strings.Contains(out, "released 269 rows") {
		t.Fatalf("privatize: %s", out)
	}
}

func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := runCLI(t, "", args...)
	if code != 0 {
		t.Fatalf("ldpsql %.300s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// failCLI runs a command that must fail and returns its error output.
func failCLI(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := runCLI(t, "", args...)
	if code != 1 {
		t.Errorf("ldpsql %.300s: exit %d, want 1\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return errOut
}

// duckString is s as a DuckDB string literal.
func duckString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// duck runs statements on an in-memory DuckDB.
func duck(t *testing.T, stmt string, args ...any) {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(stmt, args...); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

type release struct {
	id string
	z  []float32
	y  int64
}

func readReleases(t *testing.T, path string) []release {
	t.Helper()
	src, err := rowfile.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var out []release
	vector := src.Columns()[1].Kind == rowfile.KindVector
	for {
		c, err := src.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		r := release{id: rowfile.Text(c[0])}
		if vector {
			r.z, err = rowfile.Floats(nil, c[1])
		} else {
			for _, v := range c[1 : len(c)-1] {
				x, e := rowfile.Float32(v)
				r.z, err = append(r.z, x), cmpErr(err, e)
			}
		}
		y, e := rowfile.Int(c[len(c)-1])
		if err = cmpErr(err, e); err != nil {
			t.Fatalf("%s: %v", src.Where(), err)
		}
		r.y = y
		out = append(out, r)
	}
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// The same rows from CSV, from Parquet with the vector in one list column and from Parquet with a
// column a feature give the same releases under the same noise, written to CSV or to Parquet; a CSV
// file is the same bytes whichever input it came from, and the metadata is the same JSON.
func TestPrivatizeCSVAndParquetAgree(t *testing.T) {
	f := newReleaseFixture(t)
	outs := map[string]string{}
	for _, run := range []struct{ in, out string }{
		{f.csv, "csv_to.csv"}, {f.list, "list_to.parquet"}, {f.cols, "cols_to.csv"}, {f.csv, "csv_to.parquet"},
	} {
		outs[run.out] = filepath.Join(f.dir, run.out)
		f.privatize(t, run.in, outs[run.out])
	}
	want := readReleases(t, outs["csv_to.csv"])
	if len(want) != 269 || want[0].id != "301" || len(want[0].z) != 4 {
		t.Fatalf("CSV releases: %d, first %v", len(want), want[0])
	}
	for _, name := range []string{"list_to.parquet", "cols_to.csv", "csv_to.parquet"} {
		if got := readReleases(t, outs[name]); !reflect.DeepEqual(got, want) {
			t.Errorf("%s differs from csv_to.csv (first row %v, want %v)", name, got[0], want[0])
		}
	}
	a, _ := os.ReadFile(outs["csv_to.csv"])
	b, _ := os.ReadFile(outs["cols_to.csv"])
	if string(a) != string(b) || !strings.HasPrefix(string(a), "id,z1,z2,z3,z4,y\n301,") {
		t.Errorf("CSV from CSV and from Parquet differ, or the header is not id,z1..z4,y:\n%.80s\n%.80s", a, b)
	}
	// Rows are released a batch at a time: with batches of 100, ids and labels stay with their rows (at
	// ε_y = 10 k-RR keeps a label with probability 0.99995).
	privatizeBatch = 100
	small := filepath.Join(f.dir, "small_batches.csv")
	f.privatize(t, f.list, small)
	privatizeBatch = 4096
	input, kept := readReleases(t, f.csv), 0 // id, 30 features, y
	got := readReleases(t, small)
	if len(got) != len(input) {
		t.Fatalf("batches of 100: %d releases of %d rows", len(got), len(input))
	}
	for i := range got {
		if got[i].id != input[i].id {
			t.Fatalf("batches of 100: release %d has id %s, want %s", i, got[i].id, input[i].id)
		}
		if got[i].y == input[i].y {
			kept++
		}
	}
	if kept < len(input)-3 {
		t.Errorf("batches of 100: %d of %d labels kept", kept, len(input))
	}
	// The other seed gives other releases: the comparison above can fail.
	seed := uint64(14)
	testNoiseSeed = &seed
	mustCLI(t, "privatize", "--mechanism", f.mech, "--eps", "20", "--id", "id", "--label", "y", "--k", "2", "--lambda", "0.5", "--in", f.list, "--out", filepath.Join(f.dir, "other.parquet"))
	testNoiseSeed = nil
	if reflect.DeepEqual(readReleases(t, filepath.Join(f.dir, "other.parquet")), want) {
		t.Error("another seed gave the same releases")
	}

	csvMeta, _ := os.ReadFile(outs["csv_to.csv"] + ".meta.json")
	src, _ := rowfile.Open(outs["list_to.parquet"])
	pqMeta, _, err := src.Metadata()
	src.Close()
	if err != nil {
		t.Fatal(err)
	}
	var m1, m2 map[string]any
	if json.Unmarshal(csvMeta, &m1) != nil || json.Unmarshal(pqMeta, &m2) != nil {
		t.Fatalf("metadata: %s / %s", csvMeta, pqMeta)
	}
	delete(m1, "released_at")
	delete(m2, "released_at")
	if !reflect.DeepEqual(m1, m2) || m1["eps_x"] != 10.0 || m1["model_sha256"] == "" || m1["rows"] != 269.0 {
		t.Errorf("metadata differ:\n%v\n%v", m1, m2)
	}
	if _, err := os.Stat(outs["list_to.parquet"] + ".meta.json"); !os.IsNotExist(err) {
		t.Errorf("a Parquet output has a .meta.json beside it: %v", err)
	}
	// The Parquet schema README documents.
	db, _ := sql.Open("duckdb", "")
	defer db.Close()
	rows, err := db.Query("SELECT column_name || ' ' || column_type FROM (DESCRIBE SELECT * FROM read_parquet(?))", outs["list_to.parquet"])
	if err != nil {
		t.Fatal(err)
	}
	var schema []string
	for rows.Next() {
		var c string
		_ = rows.Scan(&c)
		schema = append(schema, c)
	}
	if strings.Join(schema, ", ") != "id BIGINT, z FLOAT[], y INTEGER" {
		t.Errorf("Parquet schema: %v", schema)
	}
}

// Parquet in, Parquet out, imported into a DuckDB-backed database, and a noise-aware classifier trains
// on the table as on an ldp_privatize table; the CSV form of the same releases imports to the same rows.
func TestPrivatizeParquetImportAndTrain(t *testing.T) {
	f := newReleaseFixture(t)
	pq, cv := filepath.Join(f.dir, "rel.parquet"), filepath.Join(f.dir, "rel.csv")
	f.privatize(t, f.list, pq)
	f.privatize(t, f.csv, cv)
	if out := mustCLI(t, "import-releases", "--db", f.db, "--in", pq, "--table", "collected"); !strings.Contains(out, `imported 269 releases of mechanism "pca4" into collected (ε_x 10, label by 2-RR at ε_y 10)`) {
		t.Fatalf("import: %s", out)
	}
	mustCLI(t, "import-releases", "--db", f.db, "--in", cv, "--table", "collected_csv")
	out := mustCLI(t, "sql", "--db", f.db, "-e", "SELECT COUNT(*) AS n, SUM(a.features = b.features AND a.label = b.label) AS same FROM collected a JOIN collected_csv b ON a.id = b.id")
	if !strings.Contains(out, "| 269 | 269  |") {
		t.Errorf("the Parquet and CSV imports differ:\n%s", out)
	}

	ctx := context.Background()
	e, err := openEngine(f.db, udf.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s := newEmbedded(e)
	defer s.close()
	r, err := queryAll(ctx, s, `SELECT TRAIN_NOISY_CLASSIFIER('collected', '{"model": "clf", "seed": 1}')`)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := int64Value(r.firstValue())
	job, err := followJob(ctx, s, id, io.Discard)
	if err != nil || job.State != "succeeded" {
		t.Fatalf("classifier job %d: %s %s %v", id, job.State, job.Error, err)
	}
	r, err = queryAll(ctx, s, "SELECT AVG(PREDICT('clf', f) = y), GREATEST(AVG(y), 1 - AVG(y)) FROM aux")
	if err != nil {
		t.Fatal(err)
	}
	acc, _ := float64Value(r.rows[0][0])
	major, _ := float64Value(r.rows[0][1])
	t.Logf("classifier on the imported Parquet releases: %.3f on the clean aux rows (majority %.3f)", acc, major)
	if !(acc > major+0.05) {
		t.Errorf("accuracy %.3f, majority %.3f", acc, major)
	}
}

// Metadata that is not what privatize wrote for these releases is refused, naming what is wrong, and
// no table is made: in a Parquet file's key-value metadata as in a CSV file's .meta.json.
func TestImportReleasesRefusesBadMetadata(t *testing.T) {
	f := newReleaseFixture(t)
	pq, cv := filepath.Join(f.dir, "rel.parquet"), filepath.Join(f.dir, "rel.csv")
	f.privatize(t, f.list, pq)
	f.privatize(t, f.csv, cv)
	// Randomised response per coordinate needs a box mechanism; pca4's set is an l1 ball.
	if out := failCLI(t, "privatize", "--mechanism", f.mech, "--randomiser", "rr2", "--eps", "20", "--in", f.csv, "--out", filepath.Join(f.dir, "rr.csv")); !strings.Contains(out, "needs a Box output set") {
		t.Errorf("privatize --randomiser rr2 on an l1-ball mechanism: %s", out)
	}
	// Duchi on that ball releases (it is eps-LDP) but warns that laplace adds far less noise.
	code, out, errOut := runCLI(t, "", "privatize", "--mechanism", f.mech, "--randomiser", "duchi", "--eps", "4", "--id", "id", "--label", "y", "--k", "2", "--lambda", "0.5", "--in", f.csv, "--out", filepath.Join(f.dir, "duchi.csv"))
	if code != 0 || !strings.Contains(out, "released 269 rows") || !strings.Contains(errOut, "warning: mechanism \"pca4\": duchi releases an l1 ball") || !strings.Contains(errOut, "use laplace") {
		t.Errorf("privatize --randomiser duchi on an l1-ball mechanism: exit %d\n%s%s", code, out, errOut)
	}
	if _, _, errOut := runCLI(t, "", "privatize", "--mechanism", f.mech, "--eps", "4", "--id", "id", "--label", "y", "--k", "2", "--lambda", "0.5", "--in", f.csv, "--out", filepath.Join(f.dir, "laplace.csv")); strings.Contains(errOut, "warning") {
		t.Errorf("privatize with laplace warns: %s", errOut)
	}
	good, _ := os.ReadFile(cv + ".meta.json")
	edit := func(change func(map[string]any)) string {
		var m map[string]any
		_ = json.Unmarshal(good, &m)
		change(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	for i, tc := range []struct {
		meta string // "" for no ldpsql.releases key at all
		want string
	}{
		{edit(func(m map[string]any) { m["eps"] = 40 }), "eps_x 10 and eps_y 10 are not lambda·eps and (1 − lambda)·eps for eps 40, lambda 0.5"},
		{edit(func(m map[string]any) { m["eps_x"], m["eps_y"] = 12, 8 }), "eps_x 12 and eps_y 8 are not"},
		{edit(func(m map[string]any) { m["model_sha256"] = strings.Repeat("ab", 32) }), `made with a model of mechanism "pca4" whose SHA-256 is abab`},
		{edit(func(m map[string]any) { m["mechanism_sha256"] = "nope" }), `mechanism_sha256 "nope" is not a SHA-256 digest`},
		{edit(func(m map[string]any) { delete(m, "eps_x"); delete(m, "rows") }), "lacks eps_x, rows"},
		{edit(func(m map[string]any) { m["rows"] = 270 }), "has 269 rows, its metadata"},
		{edit(func(m map[string]any) { m["k"] = 1 }), "a label released with k 1"},
		{edit(func(m map[string]any) { m["mechanism"] = "nope" }), `mechanism "nope", which is not registered`},
		{edit(func(m map[string]any) { m["randomiser"] = "gauss" }), `randomiser "gauss" is not one of laplace`},
		{edit(func(m map[string]any) { m["randomiser"] = "rr1" }), `randomiser "rr1" is not one of laplace, duchi, privunit, or rrB`},
		// A known randomiser that cannot release pca4's l1 ball (rrB needs a box).
		{edit(func(m map[string]any) { m["randomiser"] = "rr2" }), `randomiser "rr2" cannot release mechanism "pca4" (output set l1_ball(radius=`},
		{"", `has no key-value metadata "ldpsql.releases"`},
	} {
		bad := filepath.Join(f.dir, fmt.Sprintf("bad%d.parquet", i))
		kv := "other: 'x'"
		if tc.meta != "" {
			kv = "'ldpsql.releases': " + duckString(tc.meta)
		}
		duck(t, "COPY (SELECT * FROM read_parquet(?)) TO "+duckString(bad)+" (FORMAT parquet, KV_METADATA {"+kv+"})", pq)
		table := fmt.Sprintf("bad%d", i)
		if out := failCLI(t, "import-releases", "--db", f.db, "--in", bad, "--table", table); !strings.Contains(out, tc.want) {
			t.Errorf("Parquet %d: %s\nwant %q", i, out, tc.want)
		}
		if tc.meta != "" {
			metaFile := filepath.Join(f.dir, fmt.Sprintf("bad%d.meta.json", i))
			_ = os.WriteFile(metaFile, []byte(tc.meta), 0o644)
			if out := failCLI(t, "import-releases", "--db", f.db, "--in", cv, "--meta", metaFile, "--table", table); !strings.Contains(out, tc.want) {
				t.Errorf("CSV %d: %s\nwant %q", i, out, tc.want)
			}
		}
	}
	// The untouched files import, after all that, as the first tables.
	mustCLI(t, "import-releases", "--db", f.db, "--in", pq, "--table", "ok_parquet")
	mustCLI(t, "import-releases", "--db", f.db, "--in", cv, "--table", "ok_csv")
	if out := mustCLI(t, "sql", "--db", f.db, "-e", "SHOW TABLES"); strings.Contains(out, "bad") || !strings.Contains(out, "ok_parquet") {
		t.Errorf("tables after the refused imports:\n%s", out)
	}
	if out := failCLI(t, "import-releases", "--db", f.db, "--in", pq, "--meta", cv+".meta.json", "--table", "x"); !strings.Contains(out, "--meta: "+pq+" carries its metadata inside") {
		t.Errorf("--meta with Parquet: %s", out)
	}
	// A bad row is refused before the table is made.
	badRows := filepath.Join(f.dir, "badrow.parquet")
	duck(t, "COPY (SELECT id, z, CASE WHEN id = 500 THEN 7 ELSE y END AS y FROM read_parquet(?)) TO "+duckString(badRows)+
		" (FORMAT parquet, KV_METADATA {'ldpsql.releases': "+duckString(string(good))+"})", pq)
	if out := failCLI(t, "import-releases", "--db", f.db, "--in", badRows, "--table", "badrow"); !strings.Contains(out, badRows+" row 200: label 7 is not a class 0..1") {
		t.Errorf("a label out of range: %s", out)
	}
	if out := mustCLI(t, "sql", "--db", f.db, "-e", "SHOW TABLES"); strings.Contains(out, "badrow") {
		t.Errorf("a table was made for refused rows:\n%s", out)
	}
}

// A file whose extension is neither .csv nor .parquet is an error naming the flag and the extension.
func TestReleaseFileExtensions(t *testing.T) {
	dir := t.TempDir()
	mech := filepath.Join(dir, "m.ldpm") // never read: the names are checked first
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"privatize", "--mechanism", mech, "--eps", "1", "--in", "rows.csv", "--out", "rel.txt"}, `--out: rel.txt: unknown extension ".txt": name it .csv or .parquet`},
		{[]string{"privatize", "--mechanism", mech, "--eps", "1", "--in", "rows.json", "--out", "rel.csv"}, `--in: rows.json: unknown extension ".json"`},
		{[]string{"privatize", "--mechanism", mech, "--eps", "1", "--in", "rows", "--out", "rel.parquet"}, "--in: rows has no extension"},
		{[]string{"import-releases", "--db", filepath.Join(dir, "x.duckdb"), "--in", "rel.tsv", "--table", "t"}, `--in: rel.tsv: unknown extension ".tsv"`},
	} {
		if out := failCLI(t, tc.args...); !strings.Contains(out, tc.want) {
			t.Errorf("%v: %s\nwant %q", tc.args, out, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.duckdb")); !os.IsNotExist(err) {
		t.Errorf("import-releases opened the database before checking --in: %v", err)
	}
}

// Several release files (a Beam job's shards, data owners' uploads) import into one table: given by
// --in more than once or by a glob, CSV and Parquet mixed, each checked against its own metadata and
// all against the first's; ids from row numbers run on across files; anything inconsistent writes nothing.
func TestImportReleasesSeveralFiles(t *testing.T) {
	f := newReleaseFixture(t)
	raw, err := os.ReadFile(f.csv)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(raw), "\n"), "\n")
	header, body := lines[0], lines[1:]
	part := func(name string, rows []string) string {
		p := filepath.Join(f.dir, name)
		if err := os.WriteFile(p, []byte(header+strings.Join(rows, "")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	in1, in2 := part("in1.csv", body[:100]), part("in2.csv", body[100:])
	header = header[strings.Index(header, ",")+1:] // the same rows without their id column
	var noID []string
	for _, l := range body {
		noID = append(noID, l[strings.Index(l, ",")+1:])
	}
	bare1, bare2 := part("bare1.csv", noID[:100]), part("bare2.csv", noID[100:])
	shards := filepath.Join(f.dir, "shards")
	if err := os.Mkdir(shards, 0o755); err != nil {
		t.Fatal(err)
	}
	release := func(in, out string, eps string, id bool) {
		args := []string{"privatize", "--mechanism", f.mech, "--eps", eps, "--label", "y", "--k", "2", "--lambda", "0.5", "--in", in, "--out", out}
		if id {
			args = append(args, "--id", "id")
		}
		if out := mustCLI(t, args...); !strings.Contains(out, "released ") {
			t.Fatalf("privatize: %s", out)
		}
	}
	s1, s2 := filepath.Join(shards, "releases-00000.csv"), filepath.Join(shards, "releases-00001.parquet")
	release(in1, s1, "20", true)
	release(in2, s2, "20", true)

	// A glob takes both, and skips what is not a .csv or .parquet file: the CSV file's .meta.json, and
	// what a Beam job writes beside its releases.
	if err := os.WriteFile(filepath.Join(shards, "_SUMMARY.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := mustCLI(t, "import-releases", "--db", f.db, "--in", filepath.Join(shards, "*"), "--table", "all_shards"); !strings.Contains(out, "imported 269 releases of mechanism \"pca4\" from 2 files into all_shards") {
		t.Errorf("import of two shards: %s", out)
	}
	if out := mustCLI(t, "sql", "--db", f.db, "-e", "SELECT COUNT(*), MIN(id), MAX(id), COUNT(DISTINCT id) FROM all_shards"); !strings.Contains(out, "| 269      | 301     | 569     | 269                |") {
		t.Errorf("the imported table: %s", out)
	}
	// It is a release table like one file's: a classifier trains on it.
	mustCLI(t, "sql", "--db", f.db, "-e", `SELECT TRAIN_NOISY_CLASSIFIER('all_shards', '{"model": "clf_both", "seed": 1, "epochs": 5}')`)

	// Without a key column the ids are row numbers, running on from the first file into the second.
	n1, n2 := filepath.Join(f.dir, "noid-1.csv"), filepath.Join(f.dir, "noid-2.csv")
	release(bare1, n1, "20", false)
	release(bare2, n2, "20", false)
	mustCLI(t, "import-releases", "--db", f.db, "--in", n1, "--in", n2, "--table", "numbered")
	if out := mustCLI(t, "sql", "--db", f.db, "-e", "SELECT COUNT(*), MIN(id), MAX(id), COUNT(DISTINCT id) FROM numbered"); !strings.Contains(out, "| 269      | 1       | 269     | 269                |") {
		t.Errorf("row-number ids over two files: %s", out)
	}

	// Refused, and nothing written: releases made at another ε; the same rows twice (their keys
	// collide); a glob that matches nothing; --meta for several files.
	other := filepath.Join(f.dir, "other-eps.csv")
	release(in2, other, "10", true)
	twice := filepath.Join(f.dir, "twice.parquet")
	duck(t, "COPY (SELECT * FROM read_parquet(?)) TO "+duckString(twice)+" (FORMAT parquet, KV_METADATA {'ldpsql.releases': "+
		duckString(parquetMeta(t, s2))+"})", s2)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--in", s1, "--in", other}, "has eps 10, " + s1 + ".meta.json 20: files imported into one table must be releases made the same way"},
		{[]string{"--in", s2, "--in", twice}, "Duplicate entry '401' for key 'refused.PRIMARY' (errno 1062) (sqlstate 23000) (the table was dropped)"},
		{[]string{"--in", filepath.Join(shards, "nothing-*.csv")}, "matches no .csv or .parquet file"},
		{[]string{"--in", filepath.Join(shards, "_*")}, "matches no .csv or .parquet file"},
		{[]string{"--in", s1, "--in", n1, "--meta", s1 + ".meta.json"}, "--meta names one file's metadata, but --in gives 2 files"},
		{[]string{"--in", s1, "--in", n1}, "files imported into one table must have the same"},
	} {
		args := append([]string{"import-releases", "--db", f.db, "--table", "refused"}, tc.args...)
		if out := failCLI(t, args...); !strings.Contains(out, tc.want) {
			t.Errorf("%v: %s\nwant %q", tc.args, out, tc.want)
		}
	}
	if out := mustCLI(t, "sql", "--db", f.db, "-e", "SHOW TABLES"); strings.Contains(out, "refused") {
		t.Errorf("a refused import left a table:\n%s", out)
	}
}

// parquetMeta is the ldpsql.releases metadata of a Parquet release file.
func parquetMeta(t *testing.T, path string) string {
	t.Helper()
	src, err := rowfile.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	raw, _, err := src.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}
