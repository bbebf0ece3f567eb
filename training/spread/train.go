package spread

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/ldpsql/ldpsql/training/nn"
)

// Optimiser and prior constants (see the package documentation).
const (
	// initStd is the standard deviation of the random initial weights.
	initStd = 0.01
	// priorPseudoCount is added to every bin's weighted count in the prior
	// update (eq. 65), in units of one datapoint's total weight, so no bin's
	// probability (and no proposal) becomes exactly 0.
	priorPseudoCount = 1e-2
	// Rows are split into at most maxChunks chunks of at least minChunk rows;
	// the split depends only on N, so results do not depend on GOMAXPROCS.
	maxChunks = 32
	minChunk  = 64
)

// Train fits the classifier by importance-sampled EM on the spread
// likelihood (see the package documentation). progress, if not nil, is
// called after every iteration. Train returns ctx's error if ctx is done
// before training ends.
func Train(ctx context.Context, cfg Config, d Data, progress func(nn.Progress)) (*Model, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("spread config: %w", err)
	}
	k, err := d.validate()
	if err != nil {
		return nil, fmt.Errorf("spread data: %w", err)
	}
	t := newTrainer(cfg, d, k)
	theta := t.initTheta()
	opt := nn.NewAdam[float64, float64](len(theta), cfg.LR)
	total := cfg.Iterations * cfg.StepsPerIteration
	step := 0
	started := time.Now()
	for it := range cfg.Iterations {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		iterStart := time.Now()
		var loglik float64
		for j := range cfg.StepsPerIteration {
			r, err := t.pass(ctx, theta, it, j == 0)
			if err != nil {
				return nil, err
			}
			if j == 0 {
				loglik = r.loglik
			}
			// Adam ascent step (descent on −gradient) with a cosine-decayed learning rate.
			opt.LR = cfg.LR * 0.5 * (1 + math.Cos(math.Pi*float64(step)/float64(total)))
			step++
			for i := range r.grad {
				r.grad[i] = -r.grad[i]
			}
			opt.Step(theta, r.grad)
			t.centre(theta)
			for _, v := range theta {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return nil, fmt.Errorf("spread: training diverged at iteration %d (non-finite parameters); lower lr", it+1)
				}
			}
		}
		t.updatePrior()
		if progress != nil {
			// An iteration is the EM model's epoch; its loss is the negated log-likelihood estimate.
			// Its rows/s counts the rows of the iteration's passes; its ETA is the mean iteration so far
			// times the iterations left.
			perIter := time.Since(started).Seconds() / float64(it+1)
			progress(nn.Progress{Epoch: it + 1, Epochs: cfg.Iterations, Restart: 1, Restarts: 1, Loss: -loglik, ValLoss: math.NaN(),
				RowsPerSec: float64(t.n*cfg.StepsPerIteration) / max(time.Since(iterStart).Seconds(), 1e-9),
				ETA:        time.Duration(perIter * float64(cfg.Iterations-it-1) * float64(time.Second))})
		}
	}
	return t.model(theta), nil
}

// noisyFeature is the state of one privatised ("rr" or "laplace") feature.
type noisyFeature struct {
	col      int
	laplace  bool
	bins     int
	z        []float64 // bin centres, standardised
	centre   []float64 // bin centres, original units (laplace)
	invScale float64   // laplace: 1/b
	alpha    float64   // rr: p(x̃=k|k)/p(x̃=k|j≠k) = (1−p)(B−1)/p (+Inf when p = 0)
	obs      []int32   // rr: released bin of every row
	xt       []float64 // laplace: privatised value of every row
	off      int       // offset of its bins in the count vector
	prior    []float64 // p(k|i)
	cdf      []float64 // cumulative prior
}

