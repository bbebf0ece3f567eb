package spread

import (
	"crypto/sha256"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/optimize"

	"github.com/ldpsql/ldpsql/training/nn"
)

// krr returns the K×K k-ary randomised-response channel that keeps a label
// with probability 1 − p and otherwise picks one of the other K − 1.
func krr(k int, p float64) [][]float64 {
	r := make([][]float64, k)
	for i := range r {
		r[i] = make([]float64, k)
		for j := range r[i] {
			if i == j {
				r[i][j] = 1 - p
			} else {
				r[i][j] = p / float64(k-1)
			}
		}
	}
	return r
}

// privatiseLabel draws c̃ ~ R[·][c].
func privatiseLabel(rng *rand.Rand, r [][]float64, c int) int {
	u := rng.Float64()
	for i := range r {
		u -= r[i][c]
		if u < 0 {
			return i
		}
	}
	return len(r) - 1
}

// laplace draws Laplace(0, b).
func laplace(rng *rand.Rand, b float64) float64 {
	return -b * math.Log(1-rng.Float64()) * float64(1-2*rng.IntN(2))
}

// privatiseRR releases the bin of x by categorical randomised response and
// returns its centre.
func privatiseRR(rng *rand.Rand, ch Channel, x float64) float64 {
	k := binOf(x, ch.Lo, ch.Hi, ch.Bins)
	if rng.Float64() < ch.FlipProb {
		j := rng.IntN(ch.Bins - 1)
		if j >= k {
			j++
		}
		k = j
	}
	return binCentre(k, ch.Lo, ch.Hi, ch.Bins)
}

// privatise applies the channels to the clean rows and R to the labels.
func privatise(rng *rand.Rand, x [][]float64, c []int, chans []Channel, r [][]float64) ([][]float64, []int) {
	xt := make([][]float64, len(x))
	ct := make([]int, len(c))
	for n, row := range x {
		xt[n] = make([]float64, len(row))
		for i, v := range row {
			switch chans[i].Kind {
			case KindRR:
				xt[n][i] = privatiseRR(rng, chans[i], v)
			case KindLaplace:
				xt[n][i] = v + laplace(rng, chans[i].Scale)
			default:
				xt[n][i] = v
			}
		}
		ct[n] = privatiseLabel(rng, r, c[n])
	}
	return xt, ct
}

// gaussClasses draws n points: class c with probability prior[c], then
// x = means[c] + sd·N(0, I), clipped to [lo, hi].
func gaussClasses(rng *rand.Rand, n int, prior []float64, means [][]float64, sd, lo, hi float64) ([][]float64, []int) {
	x := make([][]float64, n)
	c := make([]int, n)
	for i := range n {
		u := rng.Float64()
		k := 0
		for k < len(prior)-1 && u >= prior[k] {
			u -= prior[k]
			k++
		}
		c[i] = k
		x[i] = make([]float64, len(means[k]))
		for j, m := range means[k] {
			x[i][j] = min(hi, max(lo, m+sd*rng.NormFloat64()))
		}
	}
	return x, c
}

// forwardLL returns the mean forward-corrected log-likelihood
// (1/N) Σ_n log Σ_c R[c̃_n][c] softmax(Wx_n + b)_c and its gradient, with θ
// laid out as in the trainer (W row-major K×D, then b).
func forwardLL(theta []float64, x [][]float64, ct []int, r [][]float64) (float64, []float64) {
	k := len(r)
	d := len(x[0])
	grad := make([]float64, len(theta))
	lg := make([]float64, k)
	q := make([]float64, k)
	f := 0.0
	for n, row := range x {
		for c := range k {
			v := theta[k*d+c]
			for i, xi := range row {
				v += theta[c*d+i] * xi
			}
			lg[c] = v
		}
		lse := nn.LogSumExp(lg)
		z := 0.0
		for c := range k {
			lg[c] = math.Exp(lg[c] - lse) // p_c
			q[c] = r[ct[n]][c] * lg[c]
			z += q[c]
		}
		f += math.Log(z)
		for c := range k {
			g := q[c]/z - lg[c] // posterior − prior
			grad[k*d+c] += g
			for i, xi := range row {
				grad[c*d+i] += g * xi
			}
		}
	}
	inv := 1 / float64(len(x))
	for i := range grad {
		grad[i] *= inv
	}
	return f * inv, grad
}

// fitForward maximises forwardLL to convergence; with R = I it is plain
// logistic regression.
func fitForward(t *testing.T, x [][]float64, ct []int, r [][]float64) []float64 {
	t.Helper()
	return maximise(t, func(th []float64) (float64, []float64) { return forwardLL(th, x, ct, r) }, len(r), len(x[0]), nil)
}

// standardised returns the trainer's standardised view of clean rows.
func standardised(tr *trainer, x [][]float64) [][]float64 {
	z := make([][]float64, len(x))
	for n, row := range x {
		z[n] = make([]float64, len(row))
		for i, v := range row {
			z[n][i] = (v - tr.mean[i]) / tr.scale[i]
		}
	}
	return z
}

// thetaOf returns a model's parameters laid out as θ in original units.
func thetaOf(m *Model) []float64 {
	return append(append([]float64(nil), m.w...), m.b...)
}

// modelOf wraps θ (original units) as a Model.
func modelOf(theta []float64, k, d int) *Model {
	return &Model{k: k, d: d, w: theta[:k*d], b: theta[k*d:], cfg: DefaultConfig()}
}

