package udf_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestEMOnRandomisedResponse: TRAIN_NOISY_CLASSIFIER's 'em' objective on rows that ldp_privatize released
// through the identity box [0, 1]⁴ with per-coordinate randomised response on 4 bins (rr4) learns the clean
// classifier, where logistic regression on the same releases (the paper's "log reg noise": objective
// 'clean', no hidden layer, on a copy of the releases without their metadata) does not.
//
// Each of the 4 features of class 0 lies in bin 0 ([0, 0.25)), of class 1 in bin 1; every pixel-like
// feature sits below the box's midpoint. At ε_x = 4 (ε/D = 1 per feature) randomised response keeps a
// bin with probability e/(e + 3) = 0.475, so a release's mean moves 70 % of the way to 0.5: the naive
// classifier's boundary, fitted on the releases, lies at about 0.425 per feature, above both classes'
// clean values (0.125 and 0.375), and it calls nearly every clean row class 0 (accuracy about 0.5). EM
// models the channel (spread's rr channels from the table's metadata) and separates the clean classes.
// Over 12 fresh releases (crypto noise) EM scored 1.000 on the 1,000 clean test rows and naive LR
// 0.515–0.584 (its boundary lies beyond the clean class 1, so it sits near chance); the test asks for
// EM ≥ 0.85 and a lead of 0.25 in each of 3 releases.
func TestEMOnRandomisedResponse(t *testing.T) {
	l := newLedgerEngine(t, buildIdentityPlugin(t))
	const d, n, nTest = 4, 2000, 1000
	l.q("CREATE TABLE unit_box (id INT PRIMARY KEY, f LONGBLOB)")
	l.q("INSERT INTO unit_box VALUES (1, LDP_VECTOR(0, 0, 0, 0)), (2, LDP_VECTOR(1, 1, 1, 1))")
	l.q(`CALL ldp_fit_mechanism('box', 'identity', 'unit_box', 'f', '{}')`)
	rng := rand.New(rand.NewPCG(22, 7))
	fill := func(table string, rows int) {
		l.q(fmt.Sprintf("CREATE TABLE %s (id INT PRIMARY KEY, f LONGBLOB, y INT)", table))
		var vals []string
		for i := range rows {
			y := i % 2
			x := make([]string, d)
			for j := range x {
				x[j] = fmt.Sprintf("%.4f", 0.25*float64(y)+0.02+0.21*rng.Float64())
			}
			vals = append(vals, fmt.Sprintf("(%d, LDP_VECTOR(%s), %d)", i, strings.Join(x, ","), y))
			if len(vals) == 200 || i == rows-1 {
				l.q(fmt.Sprintf("INSERT INTO %s VALUES %s", table, strings.Join(vals, ",")))
				vals = nil
			}
		}
	}
	fill("raw_rows", n)
	fill("test_rows", nTest)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	train := func(table, params string) {
		t.Helper()
		id := toInt64(t, l.q(fmt.Sprintf("SELECT TRAIN_NOISY_CLASSIFIER('%s', '%s')", table, params))[0][0])
		if job, err := l.e.Jobs.Wait(ctx, id); err != nil || job.State != "succeeded" {
			t.Fatalf("TRAIN_NOISY_CLASSIFIER(%s, %s): job %s %q %v", table, params, job.State, job.Error, err)
		}
	}
	accuracy := func(model string) float64 {
		return toFloat(t, l.q(fmt.Sprintf("SELECT AVG(PREDICT('%s', f) = y) FROM test_rows", model))[0][0])
	}

	// LDP_ENCODE takes the randomiser too; a malformed bin count is an error naming the valid range.
	for _, v := range blobVector(t, l.q("SELECT LDP_ENCODE(LDP_VECTOR(0.1, 0.9, 0.5, 2), 4, 'box', 'rr2')")[0][0]) {
		if v != 0.25 && v != 0.75 {
			t.Fatalf("an rr2 release %v is not a bin centre of [0, 1]", v)
		}
	}
	_, err := l.as("root", "SELECT LDP_ENCODE(LDP_VECTOR(0.1, 0.9, 0.5, 2), 4, 'box', 'rr1')")
	wantErr(t, err, `unknown randomiser "rr1"`, "2 ≤ B ≤ 65536")

	// 'em' needs a channel it can model: Duchi's releases on the same box are refused, naming the objective.
	l.q("CALL ldp_privatize('raw_rows', 'f', 'y', 'duchi_rows', 8, 0.5, 'box', 'duchi', 2)")
	_, err = l.as("root", `SELECT TRAIN_NOISY_CLASSIFIER('duchi_rows', '{"objective": "em"}')`)
	wantErr(t, err, "objective 'em' models per-coordinate noise", `randomiser "duchi"`)

	for r := range 3 {
		priv, naive := fmt.Sprintf("rr_rows%d", r), fmt.Sprintf("naive_rows%d", r)
		l.q(fmt.Sprintf("CALL ldp_privatize('raw_rows', 'f', 'y', '%s', 8, 0.5, 'box', 'rr4', 2)", priv))
		if r == 0 {
			// Releases are bin centres of [0, 1] split in 4.
			for _, row := range l.q("SELECT f FROM " + priv + " LIMIT 50") {
				for _, v := range blobVector(t, row[0]) {
					if v != 0.125 && v != 0.375 && v != 0.625 && v != 0.875 {
						t.Fatalf("an rr4 release %v is not a bin centre of [0, 1]", v)
					}
				}
			}
		}
		train(priv, fmt.Sprintf(`{"model": "em%d", "objective": "em", "seed": %d}`, r, r+1))
		l.q(fmt.Sprintf("CREATE TABLE %s AS SELECT f, y FROM %s", naive, priv))
		train(naive, fmt.Sprintf(`{"model": "naive%d", "objective": "clean", "mechanism": "box", "features_col": "f", "label_col": "y", "K": 2, "hidden": [], "seed": %d}`, r, r+1))
		em, lr := accuracy(fmt.Sprintf("em%d", r)), accuracy(fmt.Sprintf("naive%d", r))
		t.Logf("release %d at ε = 8 (ε_x = 4, 1 per feature, rr4): EM %.3f, naive logistic regression %.3f on clean test rows", r, em, lr)
		if !(em >= 0.85 && em-lr >= 0.25) {
			t.Errorf("release %d: EM accuracy %.3f, naive logistic regression %.3f: want EM ≥ 0.85 and ahead by ≥ 0.25", r, em, lr)
		}
	}
}
