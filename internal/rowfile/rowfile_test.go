package rowfile

import (
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func readAll(t *testing.T, path string) ([]Column, [][]any, Source) {
	t.Helper()
	src, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	var rows [][]any
	for {
		r, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	return src.Columns(), rows, src
}

func TestFormatOf(t *testing.T) {
	for path, want := range map[string]Format{"a.csv": CSV, "dir.x/A.CSV": CSV, "r.parquet": Parquet, "r.Parquet": Parquet} {
		if f, err := FormatOf(path); err != nil || f != want {
			t.Errorf("%s: %v %v, want %v", path, f, err, want)
		}
	}
	for path, want := range map[string]string{"rows.txt": `rows.txt: unknown extension ".txt": name it .csv or .parquet`, "rows": "rows has no extension"} {
		if _, err := FormatOf(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", path, err, want)
		}
		if _, err := Create(filepath.Join(t.TempDir(), path), nil); err == nil {
			t.Errorf("Create(%s) succeeded", path)
		}
	}
}

// The CSV sink writes exactly what `ldpsql privatize` wrote before it had one: id as given, each
// released value as the shortest text of its float32, the label; the metadata in FILE.meta.json.
func TestCSVSink(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rel.csv")
	s, err := Create(path, []Column{{Name: "id", Kind: KindScalar}, {Name: "z", Kind: KindVector, Width: 3}, {Name: "y", Kind: KindInt}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][]any{{"a,1", []float32{0.1, -2.5e-8, 3}, 1}, {"2", []float32{float32(math.Pi), 1e30, 0}, 0}} {
		if err := s.Write(r...); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Write("3", []float32{1, 2}, 0); err == nil {
		t.Error("a vector of the wrong width was written")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the file exists before Finish: %v", err)
	}
	if err := s.Finish([]byte(`{"k": 2}`)); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if want := "id,z1,z2,z3,y\n\"a,1\",0.1,-2.5e-08,3,1\n2,3.1415927,1e+30,0,0\n"; string(got) != want {
		t.Errorf("CSV:\n%s\nwant\n%s", got, want)
	}
	if meta, _ := os.ReadFile(path + ".meta.json"); string(meta) != `{"k": 2}` {
		t.Errorf("metadata %q", meta)
	}
	if _, err := os.Stat(path + ".partial"); !os.IsNotExist(err) {
		t.Errorf("the partial file is left: %v", err)
	}
	// Discard leaves nothing.
	other := filepath.Join(dir, "other.csv")
	s, _ = Create(other, []Column{{Name: "id", Kind: KindScalar}})
	_ = s.Write("1")
	s.Discard()
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("after Discard the directory holds %d files", len(ents))
	}
	if _, err := Create(filepath.Join(dir, "x.csv"), []Column{{Name: "z1", Kind: KindScalar}, {Name: "z", Kind: KindVector, Width: 2}}); err == nil || !strings.Contains(err.Error(), `two columns called "z1"`) {
		t.Errorf("clashing names: %v", err)
	}
}

func TestCSVSource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rows.csv")
	_ = os.WriteFile(path, []byte("id,note,x\n1,\"two\nlines\",1.5\n2,b, 7 \n3,c\n"), 0o644)
	src, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if cols := src.Columns(); len(cols) != 3 || cols[2] != (Column{Name: "x", Kind: KindScalar}) {
		t.Fatalf("columns %v", cols)
	}
	r, _ := src.Next()
	if x, err := Float32(r[2]); err != nil || x != 1.5 || r[1] != "two\nlines" || src.Where() != path+" line 2" {
		t.Errorf("row 1: %v %v %v at %s", r, x, err, src.Where())
	}
	r, _ = src.Next()
	if x, err := Int(r[2]); err != nil || x != 7 || src.Where() != path+" line 4" {
		t.Errorf("row 2: %v %v %v at %s", r, x, err, src.Where())
	}
	if _, err := src.Next(); err == nil || !strings.Contains(err.Error(), "wrong number of fields") {
		t.Errorf("a short row: %v", err)
	}
	if _, from, err := src.Metadata(); from != path+".meta.json" || !os.IsNotExist(err) {
		t.Errorf("missing metadata: %s %v", from, err)
	}
	empty := filepath.Join(t.TempDir(), "empty.csv")
	_ = os.WriteFile(empty, nil, 0o644)
	if _, err := Open(empty); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("an empty file: %v", err)
	}
}

// Releases written to Parquet read back as written, with their metadata byte for byte; an id column
// of plain integers becomes BIGINT (an empty value NULL), of plain numbers DOUBLE, any other VARCHAR.
func TestParquetRoundTrip(t *testing.T) {
	dir := t.TempDir()
	meta := []byte("{\n  \"label\": \"it's a \\\"y\\\" \\\\ ε\"\n}")
	for _, tc := range []struct {
		ids    []string
		idType string
		idRead []any
		name   string
	}{
		{[]string{"1", "-20", "300"}, "BIGINT", []any{int64(1), int64(-20), int64(300)}, ""},
		{[]string{"1", "007", "x"}, "VARCHAR", []any{"1", "007", "x"}, ""},
		{[]string{"1", "", "3"}, "BIGINT", []any{int64(1), nil, int64(3)}, "null"},
		{[]string{"2.50", "-1e-05", ""}, "DOUBLE", []any{2.5, -1e-05, nil}, ""},
		{[]string{"2.5", "007", "1"}, "VARCHAR", []any{"2.5", "007", "1"}, "leading_zero"},
	} {
		path := filepath.Join(dir, "rel_"+tc.idType+tc.name+".parquet")
		s, err := Create(path, []Column{{Name: "id", Kind: KindScalar}, {Name: "z", Kind: KindVector, Width: 2}, {Name: "it's y", Kind: KindInt}})
		if err != nil {
			t.Fatal(err)
		}
		zs := [][]float32{{0.1, -1}, {float32(math.Pi), 1e-30}, {0, 5}}
		for i, id := range tc.ids {
			if err := s.Write(id, zs[i], i); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("the file exists before Finish: %v", err)
		}
		if err := s.Finish(meta); err != nil {
			t.Fatal(err)
		}
		cols, rows, src := readAll(t, path)
		if want := []Column{{Name: "id"}, {Name: "z", Kind: KindVector}, {Name: "it's y"}}; !reflect.DeepEqual(cols, want) {
			t.Errorf("columns %v, want %v", cols, want)
		}
		if len(rows) != 3 {
			t.Fatalf("%d rows", len(rows))
		}
		for i, r := range rows {
			z, err := Floats(nil, r[1])
			if r[0] != tc.idRead[i] || err != nil || !reflect.DeepEqual(z, zs[i]) || r[2] != int32(i) {
				t.Errorf("row %d: %#v (%v)", i, r, err)
			}
		}
		if src.Where() != path+" row 3" {
			t.Errorf("Where: %s", src.Where())
		}
		got, from, err := src.Metadata()
		if err != nil || string(got) != string(meta) || !strings.Contains(from, `key-value metadata "ldpsql.releases"`) {
			t.Errorf("metadata %q from %s, %v", got, from, err)
		}
		db, _ := sql.Open("duckdb", "")
		var typ string
		if err := db.QueryRow("SELECT column_type FROM (DESCRIBE SELECT * FROM read_parquet(?)) WHERE column_name = 'id'", path).Scan(&typ); err != nil || typ != tc.idType {
			t.Errorf("id column %s (%v), want %s", typ, err, tc.idType)
		}
		db.Close()
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 5 {
		t.Errorf("%d files left in %s", len(ents), dir)
	}
	// No releases metadata: an error that names the key.
	db, _ := sql.Open("duckdb", "")
	defer db.Close()
	plain := filepath.Join(dir, "plain.parquet")
	if _, err := db.Exec("COPY (SELECT 1 AS a) TO " + sqlString(plain) + " (FORMAT parquet, KV_METADATA {other: 'x'})"); err != nil {
		t.Fatal(err)
	}
	src, err := Open(plain)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, _, err := src.Metadata(); err == nil || !strings.Contains(err.Error(), `no key-value metadata "ldpsql.releases" (it has other)`) {
		t.Errorf("no metadata: %v", err)
	}
	if _, err := Open(filepath.Join(dir, "missing.parquet")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
	if _, err := Open(filepath.Join(dir, "rows-*.parquet")); err == nil || !strings.Contains(err.Error(), "read as a pattern") {
		t.Errorf("a pattern: %v", err)
	}
}

// A file of many row groups is read in ranges (several for one row group when rangeBytes is small),
// every row once, in order.
func TestParquetRanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rows.parquet")
	db, _ := sql.Open("duckdb", "")
	defer db.Close()
	const n = 20000
	if _, err := db.Exec("COPY (SELECT i AS id, [i, i + 0.5]::DOUBLE[] AS f, i % 3 AS y FROM range(" + "20000" + ") r(i)) TO " +
		sqlString(path) + " (FORMAT parquet, ROW_GROUP_SIZE 4096)"); err != nil {
		t.Fatal(err)
	}
	var groups int
	if err := db.QueryRow("SELECT count(DISTINCT row_group_id) FROM parquet_metadata(?)", path).Scan(&groups); err != nil || groups < 2 {
		t.Fatalf("%d row groups (%v); the test wants several", groups, err)
	}
	for _, limit := range []int64{rangeBytes, 10 << 10} {
		saved := rangeBytes
		rangeBytes = limit
		src, err := openParquet(path)
		rangeBytes = saved
		if err != nil {
			t.Fatal(err)
		}
		if limit < saved && len(src.ranges) <= groups {
			t.Errorf("%d ranges for %d row groups at %d bytes a range", len(src.ranges), groups, limit)
		}
		i := int64(0)
		for ; ; i++ {
			r, err := src.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			f, err := Floats(nil, r[1])
			y, _ := Int(r[2])
			if id, _ := Int(r[0]); id != i || err != nil || len(f) != 2 || f[1] != float32(i)+0.5 || y != i%3 {
				t.Fatalf("row %d: %v", i, r)
			}
		}
		src.Close()
		if i != n {
			t.Errorf("%d rows, want %d", i, n)
		}
	}
}

// FLOAT[] and DOUBLE[] columns are read from DuckDB's vectors (listReader), over several chunks and
// ranges: a NULL list is NULL, a list with a NULL element is the []any that names it, an empty list is
// empty; a file of list columns only has all its rows.
func TestParquetListColumns(t *testing.T) {
	dir := t.TempDir()
	db, _ := sql.Open("duckdb", "")
	defer db.Close()
	mixed, only := filepath.Join(dir, "mixed.parquet"), filepath.Join(dir, "only.parquet")
	if _, err := db.Exec("COPY (SELECT i AS id, CASE i % 1000 WHEN 7 THEN NULL WHEN 8 THEN [1, NULL]::FLOAT[] WHEN 9 THEN []::FLOAT[] " +
		"ELSE [i, -i]::FLOAT[] END AS f, 'x' || i AS s, [i * 0.25]::DOUBLE[] AS g FROM range(5000) r(i)) TO " + sqlString(mixed) +
		" (FORMAT parquet, ROW_GROUP_SIZE 3000)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("COPY (SELECT [i]::FLOAT[] AS f FROM range(3000) r(i)) TO " + sqlString(only) + " (FORMAT parquet)"); err != nil {
		t.Fatal(err)
	}
	_, rows, _ := readAll(t, mixed)
	if len(rows) != 5000 {
		t.Fatalf("%d rows, want 5000", len(rows))
	}
	for i, r := range rows {
		f, ferr := Floats(nil, r[1])
		g, gerr := Floats(nil, r[3])
		id, _ := Int(r[0])
		ok := id == int64(i) && r[2] == "x"+Text(r[0]) && gerr == nil && reflect.DeepEqual(g, []float32{float32(i) * 0.25})
		switch i % 1000 {
		case 7:
			ok = ok && r[1] == nil
		case 8:
			ok = ok && ferr != nil && ferr.Error() == "element 2: NULL is not a number"
		case 9:
			ok = ok && ferr == nil && len(f) == 0
		default:
			_, direct := r[1].([]float32) // not a boxed value an element
			ok = ok && direct && ferr == nil && reflect.DeepEqual(f, []float32{float32(i), -float32(i)})
		}
		if !ok {
			t.Fatalf("row %d: %#v (%v, %v)", i, r, ferr, gerr)
		}
	}
	_, rows, src := readAll(t, only)
	for i, r := range rows {
		if f, err := Floats(nil, r[0]); err != nil || len(r) != 1 || !reflect.DeepEqual(f, []float32{float32(i)}) {
			t.Fatalf("row %d: %#v (%v)", i, r, err)
		}
	}
	if len(rows) != 3000 || src.Where() != only+" row 3000" {
		t.Errorf("%d rows, the last at %s", len(rows), src.Where())
	}
}

func TestCells(t *testing.T) {
	for _, tc := range []struct {
		v    any
		f    float32
		ferr string
		i    int64
		ierr string
	}{
		{" 2.5 ", 2.5, "", 0, `" 2.5 " is not an integer`},
		{"7", 7, "", 7, ""},
		{"", 0, `"" is not a number`, 0, `"" is not an integer`},
		{nil, 0, "NULL is not a number", 0, "NULL is not an integer"},
		{int32(-3), -3, "", -3, ""},
		{uint64(math.MaxUint64), math.MaxUint64, "", 0, "is not an integer"},
		{3.0, 3, "", 3, ""},
		{3.5, 3.5, "", 0, "3.5 is not an integer"},
		{[]any{1.0}, 0, "[1] is not a number", 0, "is not an integer"},
	} {
		f, err := Float32(tc.v)
		if (tc.ferr == "" && (err != nil || f != tc.f)) || (tc.ferr != "" && (err == nil || !strings.Contains(err.Error(), tc.ferr))) {
			t.Errorf("Float32(%#v) = %v, %v", tc.v, f, err)
		}
		i, err := Int(tc.v)
		if (tc.ierr == "" && (err != nil || i != tc.i)) || (tc.ierr != "" && (err == nil || !strings.Contains(err.Error(), tc.ierr))) {
			t.Errorf("Int(%#v) = %v, %v", tc.v, i, err)
		}
	}
	if f, err := Floats([]float32{9}, []any{float32(1), int64(2), "3"}); err != nil || !reflect.DeepEqual(f, []float32{9, 1, 2, 3}) {
		t.Errorf("Floats: %v %v", f, err)
	}
	if _, err := Floats(nil, []any{1.0, nil}); err == nil || err.Error() != "element 2: NULL is not a number" {
		t.Errorf("Floats with a NULL: %v", err)
	}
	if Text(int64(12)) != "12" || Text(float32(0.1)) != "0.1" || Text(nil) != "" {
		t.Errorf("Text: %q %q %q", Text(int64(12)), Text(float32(0.1)), Text(nil))
	}
}

// Parts and OpenPart read a file in parts as a Source of the whole file reads it: every row once, in
// order, each named by the same Where.
func TestParquetParts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rows.parquet")
	db, _ := sql.Open("duckdb", "")
	defer db.Close()
	if _, err := db.Exec("COPY (SELECT i AS id, [i, i + 0.5]::DOUBLE[] AS f FROM range(10000) r(i)) TO " +
		sqlString(path) + " (FORMAT parquet, ROW_GROUP_SIZE 2048)"); err != nil {
		t.Fatal(err)
	}
	parts, err := Parts(path)
	if err != nil || len(parts) < 2 {
		t.Fatalf("parts %v, %v: the test wants several", parts, err)
	}
	readsAsWhole(t, path, len(parts), func(k int) (Source, error) { return OpenPart(path, parts[k][0], parts[k][1]) })
}

// readsAsWhole checks that the n parts open returns hold path's rows as a Source of the whole file
// reads them: every row once, in order, each named by the same Where.
func readsAsWhole(t *testing.T, path string, n int, open func(k int) (Source, error)) {
	t.Helper()
	_, whole, _ := readAll(t, path)
	src, _ := Open(path)
	var wheres []string
	for {
		if _, err := src.Next(); err != nil {
			break
		}
		wheres = append(wheres, src.Where())
	}
	src.Close()
	i := 0
	for k := range n {
		src, err := open(k)
		if err != nil {
			t.Fatal(err)
		}
		for {
			r, err := src.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("part %d: %v", k, err)
			}
			if i >= len(whole) || !reflect.DeepEqual(r, whole[i]) || src.Where() != wheres[i] {
				t.Fatalf("part %d: row %v at %s, want row %d of %d", k, r, src.Where(), i, len(whole))
			}
			i++
		}
		src.Close()
	}
	if i != len(whole) {
		t.Errorf("the parts hold %d rows, the file %d", i, len(whole))
	}
}