func accuracy(m *Model, x [][]float64, c []int) float64 {
	ok := 0
	for n, row := range x {
		if m.Predict(row) == c[n] {
			ok++
		}
	}
	return float64(ok) / float64(len(x))
}

func agreement(a, b *Model, x [][]float64) float64 {
	ok := 0
	for _, row := range x {
		if a.Predict(row) == b.Predict(row) {
			ok++
		}
	}
	return float64(ok) / float64(len(x))
}

func norm(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s)
}

func diffNorm(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += (a[i] - b[i]) * (a[i] - b[i])
	}
	return math.Sqrt(s)
}

func cleanChannels(d int) []Channel {
	ch := make([]Channel, d)
	for i := range ch {
		ch[i] = Channel{Kind: KindClean}
	}
	return ch
}

// composition is one outcome of S draws from the label proposal: counts
// n_c and its multinomial probability.
type composition struct {
	n    []float64
	prob float64
}

// compositions lists the outcomes of S draws from the categorical ρ.
func compositions(rho []float64, s int) []composition {
	var out []composition
	n := make([]int, len(rho))
	var rec func(c, left int)
	rec = func(c, left int) {
		if c == len(rho)-1 {
			n[c] = left
			lp, _ := math.Lgamma(float64(s + 1))
			for i, v := range n {
				lg, _ := math.Lgamma(float64(v + 1))
				lp -= lg
				if v > 0 {
					lp += float64(v) * math.Log(rho[i])
				}
			}
			if p := math.Exp(lp); p > 0 {
				f := make([]float64, len(n))
				for i, v := range n {
					f[i] = float64(v)
				}
				out = append(out, composition{f, p})
			}
			return
		}
		for v := 0; v <= left; v++ {
			n[c] = v
			rec(c+1, left-v)
		}
	}
	rec(0, s)
	return out
}

// isBound is the exact expectation, over the S label samples c^s ~ ρ(c|c̃),
// of the labels-only importance-sampling estimate of the label spread
// log-likelihood, (1/N) Σ_n E[log Σ_c' R[c̃_n][c'] (1/S) Σ_s p_θ(c^s|x_n)],
// and its gradient. With clean features, Σ_s w(s|n)(onehot(c^s) − p_θ(·|x_n))
// is exactly the gradient of log (1/S) Σ_s p_θ(c^s|x_n) with respect to the
// logits, so the expected E-step gradient of the trainer with sampled labels is ∇isBound: its
// fixed point is the maximiser of this (IWAE-type) bound, which rises to the
// forward-corrected log-likelihood as S → ∞.
func isBound(theta []float64, x [][]float64, ct []int, r [][]float64, s int) (float64, []float64) {
	k, d := len(r), len(x[0])
	comps := make([][]composition, k)
	logZ := make([]float64, k)
	for c := range k {
		z := 0.0
		for _, v := range r[c] {
			z += v
		}
		rho := make([]float64, k)
		for i, v := range r[c] {
			rho[i] = v / z
		}
		logZ[c] = math.Log(z)
		comps[c] = compositions(rho, s)
	}
	grad := make([]float64, len(theta))
	p := make([]float64, k)
	g := make([]float64, k)
	f := 0.0
	for n, row := range x {
		for c := range k {
			v := theta[k*d+c]
			for i, xi := range row {
				v += theta[c*d+i] * xi
			}
			p[c] = v
		}
		lse := nn.LogSumExp(p)
		for c := range k {
			p[c] = math.Exp(p[c] - lse)
		}
		clear(g)
		f += logZ[ct[n]]
		for _, cm := range comps[ct[n]] {
			z := 0.0
			for c := range k {
				z += cm.n[c] * p[c]
			}
			f += cm.prob * math.Log(z/float64(s))
			for c := range k {
				g[c] += cm.prob * (cm.n[c]*p[c]/z - p[c])
			}
		}
		for c := range k {
			grad[k*d+c] += g[c]
			for i, xi := range row {
				grad[c*d+i] += g[c] * xi
			}
		}
	}
	inv := 1 / float64(len(x))
	for i := range grad {
		grad[i] *= inv
	}
	return f * inv, grad
}

// maximise runs L-BFGS on f from init (nil: θ = 0) and returns the centred
// maximiser.
func maximise(t *testing.T, f func([]float64) (float64, []float64), k, d int, init []float64) []float64 {
	t.Helper()
	p := optimize.Problem{
		Func: func(th []float64) float64 { v, _ := f(th); return -v },
		Grad: func(g, th []float64) {
			_, gr := f(th)
			for i := range g {
				g[i] = -gr[i]
			}
		},
	}
	if init == nil {
		init = make([]float64, k*d+k)
	}
	res, err := optimize.Minimize(p, init, &optimize.Settings{GradientThreshold: 1e-10, MajorIterations: 5000}, &optimize.LBFGS{})
	if res == nil {
		t.Fatalf("maximising: %v", err)
	}
	if err != nil {
		// A line search can stall in the last digits; accept a point whose
		// gradient is already negligible.
		if _, g := f(res.X); norm(g) > 1e-7 {
			t.Fatalf("maximising: %v", err)
		}
	}
	th := res.X
	(&trainer{k: k, d: d}).centre(th)
	return th
}

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }
