package beam

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	_ "github.com/duckdb/duckdb-go/v2"
	"gonum.org/v1/gonum/stat"

	"github.com/ldpsql/ldpsql/client"
	"github.com/ldpsql/ldpsql/internal/rowfile"
	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/plugins/builtin/pca/pcaenc"
	"github.com/ldpsql/ldpsql/training/datasets"
)

// wdbc returns the WDBC rows scaled to [0, 1] per feature, and their labels.
func init() {
	register.DoFn3x0[int, func(*int) bool, func([]int)](&countClassesFn{})
	register.DoFn1x1[[]int, error](&checkClassesFn{})
	register.Emitter1[[]int]()
	register.Iter1[int]()
}

func wdbc(t *testing.T) ([][]float32, []int) {
	t.Helper()
	d, err := datasets.LoadWDBC()
	if err != nil {
		t.Fatal(err)
	}
	return d.MinMaxRows(), d.Labels
}

// pcaFile is a PCA mechanism (d 4, ℓ1 radius 2) fitted on rows, as its .ldpm file.
func pcaFile(t *testing.T, rows [][]float32) []byte {
	t.Helper()
	p, err := pcaenc.FitRows(pcaenc.Params{D: 4, L: 2}, rows)
	if err != nil {
		t.Fatal(err)
	}
	art, _ := p.Artifact()
	f, err := client.Marshal(client.File{Name: "pca4", Plugin: "pca", InputDim: len(rows[0]), OutputDim: 4,
		Set: client.SetOf(mechanisms.L1Ball{D: 4, Radius: 2}), Artifact: art, Params: json.RawMessage(`{"d": 4, "l": 2}`),
		TrainedOn: "ldpsql.aux", Rows: int64(len(rows)), ExportedAt: time.Unix(0, 0).UTC()})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// writeCSV writes rows as CSV: id, f1..fn, y; repeat times each.
func writeCSV(t *testing.T, path string, rows [][]float32, labels []int, firstID, repeat int) {
	t.Helper()
	file, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := csv.NewWriter(bufio.NewWriter(file))
	head := []string{"id"}
	for j := range rows[0] {
		head = append(head, "f"+strconv.Itoa(j+1))
	}
	_ = w.Write(append(head, "y"))
	id := firstID
	for range repeat {
		for i, r := range rows {
			rec := []string{strconv.Itoa(id)}
			for _, v := range r {
				rec = append(rec, strconv.FormatFloat(float64(v), 'g', -1, 32))
			}
			_ = w.Write(append(rec, strconv.Itoa(labels[i])))
			id++
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		t.Fatal(err)
	}
	if err := file.Close(); err != nil {
		t.Fatal(err)
	}
}

// setCSVCell sets cell col (0-based) of line (0-based; 0 is the header) of a CSV file of writeCSV's
// to value.
func setCSVCell(t *testing.T, path string, line, col int, value string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	cells := strings.Split(lines[line], ",")
	cells[col] = value
	lines[line] = strings.Join(cells, ",")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}

func duck(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func sqlStr(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// toParquet converts a CSV file of writeCSV's into Parquet (id BIGINT, f FLOAT[n], y INTEGER); fix is
// a SQL expression for f over the list f (to break rows on purpose).
func toParquet(t *testing.T, db *sql.DB, csvPath, path string, n int, f, y string, opts ...string) {
	t.Helper()
	var cols []string
	for j := range n {
		cols = append(cols, fmt.Sprintf("CAST(f%d AS FLOAT)", j+1))
	}
	q := "COPY (SELECT id, " + f + " AS f, " + y + " AS y FROM (SELECT CAST(id AS BIGINT) AS id, [" + strings.Join(cols, ", ") +
		"] AS f, CAST(y AS INTEGER) AS y FROM read_csv(" + sqlStr(csvPath) + ", all_varchar = true)) ORDER BY id) TO " + sqlStr(path) + " (FORMAT parquet" + strings.Join(append([]string{""}, opts...), ", ") + ")"
	if _, err := db.Exec(q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// A Prism pipeline end to end: two Parquet parts and a CSV part in, bad rows among them; the releases
// come out as one Parquet file that DuckDB reads with ldpsql privatize's metadata in it, holding every
// good row once and no bad one; the bad rows are reported with their file and row.
func TestPrismPipelineEndToEnd(t *testing.T) {
	rows, labels := wdbc(t)
	mech := pcaFile(t, rows[:300])
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	os.MkdirAll(in, 0o755)
	db := duck(t)
	// part-0: rows 1..150; part-1: rows 151..269 with row 5 of the file NaN, row 9 short, row 11
	// labelled 7; part-2.csv: two good rows, one with a feature "abc".
	writeCSV(t, filepath.Join(dir, "p0.csv"), rows[300:450], labels[300:450], 1, 1)
	toParquet(t, db, filepath.Join(dir, "p0.csv"), filepath.Join(in, "part-0.parquet"), 30, "f", "y")
	writeCSV(t, filepath.Join(dir, "p1.csv"), rows[450:569], labels[450:569], 151, 1)
	toParquet(t, db, filepath.Join(dir, "p1.csv"), filepath.Join(in, "part-1.parquet"), 30,
		"CASE id WHEN 155 THEN list_transform(f, x -> CAST('nan' AS FLOAT)) WHEN 159 THEN f[1:29] ELSE f END",
		"CASE id WHEN 161 THEN 7 ELSE y END")
	writeCSV(t, filepath.Join(in, "part-2.csv"), rows[:3], labels[:3], 1001, 1)
	setCSVCell(t, filepath.Join(in, "part-2.csv"), 2, 4, "abc")

	spec := Spec{Mechanism: mech, Eps: 4, Label: "y", K: 2, Lambda: 0.7, Batch: 64}
	out := filepath.Join(dir, "out")
	start := time.Now()
	sum, err := Run(context.Background(), Job{In: filepath.Join(in, "part-*"), Cols: Columns{ID: "id", Label: "y"}, Spec: spec, Out: Output{Dir: out}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Prism: %d rows in %v", sum.Rows+sum.Bad, time.Since(start))
	good := 150 + 119 - 3 + 2
	if sum.Rows != good || sum.Bad != 4 || len(sum.Files) != 1 {
		t.Fatalf("summary %+v: want %d rows in one file, 4 bad", sum, good)
	}

	// The bad rows, by file and row, with why.
	rawBad, err := os.ReadFile(filepath.Join(out, "bad_rows.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		filepath.Join(in, "part-1.parquet") + " row 11: label 7 is not a class 0..1",
		filepath.Join(in, "part-1.parquet") + " row 5: feature 1 is NaN",
		filepath.Join(in, "part-1.parquet") + " row 9 has 29 features, mechanism \"pca4\" takes 30",
		filepath.Join(in, "part-2.csv") + " line 3, column f4: \"abc\" is not a number",
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(string(rawBad)), "\n") {
		var b struct{ Where, Reason string }
		if err := json.Unmarshal([]byte(l), &b); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if !strings.HasPrefix(b.Reason, b.Where) {
			t.Errorf("reason %q does not start with where %q", b.Reason, b.Where)
		}
		got = append(got, b.Reason)
	}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("bad rows:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// DuckDB reads the releases: every good id once, none of the bad, 4 values each, labels 0 or 1.
	file := filepath.Join(out, "releases.parquet")
	var n, ids, minLen, maxLen, badIDs, labelsOK int
	if err := db.QueryRow("SELECT count(*), count(DISTINCT id), min(len(z)), max(len(z)), count(*) FILTER (WHERE id IN (155, 159, 161, 1002)), "+
		"count(*) FILTER (WHERE y IN (0, 1)) FROM read_parquet("+sqlStr(file)+")").Scan(&n, &ids, &minLen, &maxLen, &badIDs, &labelsOK); err != nil {
		t.Fatal(err)
	}
	if n != good || ids != good || minLen != 4 || maxLen != 4 || badIDs != 0 || labelsOK != good {
		t.Errorf("releases: %d rows, %d ids, z of %d..%d values, %d bad ids, %d labels 0/1; want %d rows", n, ids, minLen, maxLen, badIDs, labelsOK, good)
	}
	var metaRaw string
	if err := db.QueryRow("SELECT decode(value) FROM parquet_kv_metadata(" + sqlStr(file) + ") WHERE decode(key) = 'ldpsql.releases'").Scan(&metaRaw); err != nil {
		t.Fatal(err)
	}
	var meta client.Meta
	if err := json.Unmarshal([]byte(metaRaw), &meta); err != nil {
		t.Fatal(err)
	}
	m, _ := client.Load(mech)
	eps, lambda := 4.0, 0.7 // variables: (1 − λ)·ε in float64, as ldpsql privatize computes it
	wantMeta := client.Meta{Eps: eps, EpsX: lambda * eps, EpsY: (1 - lambda) * eps, K: 2, Label: "y", Lambda: 0.7, Mechanism: "pca4", SHA256: m.File.SHA256,
		ModelSHA: m.File.ArtifactSHA256, Randomiser: "laplace", Rows: good, ReleasedAt: meta.ReleasedAt}
	if meta != wantMeta || time.Since(meta.ReleasedAt) > time.Hour {
		t.Errorf("metadata %+v, want %+v", meta, wantMeta)
	}
	// rowfile (import-releases' reader) finds the same metadata.
	src, err := rowfile.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := src.Metadata(); err != nil || string(got) != metaRaw {
		t.Errorf("rowfile metadata %q, %v", got, err)
	}
	src.Close()
	if _, err := os.Stat(filepath.Join(out, StagingDir)); !os.IsNotExist(err) {
		t.Errorf("the staging directory is left: %v", err)
	}
	// A second job into the same directory is refused before it runs.
	if _, err := Run(context.Background(), Job{In: filepath.Join(in, "part-*"), Cols: Columns{ID: "id", Label: "y"}, Spec: spec, Out: Output{Dir: out}}); err == nil || !strings.Contains(err.Error(), "already holds") {
		t.Errorf("a second job into %s: %v", out, err)
	}
}

// readReleases reads a releases file: id → (z, label).
func readReleases(t *testing.T, path string) map[int]Release {
	t.Helper()
	src, err := rowfile.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out := map[int]Release{}
	for {
		cells, err := src.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		id, _ := rowfile.Int(cells[0])
		z, err := rowfile.Floats(nil, cells[1])
		if err != nil {
			t.Fatal(err)
		}
		y, _ := rowfile.Int(cells[2])
		out[int(id)] = Release{Z: z, Label: int(y)}
	}
}

// Beam's releases are distributed as the client's (ldpsql privatize's, which are the server's bit for
// bit, see client's tests): the same 569 rows repeated 40 times are released on Prism (crypto/rand
// noise) and by client.Releaser (a fixed seed), and a two-sample Kolmogorov–Smirnov test on each of
// the 4 release coordinates and a two-proportion test on the label's flips accept equality. Each test
// is at level 2·10⁻¹⁰, so a false failure has probability below 10⁻⁹ (asymptotic bounds: the
// KS tail P(D > c·√(2/n)) ≤ 2e^(−2c²), the normal tail for the proportions). The same test rejects the
// client's releases at 2ε: it has the power to see a wrong ε split.
func TestBeamReleasesDistributedAsClients(t *testing.T) {
	rows, labels := wdbc(t)
	mech := pcaFile(t, rows)
	const repeat = 40
	dir := t.TempDir()
	writeCSV(t, filepath.Join(dir, "rows.csv"), rows, labels, 0, repeat)
	// In Parquet row groups of 4,096 rows: the job reads the file in 6 parts.
	toParquet(t, duck(t), filepath.Join(dir, "rows.csv"), filepath.Join(dir, "rows.parquet"), 30, "f", "y", "ROW_GROUP_SIZE 4096")
	if parts, err := rowfile.Parts(filepath.Join(dir, "rows.parquet")); err != nil || len(parts) < 2 {
		t.Fatalf("parts %v, %v: the test wants several", parts, err)
	}
	spec := Spec{Mechanism: mech, Eps: 4, Label: "y", K: 2, Lambda: 0.7}
	start := time.Now()
	sum, err := Run(context.Background(), Job{In: filepath.Join(dir, "rows.parquet"), Cols: Columns{ID: "id", Label: "y"}, Spec: spec, Out: Output{Dir: filepath.Join(dir, "out")}})
	if err != nil {
		t.Fatal(err)
	}
	n := len(rows) * repeat
	t.Logf("Prism: %d rows in %v (%.0f rows/s, reading, releasing and writing)", n, time.Since(start), float64(n)/time.Since(start).Seconds())
	if sum.Rows != n || sum.Bad != 0 {
		t.Fatalf("summary %+v, want %d rows", sum, n)
	}
	got := readReleases(t, sum.Files[0])
	if len(got) != n {
		t.Fatalf("%d distinct ids released, want %d", len(got), n)
	}

	xs, ys := make([][]float32, 0, n), make([]int, 0, n)
	for range repeat {
		xs, ys = append(xs, rows...), append(ys, labels...)
	}
	clientReleases := func(eps float64) ([][]float64, []int) {
		rel, err := (Spec{Mechanism: mech, Eps: eps, Label: "y", K: 2, Lambda: 0.7}).Releaser()
		if err != nil {
			t.Fatal(err)
		}
		z, y, err := rel.Release(xs, ys, mechanisms.NewSeededSource(21))
		if err != nil {
			t.Fatal(err)
		}
		return z, y
	}
	const level = 2e-10
	c := math.Sqrt(-math.Log(level/2) / 2)
	dCrit := c * math.Sqrt(2/float64(n))
	zCrit := 6.36 // two-sided normal tail 2·10⁻¹⁰
	compare := func(z [][]float64, y []int) (worstD float64, flipZ float64) {
		for j := range 4 {
			a, b := make([]float64, 0, n), make([]float64, 0, n)
			for i := range n {
				a = append(a, float64(got[i].Z[j]))
				b = append(b, float64(float32(z[i][j])))
			}
			sort.Float64s(a)
			sort.Float64s(b)
			worstD = max(worstD, stat.KolmogorovSmirnov(a, nil, b, nil))
		}
		var fa, fb float64
		for i := range n {
			if got[i].Label != ys[i] {
				fa++
			}
			if y[i] != ys[i] {
				fb++
			}
		}
		p := (fa + fb) / float64(2*n)
		flipZ = (fa - fb) / float64(n) / math.Sqrt(2*p*(1-p)/float64(n))
		return worstD, flipZ
	}
	d, fz := compare(clientReleases(4))
	t.Logf("same ε: largest KS distance %.4f (critical %.4f), flips z %.2f (critical %.2f)", d, dCrit, fz, zCrit)
	if d > dCrit || math.Abs(fz) > zCrit {
		t.Errorf("Beam's releases differ from the client's: KS distance %.4f > %.4f or flip z %.2f beyond ±%.2f", d, dCrit, fz, zCrit)
	}
	d, fz = compare(clientReleases(8))
	t.Logf("client at 2ε: largest KS distance %.4f, flips z %.2f", d, fz)
	if d <= dCrit || math.Abs(fz) <= zCrit {
		t.Errorf("the test cannot tell releases at ε from releases at 2ε: KS distance %.4f, flip z %.2f", d, fz)
	}
}

// Privatize on rows built in the program, not read from files: a row a reader marked, one of the wrong
// length, one with ±Inf and one with a label out of range are reported with where they were; the
// others are released.
func TestPrivatizeBadRows(t *testing.T) {
	rows, labels := wdbc(t)
	mech := pcaFile(t, rows)
	spec := Spec{Mechanism: mech, Eps: 4, Label: "y", K: 2, Lambda: 0.7}
	f := &privatizeFn{Spec: spec}
	if err := f.Setup(); err != nil {
		t.Fatal(err)
	}
	inf := slices.Clone(rows[3])
	inf[7] = float32(math.Inf(-1))
	in := []Row{
		{Where: "r1", ID: []string{"1"}, X: rows[0], Label: labels[0]},
		{Where: "r2", Err: "r2: could not read"},
		{Where: "r3", ID: []string{"3"}, X: rows[2][:10], Label: labels[2]},
		{Where: "r4", ID: []string{"4"}, X: inf, Label: labels[3]},
		{Where: "r5", ID: []string{"5"}, X: rows[4], Label: 2},
		{Where: "r6", ID: []string{"6"}, X: rows[5], Label: labels[5]},
	}
	var rel []Release
	var bad []BadRow
	for _, r := range in {
		if err := f.ProcessElement(context.Background(), r, func(r Release) { rel = append(rel, r) }, func(b BadRow) { bad = append(bad, b) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.FinishBundle(func(r Release) { rel = append(rel, r) }, nil); err != nil {
		t.Fatal(err)
	}
	if len(rel) != 2 || rel[0].ID[0] != "1" || rel[1].ID[0] != "6" || len(rel[0].Z) != 4 {
		t.Errorf("releases %+v, want rows 1 and 6", rel)
	}
	want := []BadRow{{"r2", "r2: could not read"}, {"r3", `r3 has 10 features, mechanism "pca4" takes 30`}, {"r4", "r4: feature 8 is -Inf"}, {"r5", "r5: label 2 is not a class 0..1"}}
	if !slices.Equal(bad, want) {
		t.Errorf("bad rows %+v, want %+v", bad, want)
	}
}

// A job that fails before its commit leaves no release file and no summary in its output directory,
// though some of its shards were written: here shard 1 cannot be written (a directory is in its way
// in the staging directory), shard 0 can.
func TestFailedJobLeavesNoOutput(t *testing.T) {
	rows, labels := wdbc(t)
	mech := pcaFile(t, rows)
	dir := t.TempDir()
	writeCSV(t, filepath.Join(dir, "rows.csv"), rows, labels, 0, 1)
	out := filepath.Join(dir, "out")
	blocker := filepath.Join(out, StagingDir, "releases-00001.parquet")
	if err := os.MkdirAll(filepath.Join(blocker, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	job := Job{In: filepath.Join(dir, "rows.csv"), Cols: Columns{ID: "id", Label: "y"}, Spec: Spec{Mechanism: mech, Eps: 4, Label: "y", K: 2, Lambda: 0.7},
		Out: Output{Dir: out, Shards: 2}}
	if _, err := Run(context.Background(), job); err == nil || !strings.Contains(err.Error(), "already holds") {
		t.Fatalf("Run into a directory with a staging directory: %v", err)
	}
	if !beam.Initialized() {
		beam.Init()
	}
	err := Job{}.run(context.Background(), job.Pipeline())
	if err == nil {
		t.Fatal("the job succeeded")
	}
	t.Logf("the job failed: %.300v", err)
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		if e.Name() != StagingDir {
			t.Errorf("%s is in the output directory of a failed job", e.Name())
		}
	}
	if _, err := os.Stat(filepath.Join(out, StagingDir, "releases-00000.parquet")); err != nil {
		t.Logf("shard 0 was not staged either: %v", err)
	}
}

// The package runs where the data is, without a server: it must not link udf or engine.
func TestNoServerDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/ldpsql/ldpsql/beam").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/ldpsql/ldpsql/udf") || strings.HasPrefix(p, "github.com/ldpsql/ldpsql/engine") {
			t.Errorf("package beam depends on %s", p)
		}
	}
}

// FlipLabel on Prism keeps a label with k-RR's probability e^ε/(e^ε + k − 1) and otherwise gives each
// other class alike: 30,000 labels 2 of k = 4 at ε = 1.2, each class's count within 6 binomial standard
// deviations of its expectation (a false failure below 10⁻⁸ per class).
func TestFlipLabel(t *testing.T) {
	const n, k, eps = 30000, 4, 1.2
	labels := make([]int, n)
	for i := range labels {
		labels[i] = 2
	}
	if !beam.Initialized() {
		beam.Init()
	}
	p, s := beam.NewPipelineWithRoot()
	flipped := FlipLabel(s, beam.CreateList(s, labels), eps, k)
	counts := beam.ParDo(s, &countClassesFn{}, beam.GroupByKey(s, beam.AddFixedKey(s, flipped)))
	beam.ParDo0(s, &checkClassesFn{N: n, K: k, Eps: eps}, counts)
	if err := (Job{}).run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if len(seenClasses) != k {
		t.Fatalf("the check saw the classes %v", seenClasses)
	}
	t.Logf("class counts %v", seenClasses)
}

// seenClasses is what checkClassesFn saw: Prism runs it in this process, once.
var seenClasses = map[int]int{}

type countClassesFn struct{}

func (countClassesFn) ProcessElement(_ int, ys func(*int) bool, emit func([]int)) {
	var c [4]int
	var y int
	for ys(&y) {
		c[y]++
	}
	emit(c[:])
}

type checkClassesFn struct {
	N, K int
	Eps  float64
}

func (f checkClassesFn) ProcessElement(c []int) error {
	keep := math.Exp(f.Eps) / (math.Exp(f.Eps) + float64(f.K-1))
	for y, got := range c {
		seenClasses[y] = got
		p := (1 - keep) / float64(f.K-1)
		if y == 2 {
			p = keep
		}
		want, sd := float64(f.N)*p, math.Sqrt(float64(f.N)*p*(1-p))
		if math.Abs(float64(got)-want) > 6*sd {
			return fmt.Errorf("class %d: %d of %d, want %.0f ± %.0f", y, got, f.N, want, 6*sd)
		}
	}
	return nil
}

// Beam leaves an empty beamloopbackworker-* file in the temporary directory after every loopback run
// (loopback.go); a job removes its own, and the stale ones of killed runs, and leaves another running
// process's.
func TestJobLeavesNoLoopbackFile(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	others := filepath.Join(tmp, "beamloopbackworker-another-process")
	killed := filepath.Join(tmp, "beamloopbackworker-a-killed-run")
	notOurs := filepath.Join(tmp, "beamloopbackworker-not-empty")
	for f, content := range map[string]string{others: "", killed: "", notOurs: "data"} {
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	for _, f := range []string{killed, notOurs} {
		if err := os.Chtimes(f, old, old); err != nil {
			t.Fatal(err)
		}
	}
	rows, labels := wdbc(t)
	dir := t.TempDir()
	writeCSV(t, filepath.Join(dir, "rows.csv"), rows[:50], labels[:50], 0, 1)
	job := Job{In: filepath.Join(dir, "rows.csv"), Cols: Columns{ID: "id", Label: "y"},
		Spec: Spec{Mechanism: pcaFile(t, rows), Eps: 4, Label: "y", K: 2, Lambda: 0.7}, Out: Output{Dir: filepath.Join(dir, "out")}}
	for i := 0; i < 2; i++ {
		if _, err := Run(context.Background(), job); err != nil {
			t.Fatal(err)
		}
		job.Out.Dir += "x"
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "beamloopbackworker-*"))
	if want := []string{others, notOurs}; !slices.Equal(left, want) {
		t.Errorf("temporary directory holds %v after two jobs, want only %v", left, want)
	}
}

// A job's releases travel in batches (batches.go) that the shards take apart: with three shards every
// row is released once, spread over three files that each hold about a third of the rows.
func TestShardedJobReleasesEveryRowOnce(t *testing.T) {
	rows, labels := wdbc(t)
	dir := t.TempDir()
	writeCSV(t, filepath.Join(dir, "rows.csv"), rows[:300], labels[:300], 1, 1)
	out := filepath.Join(dir, "out")
	job := Job{In: filepath.Join(dir, "rows.csv"), Cols: Columns{ID: "id", Label: "y"},
		Spec: Spec{Mechanism: pcaFile(t, rows), Eps: 4, Label: "y", K: 2, Lambda: 0.7, Batch: 16}, Out: Output{Dir: out, Shards: 3}}
	sum, err := Run(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Rows != 300 || len(sum.Files) != 3 {
		t.Fatalf("summary %+v: want 300 rows in 3 files", sum)
	}
	db := duck(t)
	var n, ids, minID, maxID int
	if err := db.QueryRow("SELECT count(*), count(DISTINCT id), min(id::INT), max(id::INT) FROM read_parquet("+sqlStr(filepath.Join(out, "releases-*.parquet"))+")").Scan(&n, &ids, &minID, &maxID); err != nil {
		t.Fatal(err)
	}
	if n != 300 || ids != 300 || minID != 1 || maxID != 300 {
		t.Errorf("the shards hold %d releases of %d ids %d..%d, want 300 of ids 1..300", n, ids, minID, maxID)
	}
	// Each release picks its shard at random: a shard's count is Binomial(300, 1/3), mean 100, sd 8.2;
	// 60..140 is ±4.9 sd (a two-sided chance of 1e-6 per shard).
	for _, f := range sum.Files {
		var k int
		if err := db.QueryRow("SELECT count(*) FROM read_parquet(" + sqlStr(f) + ")").Scan(&k); err != nil {
			t.Fatal(err)
		}
		if k < 60 || k > 140 {
			t.Errorf("%s holds %d releases, want 60..140 of 300", f, k)
		}
	}
}

// A CSV file larger than a part is read in parts cut at record boundaries: every row released once,
// and a bad row in a late part named by its line in the whole file.
func TestCSVFileReadInParts(t *testing.T) {
	defer func(b int64) { rowfile.CSVPartBytes = b }(rowfile.CSVPartBytes)
	rowfile.CSVPartBytes = 8 << 10
	rows, labels := wdbc(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "rows.csv")
	writeCSV(t, path, rows, labels, 1, 2) // 1,138 rows, about 300 kB
	raw, _ := os.ReadFile(path)
	lines := strings.Split(string(raw), "\n")
	lines[1000] = strings.Replace(lines[1000], ",", ",abc", 1) // line 1,001: its first feature is not a number
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if parts, err := rowfile.CSVParts(path); err != nil || len(parts) < 10 {
		t.Fatalf("parts %v, %v: the test wants many", parts, err)
	}
	sum, err := Run(context.Background(), Job{In: path, Cols: Columns{ID: "id", Label: "y"},
		Spec: Spec{Mechanism: pcaFile(t, rows), Eps: 4, Label: "y", K: 2, Lambda: 0.7}, Out: Output{Dir: filepath.Join(dir, "out")}})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Rows != 1137 || sum.Bad != 1 {
		t.Fatalf("summary %+v: want 1,137 rows and 1 bad", sum)
	}
	if got := readReleases(t, sum.Files[0]); len(got) != 1137 {
		t.Errorf("%d distinct ids released, want 1,137", len(got))
	}
	bad, _ := os.ReadFile(sum.BadFile)
	if !strings.Contains(string(bad), path+" line 1001") {
		t.Errorf("bad rows: %s; want the row named %s line 1001", bad, path)
	}
}

// nonFinite finds the first NaN or infinity as testing each value does, whatever the length, and
// never calls an extreme finite value (the largest, the smallest subnormal, -0) non-finite.
func TestNonFinite(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	odd := []float32{math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, float32(math.Copysign(0, -1)), 1e-40}
	bad := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}
	for trial := range 5000 {
		x := make([]float32, rng.IntN(20))
		for i := range x {
			if rng.IntN(3) == 0 {
				x[i] = odd[rng.IntN(len(odd))]
			} else {
				x[i] = float32(rng.NormFloat64() * 1e6)
			}
		}
		want := -1
		for k := rng.IntN(3); k > 0 && len(x) > 0; k-- {
			i := rng.IntN(len(x))
			x[i] = bad[rng.IntN(len(bad))]
			if want < 0 || i < want {
				want = i
			}
		}
		if got := nonFinite(x); got != want {
			t.Fatalf("trial %d: nonFinite(%v) = %d, want %d", trial, x, got, want)
		}
	}
}

// A runner a job cannot run on is refused before anything is read or written, saying why.
func TestUnsupportedRunnersAreRefusedFirst(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	for runner, want := range map[string]string{
		"direct": `runner "direct": want prism, flink, spark, universal or dataflow`,
	} {
		_, err := Run(context.Background(), Job{In: filepath.Join(dir, "none-*.csv"), Runner: runner, Out: Output{Dir: out}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("runner %s: %v, want %q", runner, err, want)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused job made its output directory: %v", err)
	}
}
