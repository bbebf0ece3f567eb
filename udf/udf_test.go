package udf_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/dolthub/go-mysql-server/sql"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/udf"
)

// These tests run the functions through the real SQL engine over an in-memory DuckDB. The noise comes
// from crypto/rand (the functions never take a seed), so every statistical check uses a tolerance whose
// false-failure probability is stated and below 1e-8.

func newEngine(t *testing.T) (*engine.Engine, func(string) []sql.Row) {
	t.Helper()
	e, err := engine.Open(engine.MemoryPath, engine.WithFunctions(udf.Functions()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	q := func(query string) []sql.Row {
		t.Helper()
		_, rows, err := e.Query(e.NewContext(context.Background()), query)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		return rows
	}
	return e, q
}

func queryErr(e *engine.Engine, query string) error {
	_, _, err := e.Query(e.NewContext(context.Background()), query)
	return err
}

// fillLabels creates labels(id, y) with n rows, y = id mod k, through DuckDB's own range() for speed.
func fillLabels(t *testing.T, e *engine.Engine, n, k int) {
	t.Helper()
	if _, _, err := e.Query(e.NewContext(context.Background()), "CREATE TABLE labels (id BIGINT PRIMARY KEY, y INT)"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DuckDB.Exec(fmt.Sprintf(`INSERT INTO ldpsql.labels SELECT range, (range %% %d)::INTEGER FROM range(%d)`, k, n)); err != nil {
		t.Fatal(err)
	}
}

func toInt64(t *testing.T, v any) int64 {
	t.Helper()
	switch x := v.(type) {
	case int64:
		return x
	case int32:
		return int64(x)
	}
	t.Fatalf("unexpected %T %v", v, v)
	return 0
}

func TestFlipLabelDistribution(t *testing.T) {
	const n, k, eps = 100_000, 10, 1.0
	e, q := newEngine(t)
	fillLabels(t, e, n, k)
	rows := q(fmt.Sprintf("SELECT y, FLIP_LABEL(y, %v, %d) FROM labels", eps, k))
	if len(rows) != n {
		t.Fatalf("%d rows", len(rows))
	}
	kept := 0
	offset := make([]float64, k) // counts of (ỹ − y) mod K among flipped rows
	for _, r := range rows {
		y, out := toInt64(t, r[0]), toInt64(t, r[1])
		if out < 0 || out >= k {
			t.Fatalf("FLIP_LABEL returned %d outside 0..%d", out, k-1)
		}
		if out == y {
			kept++
		} else {
			offset[(out-y+k)%k]++
		}
	}
	p := math.Exp(eps) / (math.Exp(eps) + k - 1)
	se := math.Sqrt(p * (1 - p) / n)
	// 6 standard errors: two-sided normal tail 2e-9.
	if got := float64(kept) / n; math.Abs(got-p) > 6*se {
		t.Fatalf("keep rate %.4f, want %.4f ± %.4f", got, p, 6*se)
	}
	// Flipped labels are uniform over the other K−1: chi-square with K−2 = 8 degrees of freedom;
	// 45 is beyond the 1−1e-6 quantile (about 38.5).
	flipped := float64(n - kept)
	chi := 0.0
	for d := 1; d < k; d++ {
		exp := flipped / (k - 1)
		chi += (offset[d] - exp) * (offset[d] - exp) / exp
	}
	if chi > 45 {
		t.Fatalf("flipped labels not uniform over the other labels: chi-square %.1f, counts %v", chi, offset[1:])
	}
}

func TestFlipLabelArguments(t *testing.T) {
	e, q := newEngine(t)
	if r := q("SELECT FLIP_LABEL(NULL, 1, 2), FLIP_LABEL(1, NULL, 2), FLIP_LABEL(1, 1, NULL)"); r[0][0] != nil || r[0][1] != nil || r[0][2] != nil {
		t.Fatalf("NULL in should give NULL out: %v", r)
	}
	for _, tc := range []struct{ query, want string }{
		{"SELECT FLIP_LABEL(10, 1, 10)", "argument y = 10"},
		{"SELECT FLIP_LABEL(-1, 1, 10)", "argument y = -1"},
		{"SELECT FLIP_LABEL(1.5, 1, 10)", "argument y = 1.5"},
		{"SELECT FLIP_LABEL(1, 0, 10)", "argument eps = 0"},
		{"SELECT FLIP_LABEL(1, -2, 10)", "argument eps = -2"},
		{"SELECT FLIP_LABEL(1, 'nan', 10)", `argument eps = "nan"`},
		{"SELECT FLIP_LABEL(1, 'abc', 10)", `argument eps = "abc"`},
		{"SELECT FLIP_LABEL(0, 1, 1)", "argument K = 1"},
		{"SELECT FLIP_LABEL(0, 1)", "FLIP_LABEL"},
	} {
		err := queryErr(e, tc.query)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.query, err, tc.want)
		}
	}
}

// A call with the wrong number of arguments names the function's argument list, not only the counts.
func TestArityErrorsShowTheSignature(t *testing.T) {
	e, err := engine.Open(engine.MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := udf.Install(e, udf.Config{PluginDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ query, want string }{
		{"SELECT FLIP_LABEL(0, 1)", "expected 3 arguments, 2 received: FLIP_LABEL(y, eps, K [, unit_key])"},
		{"SELECT LDP_LAPLACE(1, 1, 0)", "LDP_LAPLACE(x, eps, lo, hi [, unit_key])"},
		{"SELECT RR_FREQUENCY(1, 1, 2) FROM (SELECT 1) t", "expected 4 arguments, 3 received: RR_FREQUENCY(y_noisy, eps, K, class [, unit_key])"},
		{"SELECT PRIVATE_ACCURACY(1) FROM (SELECT 1) t", "PRIVATE_ACCURACY(correct, eps [, unit_key])"},
		{"SELECT LDP_ACCURACY_BOUND(1)", "LDP_ACCURACY_BOUND(eps, K)"},
		{"SELECT LDP_ENCODE('[1]')", "expected 2, 3, 4 or 5 arguments, 1 received: LDP_ENCODE(features, eps [, 'mechanism' [, 'randomiser' [, unit_key]]])"},
		{"SELECT LDP_DECODE('[1]')", "LDP_DECODE(release, 'mechanism')"},
		{"SELECT TRAIN_NOISY_CLASSIFIER()", "TRAIN_NOISY_CLASSIFIER('table' [, '{params}'])"},
		{"SELECT PREDICT('m')", "PREDICT('model', features [, 'clean'|'release'])"},
	} {
		err := queryErr(e, tc.query)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.query, err, tc.want)
		}
	}
}

// GMS must evaluate FLIP_LABEL on every row, never once for a constant argument list.
func TestFlipLabelIsNotFolded(t *testing.T) {
	e, q := newEngine(t)
	fillLabels(t, e, 2000, 2)
	rows := q("SELECT FLIP_LABEL(0, 0.1, 10) FROM labels")
	seen := map[int64]bool{}
	for _, r := range rows {
		seen[toInt64(t, r[0])] = true
	}
	// With keep probability 0.11 the chance that 2000 draws show fewer than 10 values is negligible.
	if len(seen) != 10 {
		t.Fatalf("constant FLIP_LABEL gave only %d distinct values over 2000 rows", len(seen))
	}
}

func TestLDPLaplace(t *testing.T) {
	const n = 50_000
	e, q := newEngine(t)
	fillLabels(t, e, n, 2)
	// x = 100 is clipped to hi = 1 before noise: the mean is 1, the variance 2b², b = (hi−lo)/eps = 2.
	rows := q(fmt.Sprintf("SELECT LDP_LAPLACE(100, 0.5, 0, 1) FROM labels LIMIT %d", n))
	var sum, sumSq float64
	distinct := map[float64]bool{}
	for _, r := range rows {
		v := r[0].(float64)
		sum += v
		sumSq += v * v
		distinct[v] = true
	}
	mean := sum / n
	variance := sumSq/n - mean*mean
	b := 2.0
	// Standard error of the mean is sqrt(2b²/n) = 0.0126; 6 of them.
	if math.Abs(mean-1) > 6*math.Sqrt(2*b*b/n) {
		t.Fatalf("mean %.4f, want 1 (clipped input)", mean)
	}
	// Var of the sample variance of a Laplace is (μ4 − σ⁴)/n = (24b⁴ − 4b⁴)/n = 20b⁴/n; 6 SE.
	if math.Abs(variance-2*b*b) > 6*math.Sqrt(20*b*b*b*b/n) {
		t.Fatalf("variance %.3f, want %.3f", variance, 2*b*b)
	}
	if len(distinct) < n/2 {
		t.Fatalf("only %d distinct outputs in %d rows: noise is being reused", len(distinct), n)
	}
	for _, tc := range []struct{ query, want string }{
		{"SELECT LDP_LAPLACE(1, 0, 0, 1)", "argument eps = 0"},
		{"SELECT LDP_LAPLACE(1, 1, 1, 1)", "argument lo, hi"},
		{"SELECT LDP_LAPLACE(1, 1, 2, 1)", "argument lo, hi"},
		{"SELECT LDP_LAPLACE('x', 1, 0, 1)", `argument x = "x"`},
	} {
		if err := queryErr(e, tc.query); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.query, err, tc.want)
		}
	}
	if r := q("SELECT LDP_LAPLACE(NULL, 1, 0, 1)"); r[0][0] != nil {
		t.Fatalf("NULL in: %v", r)
	}
}

