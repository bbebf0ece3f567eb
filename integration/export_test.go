package integration

import (
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/ldpsql/ldpsql/client"
)

// exportedMeta is the release metadata an export carries: client.Meta, the keys import-releases needs,
// and the table the rows came from.
type exportedMeta struct {
	client.Meta
	Table string `json:"table"`
}

// exportFixture is a server whose secure_file_priv directory is files, with d2 (protected, 1,500 rows
// of four clusters), its release d2_pca (ldp_privatize at ε 8, λ 0.7, PCA to 2 dimensions, K 4), clean
// test rows, and an analyst with SELECT, EXECUTE and FILE.
type exportFixture struct {
	s              *server
	dbPath, files  string
	root, analyst  *sql.DB
	modelSHA       string
	featureOf      map[int64][]float32 // d2_pca's released vectors by id
	labelOf        map[int64]int64
	analystEnv     []string
	analystAddress []string
}

func newExportFixture(t *testing.T) *exportFixture {
	dir := t.TempDir()
	f := &exportFixture{dbPath: filepath.Join(dir, "data.duckdb"), files: filepath.Join(dir, "files")}
	f.s = startServer(t, f.dbPath, "--secure-file-priv", f.files)
	f.root = f.s.connect("root", "")
	fillClusters(t, f.root, "aux", 1500, 11, false)
	fillClusters(t, f.root, "d2", 1500, 12, true)
	fillClusters(t, f.root, "test", 500, 13, true)
	mustExec(t, f.root, `CALL ldp_fit_mechanism('pca2', 'pca', 'aux', 'f', '{"d": 2, "l": 6}')`)
	mustExec(t, f.root, "CALL ldp_set_budget('d2', 100)")
	mustExec(t, f.root, "CALL ldp_privatize('d2', 'f', 'y', 'd2_pca', 8, 0.7, 'pca2', 'laplace', 4)")
	if err := f.root.QueryRow("SELECT LOWER(SHA2(m.artifact, 256)) FROM ldpsql_catalog.ldp_mechanisms k JOIN ldpsql_catalog.ldp_models m ON m.name = k.model WHERE k.name = 'pca2'").Scan(&f.modelSHA); err != nil {
		t.Fatal(err)
	}
	rows, err := f.root.Query("SELECT id, f, y FROM d2_pca")
	if err != nil {
		t.Fatal(err)
	}
	f.featureOf, f.labelOf = map[int64][]float32{}, map[int64]int64{}
	for rows.Next() {
		var id, y int64
		var b []byte
		if err := rows.Scan(&id, &b, &y); err != nil {
			t.Fatal(err)
		}
		v := make([]float32, len(b)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		f.featureOf[id], f.labelOf[id] = v, y
	}
	rows.Close()
	mustExec(t, f.root, "CREATE USER analyst@'%' IDENTIFIED BY 'pw'")
	mustExec(t, f.root, "GRANT SELECT, EXECUTE ON ldpsql.* TO analyst@'%'")
	mustExec(t, f.root, "GRANT FILE ON *.* TO analyst@'%'")
	f.analyst = f.s.connect("analyst", "pw")
	f.analystEnv = []string{"LDPSQL_PASSWORD=pw"}
	f.analystAddress = []string{"--addr", f.s.addr, "--user", "analyst"}
	return f
}

// checkMeta checks release metadata against what d2_pca was released with.
func (f *exportFixture) checkMeta(t *testing.T, what string, raw []byte) {
	t.Helper()
	var m exportedMeta
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, raw)
	}
	want := exportedMeta{Meta: client.Meta{Eps: 8, EpsX: 5.6, EpsY: 2.4, K: 4, Label: "y", Lambda: 0.7, Mechanism: "pca2", SHA256: m.SHA256,
		ModelSHA: f.modelSHA, Randomiser: "laplace", Rows: 1500}, Table: "ldpsql.d2_pca"}
	if m != want || len(m.SHA256) != 64 {
		t.Errorf("%s: metadata\n%+v, want\n%+v", what, m, want)
	}
}

