package vlm

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Progress is reported after every epoch.
type Progress struct {
	Epoch, Epochs int     // epochs done (1-based) and planned
	Loss          float64 // mean −ELBO per row over this epoch (nats)
	RowsPerSec    float64 // training throughput over this epoch
	ETA           time.Duration
}

// PCG stream identifiers: one independent stream per use of randomness.
const (
	streamInit    = 0x766c6d2d696e6974 // "vlm-init"
	streamShuffle = 0x766c6d2d73687566 // "vlm-shuf"
	streamNoise   = 0x766c6d2d6e6f6973 // "vlm-nois"
)

// Train fits the VLM on rows (n × inputDim, all in memory; the caller keeps
// ownership, they are copied) and stops early with ctx.Err() when ctx is
// cancelled (checked before every step). Zero fields of cfg take their
// defaults. For the Bernoulli likelihood every value must lie in [0, 1];
// every value must be finite. progress, if not nil, is called after each
// epoch from Train's goroutine. The same cfg (Seed included) and rows give
// bit-identical weights on the same machine and BLAS build.
func Train(ctx context.Context, cfg Config, rows [][]float32, progress func(Progress)) (*Model, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("vlm config: %w", err)
	}
	if len(rows) == 0 {
		return nil, errNoRows
	}
	in := len(rows[0])
	if in == 0 {
		return nil, fmt.Errorf("vlm: rows have no values")
	}
	if err := checkRows("row", rows, in); err != nil {
		return nil, err
	}
	cfg = cfg.Resolve(len(rows), in)
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("vlm config: %w", err)
	}
	if cfg.Likelihood == "" {
		cfg.Likelihood = chooseLikelihood(rows)
	}
	data := make([]float32, len(rows)*in)
	for i, r := range rows {
		if cfg.Likelihood == Bernoulli {
			for j, v := range r {
				if v < 0 || v > 1 {
					return nil, fmt.Errorf("vlm: row %d, value %d is %v: the bernoulli likelihood needs features in [0, 1] (use \"gaussian\", or leave the likelihood out to choose it from the data)", i, j, v)
				}
			}
		}
		copy(data[i*in:], r)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	m := newModel(cfg, in)
	if cfg.Likelihood == Gaussian {
		m.shift, m.scale = standardisation(rows)
		standardiseInPlace(data, in, m.shift, m.scale)
	}
	m.initWeights(rand.New(rand.NewPCG(cfg.Seed, streamInit)))

	n := len(rows)
	bs := min(cfg.BatchSize, n)
	tg, vm, err := compileTrainGraph(m, bs)
	if err != nil {
		return nil, fmt.Errorf("vlm: building the training graph: %w", err)
	}
	defer vm.Close()

	xBuf := make([]float32, bs*in)
	xiBuf := make([]float32, bs*cfg.D)
	wBuf := make([]float32, bs)
	if err := G.Let(tg.x, tensor.New(tensor.WithShape(bs, in), tensor.WithBacking(xBuf))); err != nil {
		return nil, err
	}
	if err := G.Let(tg.xi, tensor.New(tensor.WithShape(bs, cfg.D), tensor.WithBacking(xiBuf))); err != nil {
		return nil, err
	}
	if err := G.Let(tg.w, tensor.New(tensor.WithShape(bs), tensor.WithBacking(wBuf))); err != nil {
		return nil, err
	}

	opt := newAdam(tg.params, cfg.LR)
	shuffle := rand.New(rand.NewPCG(cfg.Seed, streamShuffle))
	noise := rand.New(rand.NewPCG(cfg.Seed, streamNoise))
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	start := time.Now()
	for epoch := 1; epoch <= cfg.Epochs; epoch++ {
		t0 := time.Now()
		shuffle.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		var lossSum float64
		for lo := 0; lo < n; lo += bs {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			hi := min(lo+bs, n)
			k := hi - lo
			for i := 0; i < bs; i++ {
				dst := xBuf[i*in : (i+1)*in]
				if i < k {
					r := perm[lo+i]
					copy(dst, data[r*in:(r+1)*in])
					wBuf[i] = 1 / float32(k)
				} else {
					clear(dst) // padding: weight 0
					wBuf[i] = 0
				}
			}
			for i := range xiBuf {
				xiBuf[i] = float32(stdLaplace(noise))
			}
			if err := vm.RunAll(); err != nil {
				return nil, fmt.Errorf("vlm: epoch %d: %w", epoch, err)
			}
			loss := float64(tg.loss.Value().Data().(float32))
			if math.IsNaN(loss) || math.IsInf(loss, 0) {
				return nil, fmt.Errorf("vlm: training diverged in epoch %d (loss %v); try a smaller lr", epoch, loss)
			}
			lossSum += loss * float64(k)
			if err := opt.step(); err != nil {
				return nil, fmt.Errorf("vlm: epoch %d: %w", epoch, err)
			}
			vm.Reset()
		}
		if progress != nil {
			el := time.Since(t0)
			rps := float64(n) / el.Seconds()
			eta := time.Duration(float64(time.Since(start)) / float64(epoch) * float64(cfg.Epochs-epoch))
			progress(Progress{Epoch: epoch, Epochs: cfg.Epochs, Loss: lossSum / float64(n), RowsPerSec: rps, ETA: eta})
		}
	}
	if err := tg.copyWeights(m); err != nil {
		return nil, fmt.Errorf("vlm: %w", err)
	}
	if err := m.checkFinite(); err != nil {
		return nil, err
	}
	return m, nil
}

