package integration

import (
	"encoding/csv"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ldpsql/ldpsql/client"
	"github.com/ldpsql/ldpsql/training/datasets"
)

// A DBA exports a fitted mechanism (`ldpsql mechanisms export`), a data owner privatises a CSV with it
// (`ldpsql privatize`), all through the real binary: the releases have the mechanism's dimension and,
// around the clean encodings, the Laplace noise's mean 0 and variance 2b² (b = 2l/ε); the label column
// is released by k-RR (it keeps the label about e^ε/(e^ε + 1) of the time). A mechanism fitted on a
// table the ledger protects is refused export without CDP, and exported with --public. The releases,
// as CSV and as Parquet, imported on a running server, train a noise-aware classifier.
func TestExportAndPrivatiseOnTheOwnersMachine(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "pub.duckdb")
	run := func(wantErr bool, args ...string) string {
		t.Helper()
		out, err := exec.Command(ldpsqlBin, args...).CombinedOutput()
		if (err != nil) != wantErr {
			t.Fatalf("ldpsql %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	w, err := datasets.LoadWDBC()
	if err != nil {
		t.Fatal(err)
	}
	var vals []string
	csvRows := [][]string{{"id"}}
	for j := range 30 {
		csvRows[0] = append(csvRows[0], "f"+strconv.Itoa(j+1))
	}
	csvRows[0] = append(csvRows[0], "y")
	for i, f := range w.Features {
		s := make([]string, 30)
		for j := range s {
			s[j] = strconv.FormatFloat(f[j], 'g', 7, 64)
		}
		if i < 300 {
			vals = append(vals, "("+strconv.Itoa(i+1)+", LDP_VECTOR("+strings.Join(s, ", ")+"), "+strconv.Itoa(w.Labels[i])+")")
		} else {
			csvRows = append(csvRows, append(append([]string{strconv.Itoa(i + 1)}, s...), strconv.Itoa(w.Labels[i])))
		}
	}
	run(false, "sql", "--db", db, "-e", "CREATE TABLE aux (id INT PRIMARY KEY, f LONGBLOB NOT NULL, y INT NOT NULL); INSERT INTO aux VALUES "+strings.Join(vals, ", ")+"; "+
		`CALL ldp_fit_mechanism('pca4', 'pca', 'aux', 'f', '{"d": 4, "l": 500}')`)
	file := filepath.Join(dir, "pca4.ldpm")
	out := run(false, "mechanisms", "export", "pca4", "--db", db, "--out", file)
	if !strings.Contains(out, "wrote "+file) {
		t.Fatalf("export: %s", out)
	}
	in := filepath.Join(dir, "rows.csv")
	writeCSV(t, in, csvRows)
	rel := filepath.Join(dir, "rel.csv")
	run(false, "privatize", "--mechanism", file, "--eps", "20", "--id", "id", "--label", "y", "--k", "2", "--lambda", "0.5", "--in", in, "--out", rel)

	raw, _ := os.ReadFile(file)
	mech, err := client.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	feats := make([][]float32, len(csvRows)-1)
	for i, r := range csvRows[1:] {
		feats[i] = make([]float32, 30)
		for j := range 30 {
			v, _ := strconv.ParseFloat(r[j+1], 32)
			feats[i][j] = float32(v)
		}
	}
	clean, err := mech.Encode(feats)
	if err != nil {
		t.Fatal(err)
	}
	got := readCSV(t, rel)
	if len(got) != len(csvRows) || strings.Join(got[0], ",") != "id,z1,z2,z3,z4,y" {
		t.Fatalf("releases: %d rows, header %v", len(got), got[0])
	}
	for i, r := range got[1:] {
		if r[0] != csvRows[i+1][0] {
			t.Fatalf("row %d: id %s, want %s", i, r[0], csvRows[i+1][0])
		}
	}

	// The noise and the labels, measured on ten releases of each row (2,690 rows, 10,760 values; on the
	// 269 rows alone the 20 % tolerance on the variance was 2.9 standard errors: it failed 0.4 % of
	// 400,000 simulated runs).
	// The noise e = z − encode(x) is Laplace(b) per value: its mean has standard error sqrt(2b²/n) and,
	// as Var(e²) = 24b⁴ − 4b⁴, its mean square has standard error sqrt(20b⁴/n) = 2b²·sqrt(5/n) (2.2 %);
	// both are held to 6 standard errors (two-sided normal tail 2·10⁻⁹ each).
	in10 := filepath.Join(dir, "rows10.csv")
	rows10 := [][]string{csvRows[0]}
	for c := range 10 {
		for _, r := range csvRows[1:] {
			id, _ := strconv.Atoi(r[0])
			rows10 = append(rows10, append([]string{strconv.Itoa(1000*c + id)}, r[1:]...))
		}
	}
	writeCSV(t, in10, rows10)
	rel10 := filepath.Join(dir, "rel10.csv")
	run(false, "privatize", "--mechanism", file, "--eps", "20", "--id", "id", "--label", "y", "--k", "2", "--lambda", "0.5", "--in", in10, "--out", rel10)
	got10 := readCSV(t, rel10)
	if len(got10) != len(rows10) {
		t.Fatalf("%d releases of %d rows", len(got10)-1, len(rows10)-1)
	}
	var sum, sumSq float64
	flips := 0
	for i, r := range got10[1:] {
		if r[0] != rows10[i+1][0] {
			t.Fatalf("row %d: id %s, want %s", i, r[0], rows10[i+1][0])
		}
		x := i % (len(csvRows) - 1)
		for k := range 4 {
			v, _ := strconv.ParseFloat(r[k+1], 64)
			e := v - float64(clean[x][k])
			sum += e
			sumSq += e * e
		}
		if r[5] != rows10[i+1][31] {
			flips++
		}
	}
	n := float64(4 * (len(got10) - 1))
	b := 2 * mech.File.Set.Radius / 10 // ε_x = 0.5 · 20
	mean, ms := sum/n, sumSq/n
	zMean, zVar := mean/math.Sqrt(2*b*b/n), (ms-2*b*b)/(2*b*b*math.Sqrt(5/n))
	t.Logf("release noise over %.0f values: mean %.4g, mean square %.4g, 2b² = %.4g (z %.2f and %.2f)", n, mean, ms, 2*b*b, zMean, zVar)
	if math.Abs(zMean) > 6 || math.Abs(zVar) > 6 {
		t.Errorf("release noise: mean %v, mean square %v (z %.2f, %.2f); want 0 and 2b² = %v", mean, ms, zMean, zVar, 2*b*b)
	}
	// k-RR at ε_y = 10 flips a label with probability q = 1/(e^10 + 1) = 4.5·10⁻⁵: 0.12 of 2,690 expected;
	// more than 5 has probability below 10⁻⁸ (Poisson tail), while ε_y = 5 would flip about 18.
	if flips > 5 {
		t.Errorf("%d of %d labels flipped, want about %.2f", flips, len(got10)-1, float64(len(got10)-1)/(math.Exp(10)+1))
	}
	if meta, err := os.ReadFile(rel + ".meta.json"); err != nil || !strings.Contains(string(meta), `"eps_x": 10`) {
		t.Errorf("meta: %s %v", meta, err)
	}

	// Wrong metadata is refused before anything is written.
	meta, _ := os.ReadFile(rel + ".meta.json")
	badMeta := filepath.Join(dir, "bad.meta.json")
	_ = os.WriteFile(badMeta, []byte(strings.Replace(string(meta), `"mechanism": "pca4"`, `"mechanism": "nope"`, 1)), 0o644)
	if out := run(true, "import-releases", "--db", db, "--in", rel, "--meta", badMeta, "--table", "collected"); !strings.Contains(out, `mechanism "nope", which is not registered`) {
		t.Errorf("an unknown mechanism: %s", out)
	}
	_ = os.WriteFile(badMeta, []byte(strings.Replace(string(meta), `"k": 2`, `"k": 1`, 1)), 0o644)
	if out := run(true, "import-releases", "--db", db, "--in", rel, "--meta", badMeta, "--table", "collected"); !strings.Contains(out, "a label released with k 1") {
		t.Errorf("k = 1: %s", out)
	}
	// The same rows released to Parquet: the metadata inside the file, no .meta.json beside it.
	relPQ := filepath.Join(dir, "rel.parquet")
	if out := run(false, "privatize", "--mechanism", file, "--eps", "20", "--id", "id", "--label", "y", "--k", "2", "--lambda", "0.5", "--in", in, "--out", relPQ); !strings.Contains(out, `rel.parquet's key-value metadata "ldpsql.releases"`) {
		t.Errorf("privatize to Parquet: %s", out)
	}
	if _, err := os.Stat(relPQ + ".meta.json"); !os.IsNotExist(err) {
		t.Errorf("a .meta.json beside the Parquet releases: %v", err)
	}

	// The releases, CSV and Parquet, imported on a running server, train a classifier like an
	// ldp_privatize table.
	srv := startServer(t, db)
	conn := srv.connect("root", "")
	for _, c := range []struct{ in, table string }{{rel, "collected"}, {relPQ, "collected_pq"}} {
		out = run(false, "import-releases", "--addr", srv.addr, "--in", c.in, "--table", c.table)
		if !strings.Contains(out, "imported 269 releases") {
			t.Fatalf("import %s: %s", c.in, out)
		}
		var job int64
		if err := conn.QueryRow(`SELECT TRAIN_NOISY_CLASSIFIER('` + c.table + `', '{"model": "clf_` + c.table + `", "seed": 1}')`).Scan(&job); err != nil {
			t.Fatal(err)
		}
		for state := ""; state != "succeeded"; {
			var msg string
			if err := conn.QueryRow("SELECT state, COALESCE(error, '') FROM ldpsql_catalog.ldp_jobs WHERE id = ?", job).Scan(&state, &msg); err != nil {
				t.Fatal(err)
			}
			if state == "failed" || state == "cancelled" {
				t.Fatalf("classifier job %s: %s", state, msg)
			}
			time.Sleep(200 * time.Millisecond)
		}
		var acc, major float64
		if err := conn.QueryRow("SELECT AVG(PREDICT('clf_"+c.table+"', f) = y), GREATEST(AVG(y), 1 - AVG(y)) FROM aux").Scan(&acc, &major); err != nil {
			t.Fatal(err)
		}
		t.Logf("classifier on the imported client releases (%s): %.3f on the clean aux rows (majority %.3f)", filepath.Base(c.in), acc, major)
		if !(acc > major+0.05) {
			t.Errorf("%s: accuracy %.3f, majority %.3f", c.in, acc, major)
		}
	}
	srv.stop()

	// Protected: the PCA's components come from the rows; export needs --public.
	run(false, "sql", "--db", db, "-e", "CALL ldp_set_budget('aux', 5)")
	out = run(true, "mechanisms", "export", "pca4", "--db", db, "--out", file)
	if !strings.Contains(out, "trained without CDP") || !strings.Contains(out, "--public") {
		t.Fatalf("export of a model of a protected table: %s", out)
	}
	run(false, "mechanisms", "export", "pca4", "--db", db, "--out", file, "--public")
	raw, _ = os.ReadFile(file)
	if m, err := client.Load(raw); err != nil || !m.File.Public {
		t.Fatalf("--public export: %v", err)
	}
	out = run(true, "privatize", "--mechanism", file, "--eps", "4", "--in", filepath.Join(dir, "missing.csv"), "--out", rel)
	if !strings.Contains(out, "missing.csv") {
		t.Errorf("a missing input: %s", out)
	}
}

func writeCSV(t *testing.T, path string, rows [][]string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := csv.NewWriter(f).WriteAll(rows); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rows
}