// checkImport imports file with `ldpsql import-releases` (a separate process, over the wire) into
// table, checks the rows against d2_pca's, and returns the table.
func (f *exportFixture) checkImport(t *testing.T, file, table string) {
	t.Helper()
	r := runLdpsql(t, nil, "", "import-releases", "--addr", f.s.addr, "--in", file, "--table", table)
	if r.code != 0 || !strings.Contains(r.stdout, "imported 1500 releases of mechanism \"pca2\"") {
		t.Fatalf("import-releases %s: exit %d\n%s%s", file, r.code, r.stdout, r.stderr)
	}
	rows, err := f.root.Query("SELECT id, features, label FROM " + table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for ; rows.Next(); n++ {
		var id, y int64
		var b []byte
		if err := rows.Scan(&id, &b, &y); err != nil {
			t.Fatal(err)
		}
		want := f.featureOf[id]
		for i := range want {
			if got := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])); got != want[i] || len(b) != 4*len(want) {
				t.Fatalf("%s id %d: features differ from d2_pca's (%v)", table, id, want)
			}
		}
		if y != f.labelOf[id] {
			t.Fatalf("%s id %d: label %d, d2_pca %d", table, id, y, f.labelOf[id])
		}
	}
	if n != 1500 {
		t.Errorf("%s: %d rows", table, n)
	}
}