// Readers one after another share DuckDB instances (readerpool.go): each still reads only its own
// file, whatever the one before read.
func TestParquetReadersReuseInstances(t *testing.T) {
	dir := t.TempDir()
	db, _ := sql.Open("duckdb", "")
	defer db.Close()
	a, b := filepath.Join(dir, "a.parquet"), filepath.Join(dir, "b.parquet")
	if _, err := db.Exec("COPY (SELECT i AS id, [i, 2 * i]::FLOAT[] AS f FROM range(300) r(i)) TO " + sqlString(a) + " (FORMAT parquet)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("COPY (SELECT 'r' || i AS name, [i * 0.5]::DOUBLE[] AS g, i % 2 AS y FROM range(200) r(i)) TO " + sqlString(b) + " (FORMAT parquet)"); err != nil {
		t.Fatal(err)
	}
	read := func(path string) [][]any { // closed at once, for the next reader to take its instances
		_, rows, src := readAll(t, path)
		src.Close()
		return rows
	}
	for round := range 2 {
		ra, rb := read(a), read(b)
		if len(ra) != 300 || len(rb) != 200 {
			t.Fatalf("round %d: %d and %d rows, want 300 and 200", round, len(ra), len(rb))
		}
		f, _ := Floats(nil, ra[299][1])
		g, _ := Floats(nil, rb[199][1])
		if len(ra[0]) != 2 || len(rb[0]) != 3 || !reflect.DeepEqual(f, []float32{299, 598}) || !reflect.DeepEqual(g, []float32{99.5}) || rb[199][0] != "r199" {
			t.Errorf("round %d: last rows %#v and %#v", round, ra[299], rb[199])
		}
	}
	idleMu.Lock()
	held, lists := len(idleSQL), len(idleLists)
	idleMu.Unlock()
	if held == 0 || lists == 0 || held > maxIdleReaders || lists > maxIdleReaders {
		t.Errorf("%d and %d idle reader instances, want 1..%d of each", held, lists, maxIdleReaders)
	}
}

