package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