// trainer holds the preprocessed data and the current prior.
type trainer struct {
	cfg     Config
	n, d, k int
	s       int
	labels  []int
	// exact: Config.Labels is LabelsExact (sum over the classes).
	exact bool
	// labelCDF[c̃] is the cumulative label proposal ρ(c|c̃) ∝ R[c̃][c];
	// logZc[c̃] = log Σ_c R[c̃][c]; logR[c̃][c] = log R[c̃][c].
	labelCDF [][]float64
	logZc    []float64
	logR     [][]float64
	clean    []int     // clean columns
	zClean   []float64 // n × len(clean) standardised clean values
	noisy    []noisyFeature
	nCounts  int
	mean     []float64 // standardisation: z = (x − mean)/scale
	scale    []float64
	chunks   [][2]int
	acc      []accum
	counts   []float64 // weighted bin counts of the last E-step
	w        []float64 // n × s weights of the current E-step (sampled labels, StepsPerIteration > 1)
	thetaK   []float64 // θ^k, the parameters of the current E-step (exact labels)
}

// accum is one chunk's share of a pass.
type accum struct {
	grad   []float64
	counts []float64
	loglik float64
	energy float64
}

// passResult holds the means over rows of one pass.
type passResult struct {
	grad   []float64 // ∇θ of the M-step energy, θ = (W row-major K×D, b)
	loglik float64   // IS estimate of (1/N) Σ log p̃(c̃|x̃) (first pass only)
	energy float64   // M-step energy (1/N) Σ_n Σ_s w(s|n) log p_θ(c^s|x^s)
}

func newTrainer(cfg Config, d Data, k int) *trainer {
	n, dim := len(d.X), len(d.Channels)
	t := &trainer{cfg: cfg, n: n, d: dim, k: k, s: cfg.Samples, labels: d.Labels,
		exact: cfg.Labels == LabelsExact, mean: make([]float64, dim), scale: make([]float64, dim)}
	t.labelCDF = make([][]float64, k)
	t.logZc = make([]float64, k)
	t.logR = make([][]float64, k)
	for ct := range k {
		cdf := make([]float64, k)
		t.logR[ct] = make([]float64, k)
		acc := 0.0
		for c := range k {
			acc += d.R[ct][c]
			cdf[c] = acc
			t.logR[ct][c] = math.Log(d.R[ct][c])
		}
		t.labelCDF[ct] = cdf
		t.logZc[ct] = math.Log(acc)
	}
	for i, ch := range d.Channels {
		switch ch.Kind {
		case KindClean:
			var s, ss float64
			for _, row := range d.X {
				s += row[i]
			}
			mu := s / float64(n)
			for _, row := range d.X {
				ss += (row[i] - mu) * (row[i] - mu)
			}
			sd := math.Sqrt(ss / float64(n))
			if !(sd > 0) || math.IsInf(sd, 0) {
				sd = 1
			}
			t.mean[i], t.scale[i] = mu, sd
			t.clean = append(t.clean, i)
		default:
			// The clean feature lies in [Lo, Hi]: standardise as if uniform.
			t.mean[i] = ch.Lo/2 + ch.Hi/2
			t.scale[i] = (ch.Hi - ch.Lo) / math.Sqrt(12)
			bins := ch.Bins
			if ch.Kind == KindLaplace && bins == 0 {
				bins = cfg.Bins
			}
			f := noisyFeature{col: i, laplace: ch.Kind == KindLaplace, bins: bins, off: t.nCounts,
				z: make([]float64, bins), centre: make([]float64, bins),
				prior: make([]float64, bins), cdf: make([]float64, bins)}
			for b := range bins {
				f.centre[b] = binCentre(b, ch.Lo, ch.Hi, bins)
				f.z[b] = (f.centre[b] - t.mean[i]) / t.scale[i]
				f.prior[b] = 1 / float64(bins)
			}
			if f.laplace {
				f.invScale = 1 / ch.Scale
				f.xt = make([]float64, n)
				for r, row := range d.X {
					f.xt[r] = row[i]
				}
			} else {
				if ch.FlipProb == 0 {
					f.alpha = math.Inf(1)
				} else {
					f.alpha = (1 - ch.FlipProb) * float64(bins-1) / ch.FlipProb
				}
				f.obs = make([]int32, n)
				for r, row := range d.X {
					f.obs[r] = int32(binOf(row[i], ch.Lo, ch.Hi, bins))
				}
			}
			f.setPriorTables()
			t.nCounts += bins
			t.noisy = append(t.noisy, f)
		}
	}
	t.zClean = make([]float64, n*len(t.clean))
	for r, row := range d.X {
		for j, col := range t.clean {
			t.zClean[r*len(t.clean)+j] = (row[col] - t.mean[col]) / t.scale[col]
		}
	}
	nc := min(maxChunks, max(1, n/minChunk))
	for c := range nc {
		t.chunks = append(t.chunks, [2]int{c * n / nc, (c + 1) * n / nc})
	}
	t.acc = make([]accum, nc)
	for c := range t.acc {
		t.acc[c] = accum{grad: make([]float64, k*dim+k), counts: make([]float64, t.nCounts)}
	}
	t.counts = make([]float64, t.nCounts)
	if cfg.StepsPerIteration > 1 && !t.exact {
		t.w = make([]float64, n*t.s)
	}
	return t
}

