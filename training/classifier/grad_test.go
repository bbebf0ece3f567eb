package classifier

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/ldpsql/ldpsql/training/nn"
)

// Tolerances of the value and gradient checks.
//
// The package computes in float32 (inputs, weights, activations, the
// kernel's accumulators; the fast exp has relative error < 2.3e-7), the
// references in float64. A float32 sum of n terms has relative error about
// √n·2^-24 (at most n·2^-24): for the n ≤ 2100 terms here that is ≈ 3e-6
// typical, 1.3e-4 worst case, for the loss and for the gradient relative to
// its scale (observed: ≤ 4e-7·‖g‖∞). Central differences with h = 1e-5 on
// float64 references are accurate to about h²·|f⁽³⁾| + 1e-16·|f|/h ≈ 1e-10.
// So losses must agree to lossTol relative and gradients to gradTol·‖g‖∞,
// 7× and 30× the typical rounding. A wrong term (a missing channel factor,
// a sign, a dropped block of auxiliary points or hidden layer) shows up as
// an error of order 1e-2·‖g‖∞ or more (checked by mutating the code).
const (
	lossTol = 2e-5
	gradTol = 1e-4
	fdStep  = 1e-5
)

func newTestMarginal(t testing.TB, aux, noisy [][]float32, labels []int, b float64, r [][]float64, hidden []int, budget int64) (*marginalTrainer, *net, nn.Standardiser) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Hidden, cfg.MemoryBudget = hidden, budget
	cfg = cfg.withDefaults()
	d, k := len(aux[0]), len(r)
	sizes, err := netSizes(d, hidden, k)
	if err != nil {
		t.Fatal(err)
	}
	nt := newNet(sizes)
	randomiseParams(nt, 3)
	std := nn.FitStandardiser(aux, d)
	train := MarginalData{Aux: aux, Noisy: noisy, Labels: labels, Scale: b, R: r}
	val := MarginalData{}
	if _, err := checkMarginal(&train, &val); err != nil {
		t.Fatal(err)
	}
	tr, err := newMarginalTrainer(context.Background(), cfg, nt, std, train, val)
	if err != nil {
		t.Fatal(err)
	}
	return tr, nt, std
}

func allRows(n int) []int {
	b := make([]int, n)
	for i := range b {
		b[i] = i
	}
	return b
}

// compareGrad fails unless |a_i − want_i| ≤ gradTol·‖want‖∞ for every i;
// it returns the largest error relative to ‖want‖∞.
func compareGrad(t *testing.T, what string, a, want []float64) float64 {
	t.Helper()
	scale := 0.0
	for _, v := range want {
		scale = math.Max(scale, math.Abs(v))
	}
	if !(scale > 1e-8) {
		t.Fatalf("%s: reference gradient is ~0 (‖g‖∞ = %g): the check would be vacuous", what, scale)
	}
	worst := 0.0
	for i := range a {
		e := math.Abs(a[i]-want[i]) / scale
		worst = math.Max(worst, e)
		if e > gradTol {
			t.Errorf("%s: parameter %d: analytic %.9g, finite difference %.9g (error %.2g·‖g‖∞ > %g)", what, i, a[i], want[i], e, gradTol)
		}
	}
	return worst
}