// The data-out path of #18 end to end, over real processes: ldp_privatize → CALL ldp_export as an
// analyst → DuckDB's read_parquet shows the rows and the release metadata → `ldpsql import-releases`
// → TRAIN_NOISY_CLASSIFIER on the imported table; and the same through CSV with its sidecar.
func TestExportReleasesRoundTrip(t *testing.T) {
	f := newExportFixture(t)
	var path, format, note string
	var rows int64
	if err := f.analyst.QueryRow("CALL ldp_export('d2_pca', 'd2_pca.parquet', 'parquet')").Scan(&path, &rows, &format, &note); err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(f.files, "d2_pca.parquet") || rows != 1500 || format != "parquet" || !strings.Contains(note, "ldpsql.releases") {
		t.Errorf("ldp_export: %s, %d rows, %s, %s", path, rows, format, note)
	}

	// DuckDB reads the file: the columns as ldpsql privatize writes them, the rows, the metadata.
	duck, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer duck.Close()
	var schema string
	if err := duck.QueryRow("SELECT string_agg(column_name || ' ' || column_type, ', ') FROM (DESCRIBE SELECT * FROM read_parquet(?))", path).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	if schema != "id INTEGER, z FLOAT[], y INTEGER" {
		t.Errorf("Parquet columns: %s", schema)
	}
	got, err := duck.Query("SELECT id, len(z), z[1], z[2], y FROM read_parquet(?)", path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ; got.Next(); n++ {
		var id, y, dim int64
		var z1, z2 float32
		if err := got.Scan(&id, &dim, &z1, &z2, &y); err != nil {
			t.Fatal(err)
		}
		want := f.featureOf[id]
		if dim != 2 || len(want) != 2 || z1 != want[0] || z2 != want[1] || y != f.labelOf[id] {
			t.Fatalf("row %d: z (%d) [%v %v] y %d; the table has %v, %d", id, dim, z1, z2, y, want, f.labelOf[id])
		}
	}
	got.Close()
	if n != 1500 {
		t.Errorf("read_parquet: %d rows", n)
	}
	var kv []byte
	if err := duck.QueryRow("SELECT value FROM parquet_kv_metadata(?) WHERE key = 'ldpsql.releases'", path).Scan(&kv); err != nil {
		t.Fatal(err)
	}
	f.checkMeta(t, "Parquet key-value metadata", kv)

	// import-releases reads it back, and a classifier trains on it as on an ldp_privatize table.
	f.checkImport(t, path, "d2_back")
	j := trainClassifier(t, f.root, "d2_back", `{"model": "m_back", "objective": "forward", "epochs": 30, "seed": 3}`)
	if j.state != "succeeded" {
		t.Fatalf("TRAIN_NOISY_CLASSIFIER on the imported export: %s: %s", j.state, j.errMsg)
	}
	acc := accuracyOf(t, f.root, "m_back", "test")
	t.Logf("classifier on the exported and re-imported releases: clean test accuracy %.3f (4 classes)", acc)
	if acc < 0.5 {
		t.Errorf("clean test accuracy %.3f, want ≥ 0.5", acc)
	}

	// CSV, through the mysql command-line client: z1, z2 and the metadata beside it.
	client := mariaDBTool(t, "mysql")
	host, port, _ := strings.Cut(f.s.addr, ":")
	out, err := exec.Command(client, "-h", host, "-P", port, "-u", "analyst", "-ppw", "--batch", "ldpsql", "-e",
		"CALL ldp_export('d2_pca', 'd2_pca.csv', 'csv')").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "1500\tcsv\trelease metadata of mechanism pca2, in d2_pca.csv.meta.json") {
		t.Fatalf("mysql CLI: %v\n%s", err, out)
	}
	csvPath := filepath.Join(f.files, "d2_pca.csv")
	data, err := os.ReadFile(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 1501 || lines[0] != "id,z1,z2,y" {
		t.Errorf("CSV: %d lines, header %q", len(lines), lines[0])
	}
	side, err := os.ReadFile(csvPath + ".meta.json")
	if err != nil {
		t.Fatal(err)
	}
	f.checkMeta(t, "the CSV's sidecar", side)
	f.checkImport(t, csvPath, "d2_back_csv")

	// ldpsql export --format parquet over the wire, as the analyst: the file on this side, the same
	// layout and metadata, read back by import-releases.
	cli := filepath.Join(t.TempDir(), "cli.parquet")
	r := runLdpsql(t, f.analystEnv, "", append([]string{"export"}, append(f.analystAddress, "--table", "d2_pca", "--format", "parquet", "--out", cli)...)...)
	if r.code != 0 || !strings.Contains(r.stderr, "exported 1500 rows") {
		t.Fatalf("ldpsql export --format parquet: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if err := duck.QueryRow("SELECT value FROM parquet_kv_metadata(?) WHERE key = 'ldpsql.releases'", cli).Scan(&kv); err != nil {
		t.Fatal(err)
	}
	f.checkMeta(t, "ldpsql export's Parquet", kv)
	f.checkImport(t, cli, "d2_back_cli")
	// The analyst cannot take the protected table's raw rows that way either.
	r = runLdpsql(t, f.analystEnv, "", append([]string{"export"}, append(f.analystAddress, "--table", "d2", "--format", "parquet", "--out", cli+"2.parquet")...)...)
	if r.code == 0 || !strings.Contains(r.stderr, "protected table ldpsql.d2 is raw data") {
		t.Errorf("ldpsql export of the protected d2 as the analyst: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("the analyst's ldpsql export of the protected d2: %s", strings.TrimSpace(r.stderr))
	if _, err := os.Stat(cli + "2.parquet"); !os.IsNotExist(err) {
		t.Errorf("a refused ldpsql export left a file: %v", err)
	}

	// In process (--db), with the server stopped: CSV with its sidecar.
	f.s.stop()
	inProc := filepath.Join(t.TempDir(), "inproc.csv")
	r = runLdpsql(t, nil, "", "export", "--db", f.dbPath, "--table", "d2_pca", "--out", inProc)
	if r.code != 0 {
		t.Fatalf("ldpsql export --db: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if side, err := os.ReadFile(inProc + ".meta.json"); err != nil {
		t.Error(err)
	} else {
		f.checkMeta(t, "ldpsql export --db's sidecar", side)
	}
	if data, _ := os.ReadFile(inProc); !strings.HasPrefix(string(data), "id,z1,z2,y\n") {
		t.Errorf("ldpsql export --db CSV: %.60s", data)
	}
}

// What ldp_export refuses, and that a refusal writes nothing: an analyst's export of a protected
// table, a path outside the secure_file_priv directory, an existing file, an account without FILE or
// without SELECT on the table; and what a DBA may do.
func TestExportRefusals(t *testing.T) {
	f := newExportFixture(t)
	mustExec(t, f.root, "CREATE USER nofile@'%' IDENTIFIED BY 'pw'")
	mustExec(t, f.root, "GRANT SELECT, EXECUTE ON ldpsql.* TO nofile@'%'")
	noFile := f.s.connect("nofile", "pw")
	mustExec(t, f.root, "CREATE DATABASE other")
	mustExec(t, f.root, "CREATE TABLE other.secret (id INT PRIMARY KEY, v INT)")
	mustExec(t, f.root, "INSERT INTO other.secret VALUES (1, 42)")
	mustExec(t, f.analyst, "CALL ldp_export('d2_pca', 'first.parquet', 'parquet')")
	before, _ := os.ReadFile(filepath.Join(f.files, "first.parquet"))
	outside := filepath.Join(t.TempDir(), "out.parquet")

	for _, c := range []struct {
		db       *sql.DB
		call     string
		code     uint16
		text     string
		notThere string
	}{
		{f.analyst, "CALL ldp_export('d2', 'd2.parquet', 'parquet')", 0, "ldpsql.d2 is protected by a privacy budget: its raw columns are never exported", "d2.parquet"},
		{f.analyst, "CALL ldp_export('d2', 'd2.csv', 'csv')", 0, "protected by a privacy budget", "d2.csv"},
		{f.analyst, "CALL ldp_export('d2_pca', '" + outside + "', 'parquet')", 1290, "is outside the secure_file_priv directory", outside},
		{f.analyst, "CALL ldp_export('d2_pca', '../escape.parquet', 'parquet')", 1290, "is outside the secure_file_priv directory", filepath.Join(filepath.Dir(f.files), "escape.parquet")},
		{f.analyst, "CALL ldp_export('d2_pca', 'first.parquet', 'parquet')", 1086, "already exists", ""},
		{f.analyst, "CALL ldp_export('d2_pca', 'x.json', 'json')", 0, "'parquet' or 'csv'", "x.json"},
		{f.analyst, "CALL ldp_export('other.secret', 'secret.csv', 'csv')", 1142, "Access denied", "secret.csv"},
		{f.analyst, "CALL ldp_export('ldpsql_catalog.ldp_releases', 'ledger.csv', 'csv')", 1142, "", "ledger.csv"},
		{noFile, "CALL ldp_export('d2_pca', 'nofile.parquet', 'parquet')", 1227, "FILE", "nofile.parquet"},
	} {
		_, err := c.db.Exec(c.call)
		if c.code != 0 {
			wantMySQLError(t, c.call, err, c.code)
		}
		if err == nil || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: %v, want an error with %q", c.call, err, c.text)
		}
		if c.notThere != "" {
			p := c.notThere
			if !filepath.IsAbs(p) {
				p = filepath.Join(f.files, p)
			}
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Errorf("%s left %s: %v", c.call, p, err)
			}
		}
	}
	if after, _ := os.ReadFile(filepath.Join(f.files, "first.parquet")); !slices.Equal(before, after) {
		t.Error("a refused export changed the existing file")
	}
	ents, _ := os.ReadDir(f.files)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"first.parquet"}) {
		t.Errorf("the secure_file_priv directory holds %v, want only first.parquet", names)
	}

	// A DBA may export any table, a protected one's raw rows included; a table ldp_privatize did not
	// write has no release metadata, and the result says so.
	var path, format, note string
	var rows int64
	if err := f.root.QueryRow("CALL ldp_export('d2', 'd2_raw.parquet', 'parquet')").Scan(&path, &rows, &format, &note); err != nil {
		t.Fatal(err)
	}
	if rows != 1500 || !strings.HasPrefix(note, "none: ldpsql.d2 was not written by ldp_privatize") {
		t.Errorf("the DBA's export of d2: %d rows, %q", rows, note)
	}
	duck, _ := sql.Open("duckdb", "")
	defer duck.Close()
	var kvs int
	if err := duck.QueryRow("SELECT count(*) FROM parquet_kv_metadata(?) WHERE key = 'ldpsql.releases'", path).Scan(&kvs); err != nil || kvs != 0 {
		t.Errorf("release metadata in a raw table's export: %d, %v", kvs, err)
	}

	// Inside a transaction the export sees the session's own uncommitted rows (the file, as one
	// INTO OUTFILE writes, stays after a ROLLBACK).
	conn, err := f.root.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"BEGIN", "INSERT INTO other.secret VALUES (2, 43)"} {
		if _, err := conn.ExecContext(t.Context(), q); err != nil {
			t.Fatal(q, err)
		}
	}
	if err := conn.QueryRowContext(t.Context(), "CALL ldp_export('other.secret', 'tx.csv', 'csv')").Scan(&path, &rows, &format, &note); err != nil || rows != 2 {
		t.Errorf("an export inside a transaction: %d rows, %v", rows, err)
	}
	if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if data, _ := os.ReadFile(filepath.Join(f.files, "tx.csv")); string(data) != "id,v\n1,42\n2,43\n" {
		t.Errorf("tx.csv: %q", data)
	}

	// A COPY that fails inside a transaction (a vector that is not whole float32s) aborts it in
	// DuckDB: the session says so at its next statement, until ROLLBACK, and nothing is written.
	mustExec(t, f.root, `CREATE TABLE bad (id INT PRIMARY KEY, f LONGBLOB, y INT) COMMENT='{"ldp_privatize": {"mechanism": "pca2", "features_col": "f", "label_col": "y", "output_dim": 2, "eps": 1, "eps_x": 1, "lambda": 1, "mechanism_sha256": "x", "model_sha256": "y"}}'`)
	mustExec(t, f.root, "INSERT INTO bad VALUES (1, 0x010203, 0)")
	conn, err = f.root.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"BEGIN", "INSERT INTO other.secret VALUES (3, 44)"} {
		if _, err := conn.ExecContext(t.Context(), q); err != nil {
			t.Fatal(q, err)
		}
	}
	if _, err := conn.ExecContext(t.Context(), "CALL ldp_export('bad', 'bad.parquet', 'parquet')"); err == nil || !strings.Contains(err.Error(), "multiple of 4 bytes") {
		t.Errorf("exporting a malformed vector: %v", err)
	}
	var cnt int
	err = conn.QueryRowContext(t.Context(), "SELECT count(*) FROM other.secret").Scan(&cnt)
	if err == nil || !strings.Contains(err.Error(), "this transaction was rolled back") {
		t.Errorf("in the transaction after the failed export: %d rows, %v", cnt, err)
	}
	if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRowContext(t.Context(), "SELECT count(*) FROM other.secret").Scan(&cnt); err != nil || cnt != 1 {
		t.Errorf("after ROLLBACK: %d rows, %v", cnt, err)
	}
	conn.Close()
	if _, err := os.Stat(filepath.Join(f.files, "bad.parquet")); !os.IsNotExist(err) {
		t.Errorf("a failed export left bad.parquet: %v", err)
	}

	// With file access off, a clear error.
	f.s.stop()
	s := startServer(t, f.dbPath, "--secure-file-priv", "NULL")
	_, err = s.connect("root", "").Exec("CALL ldp_export('d2_pca', 'off.parquet', 'parquet')")
	wantMySQLError(t, "with --secure-file-priv NULL", err, 1290)
	if err == nil || !strings.Contains(err.Error(), "secure_file_priv is NULL") {
		t.Errorf("with --secure-file-priv NULL: %v", err)
	}
}

// A table whose primary key has several columns (a text site and an integer id) round-trips: its
// ldp_privatize release, exported as Parquet and as CSV, comes back through `ldpsql import-releases`
// with the same key columns and the same released rows, and a classifier trains on it.
func TestExportMultiColumnKeyRoundTrip(t *testing.T) {
	f := newExportFixture(t)
	mustExec(t, f.root, "CREATE TABLE d3 (site VARCHAR(10), id INT, f LONGBLOB, y INT, PRIMARY KEY (site, id))")
	// Two sites with overlapping ids: only the pair is a key.
	mustExec(t, f.root, "INSERT INTO d3 SELECT IF(id % 2 = 0, 'north', 'South'), id DIV 2, f, y FROM d2")
	mustExec(t, f.root, "CALL ldp_set_budget('d3', 100)")
	mustExec(t, f.root, "CALL ldp_privatize('d3', 'f', 'y', 'd3_pca', 8, 0.7, 'pca2', 'laplace', 4)")
	type key struct {
		site string
		id   int64
	}
	released := func(table, features, label string) map[key]string {
		t.Helper()
		rows, err := f.root.Query(fmt.Sprintf("SELECT site, id, HEX(%s), %s FROM %s", features, label, table))
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[key]string{}
		for rows.Next() {
			var k key
			var hex string
			var y int64
			if err := rows.Scan(&k.site, &k.id, &hex, &y); err != nil {
				t.Fatal(err)
			}
			out[k] = fmt.Sprintf("%s/%d", hex, y)
		}
		return out
	}
	want := released("d3_pca", "f", "y")
	if len(want) != 1500 {
		t.Fatalf("d3_pca has %d rows", len(want))
	}
	for _, file := range []string{"d3_pca.parquet", "d3_pca.csv"} {
		format := strings.TrimPrefix(filepath.Ext(file), ".")
		mustExec(t, f.analyst, fmt.Sprintf("CALL ldp_export('d3_pca', '%s', '%s')", file, format))
		table := "d3_back_" + format
		r := runLdpsql(t, nil, "", "import-releases", "--addr", f.s.addr, "--in", filepath.Join(f.files, file), "--table", table)
		if r.code != 0 || !strings.Contains(r.stdout, "imported 1500 releases") {
			t.Fatalf("import-releases %s: exit %d\n%s%s", file, r.code, r.stdout, r.stderr)
		}
		var keyCols string
		if err := f.root.QueryRow("SELECT GROUP_CONCAT(column_name ORDER BY ordinal_position) FROM information_schema.columns WHERE table_name = ? AND column_key = 'PRI'", table).Scan(&keyCols); err != nil {
			t.Fatal(err)
		}
		if keyCols != "site,id" {
			t.Errorf("%s: primary key (%s), want (site,id)", table, keyCols)
		}
		got := released(table, "features", "label")
		if len(got) != len(want) {
			t.Errorf("%s: %d rows, want %d", table, len(got), len(want))
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("%s: row %v is %q, d3_pca's %q", table, k, got[k], v)
			}
		}
	}
	j := trainClassifier(t, f.root, "d3_back_parquet", `{"model": "m_d3", "objective": "forward", "epochs": 30, "seed": 3}`)
	if j.state != "succeeded" {
		t.Fatalf("TRAIN_NOISY_CLASSIFIER on the imported multi-column-key export: %s: %s", j.state, j.errMsg)
	}
}