func (f *noisyFeature) setPriorTables() {
	acc := 0.0
	for b, p := range f.prior {
		acc += p
		f.cdf[b] = acc
	}
}

// initTheta returns small random centred weights and zero biases.
func (t *trainer) initTheta() []float64 {
	rng := rand.New(rand.NewPCG(t.cfg.Seed, streamKey(0)))
	theta := make([]float64, t.k*t.d+t.k)
	for i := range t.k * t.d {
		theta[i] = initStd * rng.NormFloat64()
	}
	t.centre(theta)
	return theta
}

// centre subtracts the mean over classes from every column of W and from b.
// Adding one vector to every class's weights does not change the softmax, so
// this fixes the parametrisation without changing the model.
func (t *trainer) centre(theta []float64) {
	k, d := t.k, t.d
	for i := range d + 1 {
		// Column i of W; i == d is the bias.
		at := func(c int) *float64 {
			if i == d {
				return &theta[k*d+c]
			}
			return &theta[c*d+i]
		}
		m := 0.0
		for c := range k {
			m += *at(c)
		}
		m /= float64(k)
		for c := range k {
			*at(c) -= m
		}
	}
}

// streamKey maps an (iteration, chunk) pair, or 0 for the initialisation, to
// the second PCG seed of its random stream (splitmix64 of a unique key).
func streamKey(key uint64) uint64 {
	z := key + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func chunkStream(seed uint64, iter, chunk int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, streamKey(1+uint64(iter)*maxChunks+uint64(chunk))))
}

// scratch holds one worker's per-row buffers.
type scratch struct {
	cs     []int     // s: sampled labels
	bins   []int32   // s × len(noisy): sampled bins
	logits []float64 // s × k, turned into probabilities in place
	logp   []float64 // s: log p_θ(c^s|x^s) (sampled), log q(x^s) (exact)
	w      []float64 // s
	base   []float64 // k
	rsum   []float64 // k
	lap    []float64 // bins: Laplace proposal CDF
	resp   []float64 // s × k: responsibilities r(c|s) (exact)
}

func (t *trainer) newScratch() *scratch {
	maxB := 0
	for _, f := range t.noisy {
		maxB = max(maxB, f.bins)
	}
	return &scratch{cs: make([]int, t.s), bins: make([]int32, t.s*len(t.noisy)),
		logits: make([]float64, t.s*t.k), logp: make([]float64, t.s), w: make([]float64, t.s),
		base: make([]float64, t.k), rsum: make([]float64, t.k), lap: make([]float64, maxB),
		resp: make([]float64, t.s*t.k)}
}