func TestMarginalGradient(t *testing.T) {
	cases := []struct {
		name      string
		m, n      int
		hidden    []int
		r         [][]float64
		b         float64
		budget    int64
		procs     int
		direct    bool // also check against the direct (probability-space) Eq 4.11
		wantProb  bool
		wantTable bool
		d         int     // 0: 3
		scale     float32 // 0: 1; multiplies the weights (25: two-pass rows, Q < 1e-300 at some points)
	}{
		{"krr/table/hidden5", 40, 15, []int{5}, KRRMatrix(1, 3), 0.8, 0, 0, true, true, true, 0, 0},
		{"krr/recompute/hidden4x3", 40, 15, []int{4, 3}, KRRMatrix(1.5, 3), 0.8, -1, 0, true, true, false, 0, 0},
		{"krr/logistic", 40, 15, nil, KRRMatrix(0.5, 3), 1.2, 0, 0, true, true, true, 0, 0},
		{"identity/log-space/table", 40, 15, []int{5}, KRRMatrix(math.Inf(1), 3), 0.8, 0, 0, true, false, true, 0, 0},
		{"zero-entry/log-space/recompute", 40, 15, []int{4, 3}, [][]float64{{0.7, 0, 0.2}, {0.3, 0.5, 0.3}, {0, 0.5, 0.5}}, 0.8, -1, 0, true, false, false, 0, 0},
		{"krr/3-blocks/3-procs", 2100, 20, []int{4}, KRRMatrix(2, 3), 0.6, 0, 3, false, true, true, 0, 0},
		{"identity/3-blocks/3-procs/recompute", 2100, 20, []int{4}, KRRMatrix(math.Inf(1), 3), 0.6, -1, 3, false, false, false, 0, 0},
		{"asymmetric-positive/prob-space/table", 40, 15, []int{5}, [][]float64{{0.6, 0.2, 0.1}, {0.3, 0.5, 0.2}, {0.1, 0.3, 0.7}}, 0.8, 0, 0, true, true, true, 0, 0},
		{"krr/d=8/recompute", 50, 15, []int{5}, KRRMatrix(1, 3), 1.5, -1, 0, true, true, false, 8, 0},
		{"identity/d=8/table", 50, 15, []int{5}, KRRMatrix(math.Inf(1), 3), 1.5, 0, 0, true, false, true, 8, 0},
		{"identity/saturated/two-pass+Q-underflow", 40, 15, []int{5}, KRRMatrix(math.Inf(1), 3), 0.8, 0, 0, false, false, true, 0, 25},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.procs > 0 {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(tc.procs))
			}
			k := len(tc.r)
			d := tc.d
			if d == 0 {
				d = 3
			}
			aux, noisy, labels := tinyMarginal(uint64(len(tc.name)), tc.m, tc.n, d, k, tc.b)
			tr, nt, std := newTestMarginal(t, aux, noisy, labels, tc.b, tc.r, tc.hidden, tc.budget)
			if tr.pr.probSpace != tc.wantProb || (tr.train.tab != nil) != tc.wantTable {
				t.Fatalf("kernel: probability space %v, table %v; want %v, %v", tr.pr.probSpace, tr.train.tab != nil, tc.wantProb, tc.wantTable)
			}
			if tc.scale != 0 {
				for i := range nt.params {
					nt.params[i] *= tc.scale
				}
			}
			grad := make([]float64, len(nt.params))
			loss := tr.lossGrad(nt, allRows(tc.n), grad)
			if !tr.pr.probSpace {
				twoPass := 0
				for i, y := range labels {
					if tr.pr.amax[y]-tr.pr.q[y*tc.m+int(tr.train.nearest[i])] > 80 {
						twoPass++
					}
				}
				if (twoPass > 0) != (tc.scale != 0) {
					t.Fatalf("%d rows took the two-pass log-space path", twoPass)
				}
				under := 0
				for _, b := range tr.pr.blocks {
					for _, a := range b.a64 {
						if a <= -690 {
							under++
						}
					}
				}
				if (under > 0) != (tc.scale >= 25) {
					t.Fatalf("%d values of Q underflow float64", under)
				}
				t.Logf("%d of %d rows took the two-pass path; Q underflows float64 at %d of %d points", twoPass, tc.n, under, 3*tc.m)
			}
			sizes := nt.sizes
			ref := func(p []float64) float64 {
				return refMarginalLog(sizes, p, std, aux, noisy, labels, tc.b, tc.r)
			}
			p0 := f64s(nt.params)
			if want := ref(p0); math.Abs(loss-want) > lossTol*math.Abs(want) {
				t.Errorf("loss %.9g, log-space reference %.9g", loss, want)
			}
			worst := compareGrad(t, "vs log-space reference", grad, centralDiff(ref, p0, fdStep))
			if tc.direct {
				direct := func(p []float64) float64 {
					return refMarginalDirect(sizes, p, std, aux, noisy, labels, tc.b, tc.r)
				}
				if want := direct(p0); math.Abs(loss-want) > lossTol*math.Abs(want) {
					t.Errorf("loss %.9g, direct Eq 4.11 %.9g", loss, want)
				}
				worst = math.Max(worst, compareGrad(t, "vs direct Eq 4.11", grad, centralDiff(direct, p0, fdStep)))
			}
			t.Logf("%d parameters, loss %.6f, worst gradient error %.2g·‖g‖∞", len(grad), loss, worst)
		})
	}
}