func TestRRFrequencyDebiases(t *testing.T) {
	const n, k, eps = 60_000, 3, 1.0
	e, q := newEngine(t)
	// True shares: class 0 = 1/2, class 1 = 1/3, class 2 = 1/6 (id mod 6 → 0,0,0,1,1,2).
	if _, _, err := e.Query(e.NewContext(context.Background()), "CREATE TABLE labels (id BIGINT PRIMARY KEY, g INT, y INT)"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DuckDB.Exec(fmt.Sprintf(`INSERT INTO ldpsql.labels SELECT range, (range %% 2)::INTEGER,
		CASE range %% 6 WHEN 0 THEN 0 WHEN 1 THEN 0 WHEN 2 THEN 0 WHEN 3 THEN 1 WHEN 4 THEN 1 ELSE 2 END FROM range(%d)`, n)); err != nil {
		t.Fatal(err)
	}
	q(fmt.Sprintf("CREATE TABLE noisy AS SELECT id, g, FLIP_LABEL(y, %v, %d) AS y FROM labels", eps, k))
	want := []float64{1.0 / 2, 1.0 / 3, 1.0 / 6}
	for c := 0; c < k; c++ {
		got := q(fmt.Sprintf("SELECT RR_FREQUENCY(y, %v, %d, %d) FROM noisy", eps, k, c))[0][0].(float64)
		count := toInt64(t, q(fmt.Sprintf("SELECT COUNT(*) FROM noisy WHERE y = %d", c))[0][0])
		se, err := mechanisms.WarnerStdErr(count, n, eps, k)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-want[c]) > 6*se {
			t.Errorf("class %d: debiased %.4f, want %.4f ± %.4f", c, got, want[c], 6*se)
		}
	}
	// GROUP BY: class 2 (id mod 6 = 5) lies entirely in the odd group, where its share is 1/3.
	rows := q(fmt.Sprintf("SELECT g, RR_FREQUENCY(y, %v, %d, 2) FROM noisy GROUP BY g ORDER BY g", eps, k))
	if len(rows) != 2 {
		t.Fatalf("GROUP BY gave %v", rows)
	}
	for i, wantShare := range []float64{0, 1.0 / 3} {
		// Per group n = 30,000; the standard error is at most 0.0075 (the share 1/3: sqrt(λ(1−λ)/n)/(p−q)
		// with λ = 1/3, p − q = 0.364), so 0.04 is 5.3 of them (two-sided normal tail 1e-7).
		if f := rows[i][1].(float64); math.Abs(f-wantShare) > 0.04 {
			t.Errorf("group %v: %.4f, want %.4f", rows[i][0], f, wantShare)
		}
	}
	if err := queryErr(e, "SELECT RR_FREQUENCY(y, id % 2 + 1, 3, 0) FROM noisy"); err == nil || !strings.Contains(err.Error(), "same on every row") {
		t.Errorf("varying eps: %v", err)
	}
	if err := queryErr(e, "SELECT RR_FREQUENCY(y, 1, 3, 3) FROM noisy"); err == nil || !strings.Contains(err.Error(), "argument class = 3") {
		t.Errorf("class out of range: %v", err)
	}
	if r := q("SELECT RR_FREQUENCY(y, 1, 3, 0) FROM noisy WHERE id < 0"); r[0][0] != nil {
		t.Errorf("empty input: %v", r)
	}
}