// pass runs one E-step (first: the weights are computed at theta, stored,
// and the weighted bin counts kept for the prior update) or re-uses the
// current E-step's samples and weights (not first: the samples are
// regenerated from the same streams), and returns the mean gradient of the
// M-step energy at theta.
func (t *trainer) pass(ctx context.Context, theta []float64, iter int, first bool) (passResult, error) {
	if first {
		t.thetaK = append(t.thetaK[:0], theta...)
	}
	p := min(nn.Workers(), len(t.chunks))
	scratches := make([]*scratch, p)
	nn.ParallelTasks(p, len(t.chunks), func(w, c int) {
		if ctx.Err() != nil {
			return
		}
		if scratches[w] == nil {
			scratches[w] = t.newScratch()
		}
		sc := scratches[w]
		a := &t.acc[c]
		clear(a.grad)
		if first {
			clear(a.counts)
		}
		a.loglik, a.energy = 0, 0
		rng := chunkStream(t.cfg.Seed, iter, c)
		for n := t.chunks[c][0]; n < t.chunks[c][1]; n++ {
			if t.exact {
				t.rowExact(n, theta, rng, sc, a, first)
			} else {
				t.row(n, theta, rng, sc, a, first)
			}
		}
	})
	if err := ctx.Err(); err != nil {
		return passResult{}, err
	}
	// Reduce in chunk order, so the result does not depend on scheduling.
	r := passResult{grad: make([]float64, len(theta))}
	if first {
		clear(t.counts)
	}
	for c := range t.acc {
		a := &t.acc[c]
		for i, g := range a.grad {
			r.grad[i] += g
		}
		if first {
			for i, v := range a.counts {
				t.counts[i] += v
			}
		}
		r.loglik += a.loglik
		r.energy += a.energy
	}
	inv := 1 / float64(t.n)
	for i := range r.grad {
		r.grad[i] *= inv
	}
	r.loglik *= inv
	r.energy *= inv
	return r, nil
}

// sampleFeatures draws row n's S samples of the privatised features,
// x_i^s ~ ρ(x_i|x̃_i) ∝ p(x̃_i|x_i) p(x_i), into sc.bins.
func (t *trainer) sampleFeatures(n int, rng *rand.Rand, sc *scratch) {
	s, nf := t.s, len(t.noisy)
	for fi := range t.noisy {
		f := &t.noisy[fi]
		if f.laplace {
			cdf := sc.lap[:f.bins]
			acc := f.laplaceProposal(f.xt[n], cdf)
			for j := range s {
				sc.bins[j*nf+fi] = int32(searchCDF(cdf, rng.Float64()*acc))
			}
			continue
		}
		// Randomised response: the likelihood takes two values, so
		// ρ(k) ∝ p(k)·(1 + (α−1)·[k = j]) with j the released bin. Draw j
		// with probability α p(j)/(α p(j) + 1 − p(j)), else draw from the
		// prior restricted to k ≠ j by inverse CDF with j's interval cut out.
		j := int(f.obs[n])
		for jj := range s {
			sc.bins[jj*nf+fi] = int32(f.sampleRR(j, rng))
		}
	}
}

// cleanLogits writes to dst the part of row n's logits under θ that all
// samples share: b + W·(clean features).
func (t *trainer) cleanLogits(n int, theta, dst []float64) {
	k, d, nc := t.k, t.d, len(t.clean)
	W, b := theta[:k*d], theta[k*d:]
	zc := t.zClean[n*nc : (n+1)*nc]
	for c := range k {
		v := b[c]
		wr := W[c*d : (c+1)*d]
		for j, col := range t.clean {
			v += wr[col] * zc[j]
		}
		dst[c] = v
	}
}

// sampleLogits writes to lg the logits under θ of sample j: base (from
// cleanLogits) plus W·(sampled privatised features).
func (t *trainer) sampleLogits(theta, base []float64, sc *scratch, j int, lg []float64) {
	k, d, nf := t.k, t.d, len(t.noisy)
	copy(lg, base)
	for fi := range t.noisy {
		f := &t.noisy[fi]
		z := f.z[sc.bins[j*nf+fi]]
		for c := range k {
			lg[c] += theta[c*d+f.col] * z
		}
	}
}

