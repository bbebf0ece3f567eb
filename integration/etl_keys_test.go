package integration

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ldpsql/ldpsql/training/datasets"
)

// `ldpsql etl privatize --from-db` on tables of every kind of primary key (composite, strings under
// utf8mb4_0900_ai_ci and utf8mb4_bin, decimals, dates, binary strings) and of none: the real
// ldpsql-etl against a real `serve`, every row read exactly once in several parts, the key written
// back column for column.

// wdbcCells are the 269 WDBC rows newETLFixture's tables hold (the 300 before them fit pca4), as SQL:
// the packed features and the label.
func wdbcCells(t *testing.T) (vecs []string, labels []int) {
	t.Helper()
	w, err := datasets.LoadWDBC()
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range w.Features[300:] {
		s := make([]string, len(x))
		for j, v := range x {
			s[j] = strconv.FormatFloat(v, 'g', 7, 64)
		}
		vecs = append(vecs, "LDP_VECTOR("+strings.Join(s, ", ")+")")
		labels = append(labels, w.Labels[300+i])
	}
	return vecs, labels
}

// aliceNames are first key columns the default collation calls equal in groups: case, an accent and
// full-width letters (which the key's unique index, on lower(strip_accents(…)), keeps apart).
var aliceNames = []string{"alice", "Alice", "ALICE", "Álice", "bob", "Bob", "Böb", "carol", "ａｌｉｃｅ"}

// compositeKey is row i's (name, n): names repeat every 9 rows, n = i, except that a full-width
// 'ａｌｉｃｅ' takes the n of the 'alice' 8 rows before it, so those two keys are equal as the
// collation compares, column for column.
func compositeKey(i int) string {
	n := i
	if i%9 == 8 {
		n = i - 8
	}
	return fmt.Sprintf("'%s', %d", aliceNames[i%9], n)
}

// keyCase is a source table: its key columns' definitions, PRIMARY KEY clause and row i's key.
type keyCase struct {
	name, defs, pk string
	key            func(i int) string
	keyCols        []string // HEX(...)-able key columns, to compare byte for byte
}

var keyCases = []keyCase{
	{"composite_ci", "name VARCHAR(40) NOT NULL, n INT NOT NULL", "PRIMARY KEY (name, n)", compositeKey, []string{"name", "n"}},
	{"string_ci", "k VARCHAR(30) NOT NULL", "PRIMARY KEY (k)", func(i int) string {
		// row007, ｒｏｗ007 (equal to it in the collation), Rów1007, …
		return [...]string{fmt.Sprintf("'row%03d'", i/3), fmt.Sprintf("'ｒｏｗ%03d'", i/3), fmt.Sprintf("'Rów%03d'", 1000+i/3)}[i%3]
	}, []string{"k"}},
	{"string_bin", "k VARCHAR(30) COLLATE utf8mb4_bin NOT NULL", "PRIMARY KEY (k)", func(i int) string {
		return fmt.Sprintf("'%s%03d'", [...]string{"a", "A", "á"}[i%3], i/3) // three keys, one to the default collation
	}, []string{"k"}},
	{"decimal", "k DECIMAL(10,2) NOT NULL", "PRIMARY KEY (k)", func(i int) string { return fmt.Sprintf("%.2f", float64(i-134)/4) }, []string{"k"}},
	{"date", "d DATE NOT NULL, b VARBINARY(4) NOT NULL", "PRIMARY KEY (d, b)", func(i int) string {
		return fmt.Sprintf("'%s', X'%02x00ff'", time.Date(2024, 2, 27, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i/2).Format("2006-01-02"), 255-i%2)
	}, []string{"d", "b"}},
	{"nokey", "", "", nil, nil},
}

// createKeyTable creates c's table named table with the WDBC rows (f packed, y).
func createKeyTable(t *testing.T, f *etlFixture, c keyCase, table string) {
	vecs, labels := wdbcCells(t)
	defs := []string{"f LONGBLOB NOT NULL", "y INT NOT NULL"}
	if c.defs != "" {
		defs = append([]string{c.defs}, append(defs, c.pk)...)
	}
	mustExec(t, f.root, "CREATE TABLE "+table+" ("+strings.Join(defs, ", ")+")")
	var rows []string
	for i := range vecs {
		key := ""
		if c.key != nil {
			key = c.key(i) + ", "
		}
		rows = append(rows, fmt.Sprintf("(%s%s, %d)", key, vecs[i], labels[i]))
	}
	mustExec(t, f.root, "INSERT INTO "+table+" VALUES "+strings.Join(rows, ", "))
}