// CSVParts cuts a CSV file at record boundaries only — never inside a quoted field that holds line
// breaks, commas or doubled quotes, CRLF or LF — and OpenCSVPart reads each part as a Source of the
// whole file would: every record once, in order, each named by the same Where (its line in the file).
// A file whose quoting the reader would reject is not cut.
func TestCSVParts(t *testing.T) {
	defer func(b int64) { CSVPartBytes = b }(CSVPartBytes)
	CSVPartBytes = 300
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("id,label,note\n")
	for i := range 2000 {
		note := fmt.Sprintf("plain %d", i)
		switch i % 7 {
		case 3:
			note = fmt.Sprintf("\"two\nlines, a comma and \"\"quotes\"\" %d\"", i)
		case 5:
			note = "\"\""
		}
		end := "\n"
		if i%4 == 1 {
			end = "\r\n"
		}
		fmt.Fprintf(&b, "%d,%d,%s%s", i, i%3, note, end)
	}
	path := filepath.Join(dir, "rows.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	parts, err := CSVParts(path)
	if err != nil || len(parts) < 20 {
		t.Fatalf("parts %v, %v: the test wants many", parts, err)
	}
	for k := 1; k < len(parts); k++ {
		if parts[k].From != parts[k-1].To {
			t.Fatalf("part %d starts at %d, the one before ends at %d", k, parts[k].From, parts[k-1].To)
		}
	}
	if end := parts[len(parts)-1].To; end != int64(b.Len()) {
		t.Fatalf("the parts end at %d, the file at %d", end, b.Len())
	}
	readsAsWhole(t, path, len(parts), func(k int) (Source, error) { return OpenCSVPart(path, parts[k]) })

	for name, text := range map[string]string{
		"bare quote":    "a,b\n" + strings.Repeat("1,2\n", 100) + "1,x\"y\n" + strings.Repeat("3,4\n", 100),
		"after closing": "a,b\n" + strings.Repeat("1,2\n", 100) + "1,\"x\"y\n" + strings.Repeat("3,4\n", 100),
		"never closed":  "a,b\n" + strings.Repeat("1,2\n", 100) + "1,\"x\n" + strings.Repeat("3,4\n", 100),
	} {
		bad := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".csv")
		if err := os.WriteFile(bad, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if parts, err := CSVParts(bad); err != nil || len(parts) != 1 || parts[0] != (CSVPart{0, int64(len(text)), 1}) {
			t.Errorf("%s: parts %v, %v; want the whole file as one", name, parts, err)
		}
	}
}