func TestAccuracyFunctions(t *testing.T) {
	e, q := newEngine(t)
	if r := q("SELECT LDP_ACCURACY_BOUND(7, 10), LDP_ACCURACY_BOUND(0.7, 10)"); math.Abs(r[0][0].(float64)-0.807) > 5e-4 || math.Abs(r[0][1].(float64)-0.142) > 5e-4 {
		t.Fatalf("bound: %v", r)
	}
	if err := queryErr(e, "SELECT LDP_ACCURACY_BOUND(1, 3)"); err == nil || !strings.Contains(err.Error(), "even") {
		t.Fatalf("odd K: %v", err)
	}
	// 60,000 validation rows, 70% correct. The bits are flipped with probability 1/(e+1) = 0.269 and
	// debiased; the standard error is sqrt(f(1-f)/n)/(1-2p) ≈ 0.0041, so 0.025 is over 6 of them.
	const n = 60_000
	fillLabels(t, e, n, 10) // y = id mod 10: correct = (y < 7)
	got := q("SELECT PRIVATE_ACCURACY(y < 7, 1.0) FROM labels")[0][0].(float64)
	if math.Abs(got-0.7) > 0.025 {
		t.Fatalf("PRIVATE_ACCURACY: %.4f, want 0.7", got)
	}
	// The released bits are noisy: repeated runs differ.
	if a, b := q("SELECT PRIVATE_ACCURACY(y < 7, 1.0) FROM labels")[0][0], q("SELECT PRIVATE_ACCURACY(y < 7, 1.0) FROM labels")[0][0]; a == b && a == got {
		t.Fatal("PRIVATE_ACCURACY gave the same estimate three times: no fresh noise")
	}
	if err := queryErr(e, "SELECT PRIVATE_ACCURACY(y, 1.0) FROM labels"); err == nil || !strings.Contains(err.Error(), "0 or 1") {
		t.Fatalf("non-bit: %v", err)
	}
}
