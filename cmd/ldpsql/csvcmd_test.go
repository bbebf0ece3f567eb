package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ldpsql/ldpsql/internal/rowfile"
)

func TestLoadExportCSV(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "c.duckdb")
	if code, _, errOut := runCLI(t, "", "sql", "--db", db, "-e", "CREATE TABLE people (id INT PRIMARY KEY, age INT, city VARCHAR(40), note TEXT DEFAULT 'none')"); code != 0 {
		t.Fatal(errOut)
	}
	in := "id,age,city\n1,30,Oslo\n2,,\"Bergen, Norway\"\n3,41,\"it's \"\"quoted\"\"\"\n"
	if code, out, errOut := runCLI(t, in, "load", "--db", db, "--table", "people", "-"); code != 0 || !strings.Contains(out, "loaded 3 rows from standard input into people") {
		t.Fatalf("load: %d %s %s", code, out, errOut)
	}
	// Columns in another order, and one left out (its default).
	if code, _, errOut := runCLI(t, "city,id\nX,10\n", "load", "--db", db, "--table", "people", "-"); code != 0 {
		t.Fatalf("load with a column left out: %s", errOut)
	}
	code, out, errOut := runCLI(t, "", "export", "--db", db, "--query", "SELECT * FROM people ORDER BY id")
	want := "id,age,city,note\n1,30,Oslo,none\n2,,\"Bergen, Norway\",none\n3,41,\"it's \"\"quoted\"\"\",none\n10,,X,none\n"
	if code != 0 || out != want {
		t.Fatalf("export: %d %s\n%s\nwant\n%s", code, errOut, out, want)
	}
	outFile := filepath.Join(dir, "empty.csv")
	if code, _, errOut := runCLI(t, "", "export", "--db", db, "--query", "SELECT id, X'00FF' AS b FROM people WHERE id < 0", "--out", outFile); code != 0 {
		t.Fatal(errOut)
	}
	if got, _ := os.ReadFile(outFile); string(got) != "id,b\n" {
		t.Errorf("an empty result exports as its header: %q", got)
	}
	if _, out, _ := runCLI(t, "", "export", "--db", db, "--query", "SELECT X'00FF' AS b, 'text' AS t"); out != "b,t\n0x00FF,text\n" {
		t.Errorf("binary export: %q", out)
	}
	for _, tc := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"id,nope\n1,2\n", []string{"load", "--db", db, "--table", "people", "-"}, `names column "nope", which people does not have (its columns: id, age, city, note)`},
		{"id\n1\n", []string{"load", "--db", db, "--table", "people", "-"}, "Duplicate entry"},
		{"id,age,city,note\n20,1,a,b\n21,99999999999,a,b\n", []string{"load", "--db", db, "--table", "people", "-"}, "row 2, column age, value 99999999999: out of range for int"},
		{"id\n1\n", []string{"load", "--db", db, "--table", "missing", "-"}, "CREATE TABLE it first"},
		{"", []string{"load", "--db", db, "--table", "people", "-"}, "is empty"},
		{"", []string{"export", "--db", db}, "usage: ldpsql export"},
		{"", []string{"export", "--db", db, "--table", "people", "--out", filepath.Join(dir, "bad.csv"), "--query", "SELECT 1"}, "usage: ldpsql export"},
	} {
		if code, _, errOut := runCLI(t, tc.stdin, tc.args...); code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want %q", tc.args, code, errOut, tc.want)
		}
	}
	if code, _, errOut := runCLI(t, "", "export", "--db", db, "--query", "SELECT * FROM nope", "--out", filepath.Join(dir, "bad.csv")); code != 1 || !strings.Contains(errOut, "nope") {
		t.Errorf("failing export: %d %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "bad.csv")); !os.IsNotExist(err) {
		t.Errorf("a failed export left its file: %v", err)
	}
}