// keyBytes lists table's keys (cols) byte for byte, sorted.
func keyBytes(t *testing.T, f *etlFixture, table string, cols []string) []string {
	hexed := make([]string, len(cols))
	for i, c := range cols {
		hexed[i] = "HEX(" + c + ")"
	}
	rows, err := queryAll(f.root, "SELECT "+strings.Join(hexed, ", ")+" FROM "+table)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, strings.Join(r, " "))
	}
	slices.Sort(out)
	return out
}

// Every key kind to a table and back: 269 releases in 4 parts, each source row's key once in the
// destination, the key columns with the source's types and collations (a table without a key gets
// row_id 1..269, as ldp_privatize's destination).
func TestEtlFromDBAnyKey(t *testing.T) {
	f := newETLFixture(t)
	for _, c := range keyCases {
		t.Run(c.name, func(t *testing.T) {
			src, dst := "k_"+c.name, "k_"+c.name+"_rel"
			createKeyTable(t, f, c, src)
			out, err := f.privatize(t, src, "--partitions", "4", "--to-db", f.dsn, "--into", dst)
			parts := "4 parts"
			if c.key == nil {
				parts = "1 part"
			}
			if err != nil || !strings.Contains(out, "released 269 rows") || !strings.Contains(out, "read "+src+" in "+parts) {
				t.Fatalf("etl privatize: %v\n%s", err, out)
			}
			if c.key == nil {
				if n := f.ints(t, "SELECT COUNT(DISTINCT row_id) FROM "+dst+" WHERE row_id BETWEEN 1 AND 269"); n[0] != 269 {
					t.Errorf("%d distinct row_ids in 1..269, want 269", n[0])
				}
				return
			}
			want := keyBytes(t, f, src, c.keyCols)
			if got := keyBytes(t, f, dst, c.keyCols); !slices.Equal(got, want) {
				t.Errorf("the destination's %d keys are not the source's %d, byte for byte", len(got), len(want))
			}
			typesOf := func(table string) [][]string {
				rows, err := queryAll(f.root, "SELECT column_name, column_type, COALESCE(collation_name, ''), column_key FROM information_schema.columns WHERE table_name = ? AND column_name IN ('"+
					strings.Join(c.keyCols, "', '")+"') ORDER BY column_name", table)
				if err != nil {
					t.Fatal(err)
				}
				return rows
			}
			if s, d := typesOf(src), typesOf(dst); fmt.Sprint(s) != fmt.Sprint(d) {
				t.Errorf("key columns %v in the destination, %v in the source", d, s)
			}
		})
	}
	// To files: the key's columns in releases.parquet, which import-releases takes as the key.
	t.Run("composite_ci_to_files", func(t *testing.T) {
		c := keyCases[0]
		createKeyTable(t, f, c, "k_files")
		out := filepath.Join(f.dir, "files")
		if got, err := f.privatize(t, "k_files", "--partitions", "3", "--out", out); err != nil || !strings.Contains(got, "released 269 rows") || !strings.Contains(got, "in 3 parts") {
			t.Fatalf("etl privatize to files: %v\n%s", err, got)
		}
		imp, err := exec.Command(ldpsqlBin, "import-releases", "--addr", f.srv.addr, "--in", filepath.Join(out, "releases.parquet"), "--table", "k_imported").CombinedOutput()
		if err != nil || !strings.Contains(string(imp), "imported 269 releases") {
			t.Fatalf("import-releases: %v\n%s", err, imp)
		}
		if got, want := keyBytes(t, f, "k_imported", c.keyCols), keyBytes(t, f, "k_files", c.keyCols); !slices.Equal(got, want) {
			t.Errorf("the imported releases' keys are not the source's")
		}
	})
}