// graphMu serialises building and compiling gorgonia graphs: gorgonia v0.9.18
// keeps unsynchronised package-level state there (op groups, shared
// constant nodes), which concurrent Train calls would race on. Running the
// compiled machines concurrently is safe.
var graphMu sync.Mutex

func compileTrainGraph(m *Model, bs int) (tg *trainGraph, vm G.VM, err error) {
	graphMu.Lock()
	defer graphMu.Unlock()
	defer func() {
		if r := recover(); r != nil { // NewTapeMachine panics on compile errors
			err = fmt.Errorf("%v", r)
		}
	}()
	if tg, err = newTrainGraph(m, bs); err != nil {
		return nil, nil, err
	}
	return tg, G.NewTapeMachine(tg.g, G.BindDualValues(tg.params...)), nil
}

// stdLaplace draws ξ ~ Laplace(0, 1) as −sign(u)·log(1 − 2|u|), u ~ U(−½, ½).
// u is drawn from the 2⁵³ multiples of 2⁻⁵³ in [0, 1) shifted by −½, so
// 1 − 2|u| ≥ 2⁻⁵² > 0 and the log is finite (|ξ| ≤ 36); u = 0 gives 0.
func stdLaplace(r *rand.Rand) float64 {
	u := r.Float64() - 0.5
	if u < 0 {
		return math.Log1p(2 * u) // = −(−1)·(−log(1 − 2|u|))
	}
	return -math.Log1p(-2 * u)
}

// initWeights draws the initial weights (see the package doc): He-uniform
// for layers followed by a ReLU, Glorot-uniform for the encoder's and
// decoder's output layers, zero biases; b starts at 2L/EpsPretrain or, when
// learnt, at b₀/2.
func (m *Model) initWeights(r *rand.Rand) {
	fill := func(ls []layer) {
		for i := range ls {
			l := &ls[i]
			var lim float64
			if i < len(ls)-1 {
				lim = math.Sqrt(6 / float64(l.in))
			} else {
				lim = math.Sqrt(6 / float64(l.in+l.out))
			}
			for k := range l.w {
				l.w[k] = float32((2*r.Float64() - 1) * lim)
			}
			clear(l.b)
		}
	}
	fill(m.enc)
	fill(m.dec)
	if m.cfg.EpsPretrain > 0 {
		m.bTrain = float32(2 * m.cfg.L / m.cfg.EpsPretrain)
	} else {
		m.bTrain = float32(learntScaleInit)
	}
}

func (m *Model) checkFinite() error {
	for li, l := range m.layers() {
		for _, v := range l.w {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("vlm: training diverged: layer %d has non-finite weights", li)
			}
		}
		for _, v := range l.b {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("vlm: training diverged: layer %d has non-finite biases", li)
			}
		}
	}
	if b := float64(m.bTrain); !(b > 0) || math.IsInf(b, 0) {
		return fmt.Errorf("vlm: training diverged: scale b = %v", b)
	}
	return nil
}

// adam is Adam (Kingma & Ba) on the float32 backing slices of gorgonia
// parameter nodes, updated in place, with bias correction folded into the
// step size; gradients are zeroed after each step. Large parameters are
// updated in parallel chunks (the result does not depend on the split:
// every element is updated independently).
type adam struct {
	params []*G.Node
	m, v   [][]float32
	lr     float64
	beta1  float64
	beta2  float64
	eps    float64
	t      int
}

func newAdam(params []*G.Node, lr float64) *adam {
	a := &adam{params: params, lr: lr, beta1: 0.9, beta2: 0.999, eps: 1e-8}
	for _, p := range params {
		n := p.Shape().TotalSize()
		a.m = append(a.m, make([]float32, n))
		a.v = append(a.v, make([]float32, n))
	}
	return a
}