// TestMarginalChunksAndGroups: splitting the batch into chunks of rows
// (bounded row buffer) gives bit-identical gradients, since every
// accumulator still sums the rows in batch order; fewer gradient groups
// than blocks only reorders the float64 sum over blocks.
func TestMarginalChunksAndGroups(t *testing.T) {
	for _, eps := range []float64{1, math.Inf(1)} {
		r := KRRMatrix(eps, 3)
		aux, noisy, labels := tinyMarginal(8, 2500, 40, 3, 3, 0.7)
		tr, nt, _ := newTestMarginal(t, aux, noisy, labels, 0.7, r, []int{6}, -1)
		want := make([]float64, len(nt.params))
		wantLoss := tr.lossGrad(nt, allRows(40), want)
		defer func(a, b int) { maxRowBuf, maxGroupGrads = a, b }(maxRowBuf, maxGroupGrads)
		maxRowBuf, maxGroupGrads = 4*2500*7, len(nt.params) // chunks of 7 rows, one group
		tr2, _, _ := newTestMarginal(t, aux, noisy, labels, 0.7, r, []int{6}, -1)
		if tr2.chunkLen != 7 || tr2.groups != 1 || len(tr2.pr.blocks) != 3 {
			t.Fatalf("chunk %d rows, %d groups of %d blocks", tr2.chunkLen, tr2.groups, len(tr2.pr.blocks))
		}
		got := make([]float64, len(nt.params))
		loss := tr2.lossGrad(nt, allRows(40), got)
		if loss != wantLoss {
			t.Errorf("ε_y = %v: chunked loss %v, want %v", eps, loss, wantLoss)
		}
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-12*math.Max(1, math.Abs(want[i])) {
				t.Fatalf("ε_y = %v: parameter %d: %v, want %v", eps, i, got[i], want[i])
			}
		}
		maxRowBuf, maxGroupGrads = 256<<20, 1<<24
	}
}

// TestMarginalGradientMinibatch checks that a step on a subset of the rows
// is the gradient of the mean over that subset (the kernel's per-label
// accumulators are reset between steps).
func TestMarginalGradientMinibatch(t *testing.T) {
	r := KRRMatrix(1, 4)
	aux, noisy, labels := tinyMarginal(5, 60, 30, 2, 4, 0.7)
	tr, nt, std := newTestMarginal(t, aux, noisy, labels, 0.7, r, []int{6}, 0)
	grad := make([]float64, len(nt.params))
	tr.lossGrad(nt, allRows(30), grad) // a first step leaves nothing behind
	batch := []int{3, 17, 4, 29, 0, 11, 12}
	loss := tr.lossGrad(nt, batch, grad)
	var bn [][]float32
	var bl []int
	for _, i := range batch {
		bn, bl = append(bn, noisy[i]), append(bl, labels[i])
	}
	ref := func(p []float64) float64 { return refMarginalLog(nt.sizes, p, std, aux, bn, bl, 0.7, r) }
	p0 := f64s(nt.params)
	if want := ref(p0); math.Abs(loss-want) > lossTol*math.Abs(want) {
		t.Errorf("loss %.9g, reference %.9g", loss, want)
	}
	compareGrad(t, "minibatch", grad, centralDiff(ref, p0, fdStep))
}

func TestForwardGradient(t *testing.T) {
	cases := []struct {
		name   string
		d      int
		hidden []int
		r      [][]float64
	}{
		{"krr/hidden5", 4, []int{5}, KRRMatrix(1, 3)},
		{"krr/hidden6x4/wide-input", 30, []int{6, 4}, KRRMatrix(0.8, 4)},
		{"identity(naive)/hidden5", 4, []int{5}, KRRMatrix(math.Inf(1), 3)},
		{"zero-entry/logistic", 4, nil, [][]float64{{0.7, 0, 0.2}, {0.3, 0.5, 0.3}, {0, 0.5, 0.5}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := len(tc.r)
			_, x, labels := tinyMarginal(uint64(tc.d), 1, 150, tc.d, k, 0.5) // 150 rows: 3 blocks
			sizes, _ := netSizes(tc.d, tc.hidden, k)
			nt := newNet(sizes)
			randomiseParams(nt, 9)
			std := nn.FitStandardiser(x, tc.d)
			tr := newForwardTrainer(nt, std, ForwardData{X: x, Labels: labels, R: tc.r}, ForwardData{}, len(x))
			grad := make([]float64, len(nt.params))
			loss := tr.lossGrad(nt, allRows(len(x)), grad)
			ref := func(p []float64) float64 { return refForwardLoss(sizes, p, std, x, labels, tc.r) }
			p0 := f64s(nt.params)
			if want := ref(p0); math.Abs(loss-want) > lossTol*math.Abs(want) {
				t.Errorf("loss %.9g, reference %.9g", loss, want)
			}
			worst := compareGrad(t, "forward", grad, centralDiff(ref, p0, fdStep))
			t.Logf("%d parameters, loss %.6f, worst gradient error %.2g·‖g‖∞", len(grad), loss, worst)
		})
	}
}