// A protected source keyed by (name, n), its unit: each unit is charged through the server by its key
// as the collation folds it, so the 29 full-width rows whose key equals an 'alice' row's are a second
// release of that unit, which its budget (10, at 8 a release) refuses. A rerun with the job's id,
// read in the same parts and order, charges nothing again.
func TestEtlProtectedCompositeUnit(t *testing.T) {
	f := newETLFixture(t)
	createKeyTable(t, f, keyCases[0], "pc")
	mustExec(t, f.root, "CALL ldp_set_budget('pc', 10)")
	run := func(dir string, extra ...string) string {
		t.Helper()
		out, err := f.privatize(t, "pc", append([]string{"--partitions", "4", "--charge-batch", "7", "--out", filepath.Join(f.dir, dir)}, extra...)...)
		if err != nil || !strings.Contains(out, "released 240 rows") || !strings.Contains(out, "29 rows of 29 units left out") || !strings.Contains(out, "in 4 parts") {
			t.Fatalf("etl privatize: %v\n%s", err, out)
		}
		return out
	}
	first := run("first")
	charges := f.ints(t, "SELECT COUNT(*) FROM ldpsql_catalog.ldp_releases WHERE table_name = 'pc'")[0]
	if charges != 2*240 {
		t.Errorf("%d charges, want %d", charges, 2*240)
	}
	check := func() {
		t.Helper()
		spent := spentByUnit(t, f.root, "pc")
		if len(spent) != 240 {
			t.Errorf("%d units charged, want 240", len(spent))
		}
		for u, s := range spent {
			if s != 8 {
				t.Errorf("unit %s spent %v, want 8", u, s)
			}
		}
		if s, ok := spent[`["alice","0"]`]; !ok || s != 8 {
			t.Errorf(`unit ["alice","0"] (also 'ａｌｉｃｅ', 0) spent %v, want 8 (one of its two rows)`, s)
		}
	}
	check()
	job := jobRE.FindStringSubmatch(first)
	if job == nil {
		t.Fatalf("no job id in %s", first)
	}
	run("rerun", "--job-id", job[1])
	if n := f.ints(t, "SELECT COUNT(*) FROM ldpsql_catalog.ldp_releases WHERE table_name = 'pc'")[0]; n != charges {
		t.Errorf("the rerun charged %d more releases", n-charges)
	}
	check()
}

// A protected table without a primary key ('charge' mode, unit owner): read as one part in the unit's
// order, every row charged to its owner once, the releases without an id; a rerun with the job's id
// charges nothing again.
func TestEtlProtectedNoKey(t *testing.T) {
	f := newETLFixture(t)
	vecs, labels := wdbcCells(t)
	mustExec(t, f.root, "CREATE TABLE nk (owner INT NOT NULL, f LONGBLOB NOT NULL, y INT NOT NULL)")
	var rows []string
	for i := range vecs {
		rows = append(rows, fmt.Sprintf("(%d, %s, %d)", (i*7)%50, vecs[i], labels[i]))
	}
	mustExec(t, f.root, "INSERT INTO nk VALUES "+strings.Join(rows, ", "))
	mustExec(t, f.root, "CALL ldp_set_budget('nk', 100, 'charge', 'owner')")
	rowsOf := f.ints(t, "SELECT COUNT(*) FROM nk GROUP BY owner ORDER BY owner")
	var job string
	for _, dir := range []string{"first", "rerun"} {
		extra := []string{"--charge-batch", "4", "--out", filepath.Join(f.dir, dir)}
		if job != "" {
			extra = append(extra, "--job-id", job)
		}
		out, err := f.privatize(t, "nk", extra...)
		if err != nil || !strings.Contains(out, "released 269 rows") || !strings.Contains(out, "read nk in 1 part") {
			t.Fatalf("etl privatize (%s): %v\n%s", dir, err, out)
		}
		if m := jobRE.FindStringSubmatch(out); m != nil && job == "" {
			job = m[1]
		}
		spent := spentByUnit(t, f.root, "nk")
		for owner, n := range rowsOf {
			if s := spent[strconv.Itoa(owner)]; s != 8*float64(n) {
				t.Errorf("after the %s job: owner %d, %d rows, spent %v, want %v", dir, owner, n, s, 8*float64(n))
			}
		}
	}
	imp, err := exec.Command(ldpsqlBin, "import-releases", "--addr", f.srv.addr, "--in", filepath.Join(f.dir, "first", "releases.parquet"), "--table", "nk_imported").CombinedOutput()
	if err != nil || !strings.Contains(string(imp), "imported 269 releases") {
		t.Fatalf("import-releases: %v\n%s", err, imp)
	}
	if n := f.ints(t, "SELECT COUNT(*) FROM information_schema.columns WHERE table_name = 'nk_imported' AND column_name = 'owner'"); n[0] != 0 {
		t.Errorf("the releases carry the unit column")
	}
}