// load --features packs feature columns (CSV numbers, or a Parquet list column) into a vector column as
// LDP_VECTOR packs them, and --label loads a column into label; bad features are errors naming them.
func TestLoadPacksFeatures(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "f.duckdb")
	if code, _, errOut := runCLI(t, "", "sql", "--db", db, "-e", "CREATE TABLE pts (id INT PRIMARY KEY, features LONGBLOB, label INT)"); code != 0 {
		t.Fatal(errOut)
	}
	in := "id,a,b,c,diagnosis\n1,0.5,-2,3e2,1\n2,0,0,1,0\n"
	if code, out, errOut := runCLI(t, in, "load", "--db", db, "--table", "pts", "--features", "a, b,c", "--label", "diagnosis", "-"); code != 0 || !strings.Contains(out, "loaded 2 rows") {
		t.Fatalf("load: %d %s %s", code, out, errOut)
	}
	pq := filepath.Join(dir, "pts.parquet")
	sink, err := rowfile.Create(pq, []rowfile.Column{{Name: "id", Kind: rowfile.KindInt}, {Name: "x", Kind: rowfile.KindVector, Width: 3}, {Name: "y", Kind: rowfile.KindInt}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Write(3, []float32{1, 2, 3}, 1); err != nil {
		t.Fatal(err)
	}
	if err := sink.Finish([]byte("{}")); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI(t, "", "load", "--db", db, "--table", "pts", "--features", "x", "--label", "y", pq); code != 0 || !strings.Contains(out, "loaded 1 rows") {
		t.Fatalf("load parquet: %d %s %s", code, out, errOut)
	}
	code, out, errOut := runCLI(t, "", "export", "--db", db, "--query",
		"SELECT id, features = LDP_VECTOR(0.5, -2, 300) OR features = LDP_VECTOR(0, 0, 1) OR features = LDP_VECTOR(1, 2, 3) AS packed, LENGTH(features) AS bytes, label FROM pts ORDER BY id")
	if want := "id,packed,bytes,label\n1,true,12,1\n2,true,12,0\n3,true,12,1\n"; code != 0 || out != want {
		t.Fatalf("loaded rows: %d %s\n%s\nwant\n%s", code, errOut, out, want)
	}
	for _, tc := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"id,a\n9,x\n", []string{"--features", "a"}, `line 2: feature column a: "x" is not a number`},
		{"id,a\n9,NaN\n", []string{"--features", "a"}, "feature column a: NaN is not a finite number"},
		{"id,a\n9,1\n", []string{"--features", "a,nope"}, `--features names column "nope", which the file does not have (its columns: id, a)`},
		{"id,a\n9,1\n", []string{"--features", "a", "--label", "a"}, "also one of --features"},
		{"id,features,a\n9,1,2\n", []string{"--features", "a"}, `the file has a column "features" besides --features`},
	} {
		args := append([]string{"load", "--db", db, "--table", "pts"}, tc.args...)
		if code, _, errOut := runCLI(t, tc.stdin, append(args, "-")...); code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want %q", tc.args, code, errOut, tc.want)
		}
	}
}

// export --format parquet: integers BIGINT, numbers DOUBLE (NULL kept), text VARCHAR (NULL empty); no release
// metadata for a table ldp_privatize did not write; format and extension must agree.
func TestExportParquet(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "p.duckdb")
	if code, _, errOut := runCLI(t, "", "sql", "--db", db, "-e", "CREATE TABLE m (id INT PRIMARY KEY, x DOUBLE, d DECIMAL(6,2), s VARCHAR(10)); "+
		"INSERT INTO m VALUES (1, 0.5, 2.50, 'a'), (2, NULL, -1.25, '007'), (3, 1e-5, 3.00, NULL)"); code != 0 {
		t.Fatal(errOut)
	}
	out := filepath.Join(dir, "m.parquet")
	if code, _, errOut := runCLI(t, "", "export", "--db", db, "--table", "m", "--format", "parquet", "--out", out); code != 0 || !strings.Contains(errOut, "exported 3 rows to "+out+"\n") {
		t.Fatalf("export --format parquet: %d %s", code, errOut)
	}
	src, err := rowfile.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, _, err := src.Metadata(); err == nil {
		t.Error("release metadata in the export of a table ldp_privatize did not write")
	}
	var rows []string
	for {
		cells, err := src.Next()
		if err != nil {
			break
		}
		var r []string
		for _, c := range cells {
			r = append(r, fmt.Sprintf("%T:%v", c, c))
		}
		rows = append(rows, strings.Join(r, " "))
	}
	want := []string{
		"int64:1 float64:0.5 float64:2.5 string:a",
		"int64:2 <nil>:<nil> float64:-1.25 string:007",
		"int64:3 float64:1e-05 float64:3 string:", // NULL in a VARCHAR column: empty, as in CSV
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
	for _, args := range [][]string{
		{"export", "--db", db, "--table", "m", "--format", "parquet"},
		{"export", "--db", db, "--table", "m", "--format", "parquet", "--out", filepath.Join(dir, "m.csv")},
		{"export", "--db", db, "--table", "m", "--format", "xml", "--out", out},
	} {
		if code, _, errOut := runCLI(t, "", args...); code != 1 || !strings.Contains(errOut, "--") {
			t.Errorf("%v: exit %d, %s", args, code, errOut)
		}
	}
}