// TestMarginalLossValue compares the kernel's loss with a naive float64
// triple loop over (n, m, y) of Eq 4.11, in probability space where that
// does not underflow, and with the float64 log-space reference where it
// does (tiny b: the naive loop returns log 0).
func TestMarginalLossValue(t *testing.T) {
	cases := []struct {
		name        string
		b           float64
		r           [][]float64
		budget      int64
		m           int
		naiveUnderf bool
	}{
		{"b=1/krr/table", 1, KRRMatrix(1.2, 4), 0, 300, false},
		{"b=1/krr/recompute", 1, KRRMatrix(1.2, 4), -1, 300, false},
		{"b=1/identity/table", 1, KRRMatrix(math.Inf(1), 4), 0, 300, false},
		{"b=0.3/krr/2-blocks", 0.3, KRRMatrix(3, 4), 0, 1500, false},
		{"b=1e-3/krr/table", 1e-3, KRRMatrix(1.2, 4), 0, 300, true},
		{"b=1e-3/krr/recompute", 1e-3, KRRMatrix(1.2, 4), -1, 300, true},
		{"b=1e-3/identity/recompute", 1e-3, KRRMatrix(math.Inf(1), 4), -1, 300, true},
		{"b=1e-5/krr/table", 1e-5, KRRMatrix(1.2, 4), 0, 300, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			aux, noisy, labels := tinyMarginal(21, tc.m, 40, 3, 4, 1)
			tr, nt, std := newTestMarginal(t, aux, noisy, labels, tc.b, tc.r, []int{5}, tc.budget)
			got := tr.meanLoss(nt, tr.pr, tr.train)
			p0 := f64s(nt.params)
			naive := refMarginalDirect(nt.sizes, p0, std, aux, noisy, labels, tc.b, tc.r)
			logRef := refMarginalLog(nt.sizes, p0, std, aux, noisy, labels, tc.b, tc.r)
			if tc.naiveUnderf != math.IsInf(naive, 1) {
				t.Fatalf("naive loss %v: the case is not what it says (underflow expected: %v)", naive, tc.naiveUnderf)
			}
			want := naive
			if tc.naiveUnderf {
				want = logRef
			}
			// Distances are float32: |Δ log p| ≲ d·2^-24·‖z̃−ẑ‖₁/b, relative
			// to log p ≈ −‖z̃−ẑ‖₁/b that is ≈ 2e-7; lossTol covers it.
			if math.IsNaN(got) || math.Abs(got-want) > lossTol*math.Abs(want) {
				t.Errorf("loss %.10g, want %.10g (naive %.10g, log-space %.10g)", got, want, naive, logRef)
			}
		})
	}
}

func ExampleKRRMatrix() {
	for _, row := range KRRMatrix(math.Log(2), 3) {
		fmt.Println(row)
	}
	// Output:
	// [0.5 0.25 0.25]
	// [0.25 0.5 0.25]
	// [0.25 0.25 0.5]
}

// TestColLossUnderflow: the forward objective's loss and gradient stay
// finite and exact when R·softmax underflows float64 (a channel with zeros
// and a label the network rules out by 900 nats).
func TestColLossUnderflow(t *testing.T) {
	lg := []float32{0, -900, 5} // K = 3 logits of one column
	r := flatChannel(KRRMatrix(math.Inf(1), 3))
	logp, p, dl := make([]float64, 3), make([]float64, 3), make([]float32, 3)
	loss := colLoss(r, 3, lg, 1, 0, 1, logp, p, dl, 1)
	want := 900 + nn.LogSumExp([]float64{0, -900, 5})
	if math.Abs(loss-want) > 1e-12*want {
		t.Errorf("loss %v, want %v", loss, want)
	}
	p0, p2 := 1/(1+math.Exp(5)), math.Exp(5)/(1+math.Exp(5))
	if math.Abs(float64(dl[0])-p0) > 1e-7 || math.Abs(float64(dl[1])+1) > 1e-7 || math.Abs(float64(dl[2])-p2) > 1e-7 {
		t.Errorf("gradient %v, want [%v −1 %v]", dl, p0, p2)
	}
}