// addGradient adds to a the gradient terms Σ_s Σ_c g[s×k + c] (onehot(c) …)
// of row n: a.grad[c] += g[s,c]·(z^s, 1) summed over the ns samples, z^s
// the standardised sample (shared clean part, sampled privatised part).
func (t *trainer) addGradient(n, ns int, g []float64, sc *scratch, a *accum) {
	k, d, nf, nc := t.k, t.d, len(t.noisy), len(t.clean)
	clear(sc.rsum)
	for j := range ns {
		for c := range k {
			r := g[j*k+c]
			sc.rsum[c] += r
			gr := a.grad[c*d : (c+1)*d]
			for fi := range t.noisy {
				f := &t.noisy[fi]
				gr[f.col] += r * f.z[sc.bins[j*nf+fi]]
			}
		}
	}
	zc := t.zClean[n*nc : (n+1)*nc]
	for c := range k {
		a.grad[k*d+c] += sc.rsum[c]
		gr := a.grad[c*d : (c+1)*d]
		for j, col := range t.clean {
			gr[col] += sc.rsum[c] * zc[j]
		}
	}
}

// row draws row n's S (label, features) samples, weighs them and adds its
// terms to a (Config.Labels = LabelsSampled).
func (t *trainer) row(n int, theta []float64, rng *rand.Rand, sc *scratch, a *accum, first bool) {
	k, s, nf := t.k, t.s, len(t.noisy)

	// Labels: c^s ~ ρ(c|c̃) ∝ R[c̃][c].
	lcdf := t.labelCDF[t.labels[n]]
	for j := range s {
		sc.cs[j] = searchCDF(lcdf, rng.Float64()*lcdf[k-1])
	}
	t.sampleFeatures(n, rng, sc)
	// Logits: the clean part is shared by all samples.
	t.cleanLogits(n, theta, sc.base)
	// probs returns sample j's class probabilities; with no privatised
	// features every sample has the same x, so they are computed once.
	shared := nf == 0
	probs := func(j int) []float64 {
		if shared {
			return sc.logits[:k]
		}
		return sc.logits[j*k : (j+1)*k]
	}
	if shared {
		lg := sc.logits[:k]
		copy(lg, sc.base)
		m := math.Inf(-1)
		for _, v := range lg {
			m = max(m, v)
		}
		lse := m + math.Log(softmaxShifted(lg, m))
		for j := range s {
			sc.logp[j] = sc.base[sc.cs[j]] - lse
		}
	} else {
		for j := range s {
			lg := sc.logits[j*k : (j+1)*k]
			t.sampleLogits(theta, sc.base, sc, j, lg)
			sc.logp[j] = softmaxInPlace(lg, sc.cs[j])
		}
	}
	// Self-normalised weights w(s|n) = softmax_s log p_θ(c^s|x^s), held
	// fixed for the rest of the iteration.
	w := sc.w
	if first {
		lse := nn.LogSumExp(sc.logp)
		for j := range s {
			w[j] = math.Exp(sc.logp[j] - lse)
		}
		if t.w != nil {
			copy(t.w[n*s:(n+1)*s], w)
		}
		a.loglik += lse - math.Log(float64(s)) + t.logZc[t.labels[n]]
	} else {
		w = t.w[n*s : (n+1)*s]
	}
	// Gradient Σ_s w_s (onehot(c^s) − p_s) (z^s, 1); the coefficients go to
	// sc.resp, which this mode does not otherwise use.
	g := sc.resp
	for j := range s {
		a.energy += w[j] * sc.logp[j]
		p := probs(j)
		for c := range k {
			r := -w[j] * p[c]
			if c == sc.cs[j] {
				r += w[j]
			}
			g[j*k+c] = r
		}
	}
	t.addGradient(n, s, g, sc, a)
	if first {
		for j := range s {
			for fi := range t.noisy {
				f := &t.noisy[fi]
				a.counts[f.off+int(sc.bins[j*nf+fi])] += w[j]
			}
		}
	}
}