// Protected sources whose units are a decimal, a date with a binary string, and a double: the job names each
// row's unit by LDP_UNIT_KEY, so its charges fall on the units the server's own releases of those rows
// are charged to. Each unit spends 8 of its 10 on the job, and a server-side release of a row at ε 4
// is then over budget; the ledger's unit keys are LDP_UNIT_KEY's.
func TestEtlProtectedTypedUnits(t *testing.T) {
	f := newETLFixture(t)
	for _, c := range []struct {
		keyCase keyCase
		units   string
		row     string // a WHERE clause picking one row
	}{
		{keyCases[3], "k", "k = -33.50"},
		{keyCases[4], "d,b", "d = '2024-02-27' AND b = X'ff00ff'"},
		{keyCase{name: "double", defs: "k DOUBLE NOT NULL", pk: "PRIMARY KEY (k)", key: func(i int) string { return strconv.FormatFloat(float64(i)/3, 'g', -1, 64) }},
			"k", "k > 0.3 AND k < 0.4"},
	} {
		table := "pu_" + c.keyCase.name
		createKeyTable(t, f, c.keyCase, table)
		mustExec(t, f.root, fmt.Sprintf("CALL ldp_set_budget('%s', 10, 'charge', '%s')", table, c.units))
		out, err := f.privatize(t, table, "--partitions", "3", "--out", filepath.Join(f.dir, table))
		if err != nil || !strings.Contains(out, "released 269 rows") || strings.Contains(out, "left out") {
			t.Fatalf("etl privatize %s: %v\n%s", table, err, out)
		}
		spent := spentByUnit(t, f.root, table)
		keys, err := queryAll(f.root, fmt.Sprintf("SELECT LDP_UNIT_KEY(%s) FROM %s", c.units, table))
		if err != nil {
			t.Fatal(err)
		}
		if len(spent) != 269 || len(keys) != 269 {
			t.Fatalf("%s: %d units charged, %d rows", table, len(spent), len(keys))
		}
		for _, k := range keys {
			if s, ok := spent[k[0]]; !ok || s != 8 {
				t.Errorf("%s: unit %s spent %v (charged: %v), want 8", table, k[0], s, ok)
			}
		}
		if _, err := queryAll(f.root, fmt.Sprintf("SELECT FLIP_LABEL(y, 4, 2) FROM %s WHERE %s", table, c.row)); err == nil || !strings.Contains(err.Error(), "budget exceeded") {
			t.Errorf("%s: a release at ε 4 of a unit that spent 8 of 10 through the job: %v, want budget exceeded", table, err)
		}
	}
}

// A table, key or unit the job cannot take is refused before a row is read, naming what is wrong.
func TestEtlFromDBBadTable(t *testing.T) {
	f := newETLFixture(t)
	vecs, labels := wdbcCells(t)
	mustExec(t, f.root, "CREATE TABLE keyed_label (label INT PRIMARY KEY, f LONGBLOB NOT NULL, y INT NOT NULL)")
	mustExec(t, f.root, fmt.Sprintf("INSERT INTO keyed_label VALUES (1, %s, %d)", vecs[0], labels[0]))
	mustExec(t, f.root, "CALL ldp_set_budget('keyed_label', 10, 'charge')") // protected: a refused job must charge nothing
	before := f.ints(t, "SELECT COUNT(*) FROM ldpsql_catalog.ldp_releases")[0]
	for _, c := range []struct {
		table string
		extra []string
		want  string
	}{
		{"nope", []string{"--out", filepath.Join(f.dir, "o1")}, "there is no table ldpsql.nope"},
		{"keyed_label", []string{"--to-db", f.dsn, "--into", "kl_rel"}, "the source's key column label would be the destination's label column"},
	} {
		out, err := f.privatize(t, c.table, c.extra...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("%s: %v, want an error with %q:\n%s", c.table, err, c.want, out)
		}
	}
	if n := f.ints(t, "SELECT COUNT(*) FROM information_schema.tables WHERE table_name LIKE '_ldpsql_etl_%' OR table_name = 'kl_rel'"); n[0] != 0 {
		t.Errorf("%d tables left by the refused jobs", n[0])
	}
	if after := f.ints(t, "SELECT COUNT(*) FROM ldpsql_catalog.ldp_releases")[0]; after != before {
		t.Errorf("the refused jobs charged %d releases", after-before)
	}
}