// f32s returns the backing float32 slice of a dense tensor or a scalar.
func f32s(v G.Value) ([]float32, error) {
	switch v := v.(type) {
	case *tensor.Dense:
		d, ok := v.Data().([]float32)
		if !ok {
			return nil, fmt.Errorf("dtype %v, want float32", v.Dtype())
		}
		return d, nil
	case *G.F32:
		return unsafe.Slice((*float32)(v), 1), nil
	}
	return nil, fmt.Errorf("unsupported value type %T", v)
}

// weightsGrads returns the current value and gradient slices of parameter p.
func weightsGrads(p *G.Node) (w, g []float32, err error) {
	if w, err = f32s(p.Value()); err != nil {
		return nil, nil, fmt.Errorf("parameter %s: %w", p.Name(), err)
	}
	gv, err := p.Grad()
	if err != nil {
		return nil, nil, fmt.Errorf("parameter %s has no gradient: %w", p.Name(), err)
	}
	if g, err = f32s(gv); err != nil {
		return nil, nil, fmt.Errorf("gradient of %s: %w", p.Name(), err)
	}
	if len(g) != len(w) {
		return nil, nil, fmt.Errorf("gradient of %s has %d values, want %d", p.Name(), len(g), len(w))
	}
	return w, g, nil
}

const adamChunk = 1 << 15

func (a *adam) step() error {
	a.t++
	b1, b2 := a.beta1, a.beta2
	c1 := 1 - math.Pow(b1, float64(a.t))
	c2 := 1 - math.Pow(b2, float64(a.t))
	// w −= lr·m̂/(√v̂ + ε) with m̂ = m/c1, v̂ = v/c2, i.e.
	// w −= (lr·√c2/c1)·m/(√v + ε·√c2).
	stepSize := float32(a.lr * math.Sqrt(c2) / c1)
	eps := float32(a.eps * math.Sqrt(c2))
	fb1, fb2 := float32(b1), float32(b2)
	type job struct {
		w, g, m, v []float32
	}
	var jobs []job
	for p, node := range a.params {
		w, g, err := weightsGrads(node)
		if err != nil {
			return err
		}
		if len(w) != len(a.m[p]) {
			return fmt.Errorf("parameter %s has %d values, want %d", node.Name(), len(w), len(a.m[p]))
		}
		for lo := 0; lo < len(w); lo += adamChunk {
			hi := min(lo+adamChunk, len(w))
			jobs = append(jobs, job{w[lo:hi], g[lo:hi], a.m[p][lo:hi], a.v[p][lo:hi]})
		}
	}
	upd := func(j job) {
		w, g, m, v := j.w, j.g, j.m, j.v
		for i := range w {
			gi := g[i]
			mi := fb1*m[i] + (1-fb1)*gi
			vi := fb2*v[i] + (1-fb2)*gi*gi
			m[i], v[i] = mi, vi
			w[i] -= stepSize * mi / (float32(math.Sqrt(float64(vi))) + eps)
			g[i] = 0 // the tape machine accumulates into the gradients
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(jobs))
	if workers <= 1 {
		for _, j := range jobs {
			upd(j)
		}
		return nil
	}
	var wg sync.WaitGroup
	ch := make(chan job, len(jobs))
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				upd(j)
			}
		}()
	}
	wg.Wait()
	return nil
}

// chooseLikelihood is Bernoulli when every value lies in [0, 1] (pixel
// intensities), else Gaussian.
func chooseLikelihood(rows [][]float32) string {
	for _, r := range rows {
		for _, v := range r {
			if v < 0 || v > 1 {
				return Gaussian
			}
		}
	}
	return Bernoulli
}

// standardisation returns each feature's mean and standard deviation over
// rows (1 for a constant feature), in float64 sums.
func standardisation(rows [][]float32) (shift, scale []float32) {
	in := len(rows[0])
	mean, sq := make([]float64, in), make([]float64, in)
	for _, r := range rows {
		for j, v := range r {
			mean[j] += float64(v)
		}
	}
	n := float64(len(rows))
	for j := range mean {
		mean[j] /= n
	}
	for _, r := range rows {
		for j, v := range r {
			d := float64(v) - mean[j]
			sq[j] += d * d
		}
	}
	shift, scale = make([]float32, in), make([]float32, in)
	for j := range mean {
		shift[j] = float32(mean[j])
		sd := math.Sqrt(sq[j] / n)
		if !(sd > 1e-12*max(1, math.Abs(mean[j]))) || math.IsInf(sd, 0) {
			sd = 1
		}
		scale[j] = float32(sd)
	}
	return shift, scale
}

// standardiseInPlace maps flat rows of in values to (x − shift)/scale.
func standardiseInPlace(flat []float32, in int, shift, scale []float32) {
	for i := range flat {
		j := i % in
		flat[i] = (flat[i] - shift[j]) / scale[j]
	}
}