// rowExact draws row n's S feature samples, weighs them with the label
// summed out and adds its terms to a (Config.Labels = LabelsExact). At θ^k
// (t.thetaK, = theta on the E-step's first pass) every sample s gets
//
//	log q_s = log Σ_c R[c̃][c] p_θk(c|x^s),   r(c|s) = R[c̃][c] p_θk(c|x^s) / q_s,
//	w(s)    = softmax_s log q_s,
//
// all in log space; they are recomputed, not stored, on later passes of the
// same E-step (the samples are regenerated from the same stream). The
// gradient at theta is Σ_s w(s) (r(·|s) − p_θ(·|x^s)) (z^s, 1)ᵀ and the
// energy Σ_s w(s) Σ_c r(c|s) log p_θ(c|x^s). With no privatised features
// every sample is the same x, so one is used (w = 1).
func (t *trainer) rowExact(n int, theta []float64, rng *rand.Rand, sc *scratch, a *accum, first bool) {
	k, nf := t.k, len(t.noisy)
	ns := t.s
	if nf == 0 {
		ns = 1
	} else {
		t.sampleFeatures(n, rng, sc)
	}
	logR := t.logR[t.labels[n]]
	// Logits under θ into sc.logits; under θ^k into sc.resp.
	t.cleanLogits(n, theta, sc.base)
	for j := range ns {
		t.sampleLogits(theta, sc.base, sc, j, sc.logits[j*k:(j+1)*k])
	}
	if first {
		copy(sc.resp[:ns*k], sc.logits[:ns*k])
	} else {
		t.cleanLogits(n, t.thetaK, sc.base)
		for j := range ns {
			t.sampleLogits(t.thetaK, sc.base, sc, j, sc.resp[j*k:(j+1)*k])
		}
	}
	// Responsibilities and log q_s at θ^k:
	// log q_s = lse_c(log R[c̃][c] + ℓ_c) − lse_c(ℓ_c), r(·|s) = softmax(log R[c̃] + ℓ).
	for j := range ns {
		lg := sc.resp[j*k : (j+1)*k]
		lseL := nn.LogSumExp(lg)
		m := math.Inf(-1)
		for c := range k {
			lg[c] += logR[c]
			m = max(m, lg[c])
		}
		sc.logp[j] = m + math.Log(softmaxShifted(lg, m)) - lseL
	}
	w := sc.w[:ns]
	lse := nn.LogSumExp(sc.logp[:ns])
	for j := range ns {
		w[j] = math.Exp(sc.logp[j] - lse)
	}
	if first {
		a.loglik += lse - math.Log(float64(ns))
	}
	// Energy and gradient coefficients w(s)(r(c|s) − p_θ(c|x^s)), into
	// sc.resp.
	for j := range ns {
		lg := sc.logits[j*k : (j+1)*k]
		r := sc.resp[j*k : (j+1)*k]
		lseP := nn.LogSumExp(lg)
		e := 0.0
		for c := range k {
			lp := lg[c] - lseP // log p_θ(c|x^s)
			if r[c] > 0 {
				e += r[c] * lp
			}
			r[c] = w[j] * (r[c] - math.Exp(lp))
		}
		a.energy += w[j] * e
	}
	t.addGradient(n, ns, sc.resp, sc, a)
	if first {
		for j := range ns {
			for fi := range t.noisy {
				f := &t.noisy[fi]
				a.counts[f.off+int(sc.bins[j*nf+fi])] += w[j]
			}
		}
	}
}

// laplaceProposal writes to cdf the unnormalised cumulative proposal
// ρ(k|x̃) ∝ p(k|i)·exp(−|x̃ − centre_k|/b) of a Laplace feature and returns
// its total. The likelihoods are scaled by exp(dist_j/b), j the bin whose
// centre is nearest x̃, which is what log-space normalisation by the
// largest log-likelihood would do; and as the centres are evenly spaced they
// form geometric sequences in the distance from x̃, so they are computed
// with four exps instead of B: the ratio between neighbours is q = exp(−w/b)
// going away from x̃ and 1/q going towards it.
func (f *noisyFeature) laplaceProposal(x float64, cdf []float64) float64 {
	b := f.bins
	w := f.centre[1] - f.centre[0]
	// j: the last centre ≤ x (−1 if none).
	j := int(math.Floor((x - f.centre[0]) / w))
	j = min(max(j, -1), b-1)
	q := math.Exp(-w * f.invScale)
	// lik holds exp(−|x − centre_k|/b + dmin/b), dmin the smallest distance.
	var dmin float64
	switch {
	case j < 0:
		dmin = f.centre[0] - x
	case j == b-1:
		dmin = x - f.centre[b-1]
	default:
		dmin = min(x-f.centre[j], f.centre[j+1]-x)
	}
	// Left of x (k ≤ j): the likelihood falls by q per bin going left.
	if j >= 0 {
		l := math.Exp(-(x - f.centre[j] - dmin) * f.invScale)
		for k := j; k >= 0; k-- {
			cdf[k] = l
			l *= q
		}
	}
	if j+1 < b {
		l := math.Exp(-(f.centre[j+1] - x - dmin) * f.invScale)
		for k := j + 1; k < b; k++ {
			cdf[k] = l
			l *= q
		}
	}
	acc := 0.0
	for k := range b {
		acc += f.prior[k] * cdf[k]
		cdf[k] = acc
	}
	return acc
}

// softmaxInPlace replaces the logits lg by their softmax and returns
// log softmax(lg)_c.
func softmaxInPlace(lg []float64, c int) float64 {
	m := math.Inf(-1)
	for _, v := range lg {
		m = max(m, v)
	}
	lc := lg[c]
	return lc - m - math.Log(softmaxShifted(lg, m))
}

// softmaxShifted replaces lg by its softmax, given its maximum m, and returns
// Σ exp(lg − m).
func softmaxShifted(lg []float64, m float64) float64 {
	s := 0.0
	for i, v := range lg {
		e := math.Exp(v - m)
		lg[i] = e
		s += e
	}
	inv := 1 / s
	for i := range lg {
		lg[i] *= inv
	}
	return s
}

// sampleRR draws a bin from the randomised-response proposal of an rr
// feature whose released bin is j.
func (f *noisyFeature) sampleRR(j int, rng *rand.Rand) int {
	if math.IsInf(f.alpha, 1) {
		return j
	}
	pj := f.prior[j]
	tot := f.cdf[f.bins-1]
	keep := f.alpha * pj
	u := rng.Float64() * (keep + tot - pj)
	if u < keep {
		return j
	}
	u -= keep
	if u >= f.cdf[j]-pj {
		u += pj
	}
	k := searchCDF(f.cdf, u)
	if k == j { // only by rounding
		if j+1 < f.bins {
			k = j + 1
		} else {
			k = j - 1
		}
	}
	return k
}

// updatePrior applies eq. 65 to every noisy feature: p(k|i) ∝ Σ_n Σ_s
// w(s|n) [x_i^s = k] + priorPseudoCount.
func (t *trainer) updatePrior() {
	for fi := range t.noisy {
		f := &t.noisy[fi]
		cnt := t.counts[f.off : f.off+f.bins]
		tot := 0.0
		for _, v := range cnt {
			tot += v + priorPseudoCount
		}
		for bb, v := range cnt {
			f.prior[bb] = (v + priorPseudoCount) / tot
		}
		f.setPriorTables()
	}
}

// model folds the standardisation into the weights.
func (t *trainer) model(theta []float64) *Model {
	k, d := t.k, t.d
	m := &Model{k: k, d: d, w: make([]float64, k*d), b: make([]float64, k), cfg: t.cfg}
	for c := range k {
		bc := theta[k*d+c]
		for i := range d {
			wz := theta[c*d+i]
			m.w[c*d+i] = wz / t.scale[i]
			bc -= wz * t.mean[i] / t.scale[i]
		}
		m.b[c] = bc
	}
	return m
}

// searchCDF returns the first index whose cumulative value exceeds u,
// clamped to the last index.
func searchCDF(cdf []float64, u float64) int {
	lo, hi := 0, len(cdf)-1
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if cdf[mid] > u {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}
