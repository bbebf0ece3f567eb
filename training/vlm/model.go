package vlm

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/ldpsql/ldpsql/training/nn"
	"github.com/ldpsql/ldpsql/training/nn/graph"
)

// layer is a dense layer (graph.Layer, shared with the other graph-trained models): ReLU in the hidden
// layers, identity in the last of the encoder and of the decoder.
type layer = graph.Layer

// Model is a trained VLM: the encoder and decoder weights (float32), the
// configuration it was trained with and its input dimension. A Model is
// immutable once returned; its methods may be called concurrently.
type Model struct {
	cfg      Config
	inputDim int
	enc, dec []layer
	// bTrain is the training posterior scale: 2L/EpsPretrain, or the learnt
	// value. Never a privatisation scale.
	bTrain float32
	// shift and scale standardise the inputs, (x − shift)/scale, before the
	// encoder, and unstandardise the decoder's mean, for the Gaussian
	// likelihood; nil for the Bernoulli one.
	shift, scale []float32
}

// InputDim is the number of features of a row.
func (m *Model) InputDim() int { return m.inputDim }

// Config returns the configuration the model was trained with (defaults
// filled in).
func (m *Model) Config() Config {
	c := m.cfg
	c.Hidden = slices.Clone(c.Hidden)
	return c
}

// TrainScale is the scale b of the training posterior: 2L/EpsPretrain, or the
// learnt value when EpsPretrain was 0. It is a training regulariser and
// diagnostic only: privatisation noise must be Laplace(0, 2L/ε_x), never
// Laplace(0, TrainScale()).
func (m *Model) TrainScale() float64 { return float64(m.bTrain) }

// encoderSizes returns the widths of the encoder's layers, input first:
// inputDim, Hidden..., D.
func encoderSizes(cfg Config, inputDim int) []int {
	s := append([]int{inputDim}, cfg.Hidden...)
	return append(s, cfg.D)
}

// newModel allocates a model with zero weights in the shape cfg (defaults
// filled in, validated) gives for inputDim.
func newModel(cfg Config, inputDim int) *Model {
	m := &Model{cfg: cfg, inputDim: inputDim}
	es := encoderSizes(cfg, inputDim)
	act := func(last bool) graph.Activation {
		if last {
			return graph.Identity
		}
		return graph.ReLU
	}
	for i := 0; i+1 < len(es); i++ {
		m.enc = append(m.enc, graph.NewLayer(es[i], es[i+1], act(i+2 == len(es))))
	}
	for i := len(es) - 1; i > 0; i-- {
		m.dec = append(m.dec, graph.NewLayer(es[i], es[i-1], act(i == 1)))
	}
	return m
}

// layers lists the encoder's then the decoder's layers.
func (m *Model) layers() []*layer {
	var ls []*layer
	for i := range m.enc {
		ls = append(ls, &m.enc[i])
	}
	for i := range m.dec {
		ls = append(ls, &m.dec[i])
	}
	return ls
}

// chunkRows is how many rows Encode and Decode push through the network at a
// time, per goroutine: large enough for efficient GEMMs, small enough to
// bound memory and to split a batch of 1024 rows across cores.
const chunkRows = 256

// forEachChunk runs f on consecutive chunks [lo, hi) of n rows, in parallel
// on up to GOMAXPROCS goroutines, each with its own workspace, and returns
// the error of the lowest failing chunk. With the default build's BLAS
// (package sgemm's kernels, bit for bit gonum's) the result for a row does
// not depend on the chunking (each row's GEMM results are computed alike);
// OpenBLAS chooses its kernels by the product's shape, so there a
// row's result can differ in the last float32 bits with the batch size.
func forEachChunk(n int, f func(ws *workspace, lo, hi int) error) error {
	chunks := (n + chunkRows - 1) / chunkRows
	p := min(nn.Workers(), chunks)
	errs := make([]error, chunks)
	wss := make([]*workspace, p)
	nn.ParallelTasks(p, chunks, func(w, c int) {
		if wss[w] == nil {
			wss[w] = workspaces.Get().(*workspace)
		}
		lo := c * chunkRows
		errs[c] = f(wss[w], lo, min(lo+chunkRows, n))
	})
	for _, ws := range wss {
		if ws != nil {
			workspaces.Put(ws)
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Encode returns the deterministic encoder mean ν(h(x)) (never a sample) for
// each row: D values with Σ|zᵢ| ≤ L (in exact arithmetic and for any float32
// or float64 summation order) for every finite input, however large. Rows must
// have InputDim values; NaN or ±Inf is an error naming the row and column.
// Rows are processed in parallel chunks; the result does not depend on the
// batch a row comes in.
func (m *Model) Encode(rows [][]float32) ([][]float32, error) {
	if err := checkLens("row", rows, m.inputDim); err != nil {
		return nil, err
	}
	d := m.cfg.D
	flat := make([]float32, len(rows)*d)
	out := make([][]float32, len(rows))
	for i := range out {
		out[i] = flat[i*d : (i+1)*d : (i+1)*d]
	}
	err := forEachChunk(len(rows), func(ws *workspace, lo, hi int) error {
		if err := ws.load("row", rows, lo, hi); err != nil {
			return err
		}
		if m.shift != nil {
			nn.Standardiser{Mean: m.shift, Std: m.scale}.Apply(ws.buf(0, (hi-lo)*m.inputDim))
		}
		h := ws.forward(m.enc, hi-lo)
		h64 := make([]float64, d)
		for r := lo; r < hi; r++ {
			hr := h[(r-lo)*d : (r-lo+1)*d]
			if nonFinite(hr) < 0 {
				for k, v := range hr {
					h64[k] = float64(v)
				}
			} else {
				// The float32 pass overflowed: redo the row in float64
				// with rescaling (see forwardScaled).
				row := rows[r]
				if m.shift != nil {
					row = slices.Clone(row)
					nn.Standardiser{Mean: m.shift, Std: m.scale}.Apply(row)
				}
				a, s := forwardScaled(m.enc, row)
				scaleForClip(a, s, m.cfg.L, h64)
			}
			nn.ClipL1To32(h64, m.cfg.L, out[r])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Decode returns the decoder mean for each latent (D values, typically noisy):
// sigmoid of the decoder's output for the Bernoulli likelihood (values in
// [0, 1]), the output itself, unstandardised to the inputs' scale, for the
// Gaussian one. NaN or ±Inf is an error.
func (m *Model) Decode(latents [][]float32) ([][]float32, error) {
	if err := checkLens("latent", latents, m.cfg.D); err != nil {
		return nil, err
	}
	n := m.inputDim
	flat := make([]float32, len(latents)*n)
	out := make([][]float32, len(latents))
	for i := range out {
		out[i] = flat[i*n : (i+1)*n : (i+1)*n]
	}
	bern := m.cfg.Likelihood == Bernoulli
	err := forEachChunk(len(latents), func(ws *workspace, lo, hi int) error {
		if err := ws.load("latent", latents, lo, hi); err != nil {
			return err
		}
		a := ws.forward(m.dec, hi-lo)
		for r := lo; r < hi; r++ {
			ar, o := a[(r-lo)*n:(r-lo+1)*n], out[r]
			if nonFinite(ar) < 0 {
				for k, v := range ar {
					o[k] = outputMean(float64(v), bern)
				}
			} else {
				a64, s := forwardScaled(m.dec, latents[r])
				for k, v := range a64 {
					o[k] = outputMean(math.Ldexp(v, s), bern) // ±Inf when beyond float64: saturates below
				}
			}
			if m.shift != nil {
				for k, v := range o {
					o[k] = float32(max(-math.MaxFloat32, min(math.MaxFloat32, float64(v)*float64(m.scale[k])+float64(m.shift[k]))))
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// outputMean maps a decoder output to the likelihood's mean, as float32
// (saturating at ±MaxFloat32 for the Gaussian).
func outputMean(v float64, bern bool) float32 {
	if bern {
		return float32(1 / (1 + math.Exp(-v)))
	}
	return float32(max(-math.MaxFloat32, min(math.MaxFloat32, v)))
}

func checkLens(what string, rows [][]float32, dim int) error {
	for i, r := range rows {
		if len(r) != dim {
			return fmt.Errorf("vlm: %s %d has %d values, want %d", what, i, len(r), dim)
		}
	}
	return nil
}

func checkRows(what string, rows [][]float32, dim int) error {
	for i, r := range rows {
		if len(r) != dim {
			return fmt.Errorf("vlm: %s %d has %d values, want %d", what, i, len(r), dim)
		}
		if j := nonFinite(r); j >= 0 {
			return fmt.Errorf("vlm: %s %d, value %d is %v: inputs must be finite", what, i, j, r[j])
		}
	}
	return nil
}

// nonFinite returns the index of the first NaN or ±Inf in r, or −1. It
// tests the exponent bits (all ones for NaN and ±Inf) with a branch-free
// running maximum, so the common all-finite case is one cheap pass.
func nonFinite(r []float32) int {
	const exp = 0x7f800000
	var m uint32
	for _, v := range r {
		m = max(m, math.Float32bits(v)&exp)
	}
	if m != exp {
		return -1
	}
	for j, v := range r {
		if math.Float32bits(v)&exp == exp {
			return j
		}
	}
	return -1
}

// workspace holds the activation buffers of a batched forward pass.
type workspace struct {
	bufs [][]float32
}

var workspaces = sync.Pool{New: func() any { return new(workspace) }}

func (ws *workspace) buf(i, n int) []float32 {
	for len(ws.bufs) <= i {
		ws.bufs = append(ws.bufs, nil)
	}
	if cap(ws.bufs[i]) < n {
		ws.bufs[i] = make([]float32, n)
	}
	return ws.bufs[i][:n]
}

// load copies rows[lo:hi] (all of the same length) into the input buffer,
// rejecting NaN and ±Inf with an error naming the row and column.
func (ws *workspace) load(what string, rows [][]float32, lo, hi int) error {
	if hi <= lo {
		return nil
	}
	in := len(rows[lo])
	x := ws.buf(0, (hi-lo)*in)
	for i := lo; i < hi; i++ {
		dst := x[(i-lo)*in : (i-lo+1)*in]
		copy(dst, rows[i])
		if j := nonFinite(dst); j >= 0 {
			return fmt.Errorf("vlm: %s %d, value %d is %v: inputs must be finite", what, i, j, dst[j])
		}
	}
	return nil
}

// forward runs the n rows in the input buffer (see load) through the layers
// in float32 (one GEMM per layer, then the bias and, after every layer but
// the last, the ReLU in one pass) and returns the last layer's output,
// row-major. The result is valid until the next call.
func (ws *workspace) forward(ls []layer, n int) []float32 {
	return graph.ForwardBatchInto(ls, ws.buf(0, n*ls[0].In), n, func(i, size int) []float32 { return ws.buf(1+i, size) })
}

// forwardScaled runs one row through the layers in float64 without
// overflow, returning a and s with the output equal to a·2^s: before each
// layer the activations are divided by a power of two 2^e ≥ their largest
// magnitude when that exceeds 1 (e ≥ 0, exact), and the bias is divided by the
// accumulated 2^s (ReLU(W(a·2^s) + b) = 2^s·ReLU(Wa + b·2^−s)). Every
// activation entering a layer is then at most 1 in magnitude, so each output
// is at most Σ|W| + |b| ≤ (fan_in+1)·MaxFloat32, finite in float64. The only
// rounding beyond a float64 forward pass is the bias terms' underflow when s
// is large, where they are negligible.
func forwardScaled(ls []layer, row []float32) (a []float64, s int) {
	a = make([]float64, len(row))
	for k, v := range row {
		a[k] = float64(v)
	}
	for li, l := range ls {
		s += normalise(a)
		y := make([]float64, l.Out)
		for j := range y {
			y[j] = math.Ldexp(float64(l.B[j]), -s)
		}
		for i, ai := range a {
			if ai == 0 {
				continue
			}
			w := l.W[i*l.Out : (i+1)*l.Out]
			for j, wj := range w {
				y[j] += ai * float64(wj)
			}
		}
		if li < len(ls)-1 {
			for j, v := range y {
				y[j] = max(v, 0)
			}
		}
		a = y
	}
	return a, s
}

// normalise divides a by 2^e, e ≥ 0 the smallest with max|aᵢ| ≤ 2^e, and
// returns e (0 when max|aᵢ| ≤ 1).
func normalise(a []float64) int {
	var m float64
	for _, v := range a {
		m = max(m, math.Abs(v))
	}
	if m <= 1 {
		return 0
	}
	_, e := math.Frexp(m) // m = f·2^e, f in [0.5, 1)
	for i := range a {
		a[i] = math.Ldexp(a[i], -e)
	}
	return e
}

// scaleForClip writes to h a finite vector with ν(h) = ν(a·2^s): a·2^s
// itself when its coordinates are at most 8L in magnitude, otherwise
// a·2^t for the t < s that brings its largest coordinate into [2L, 8L)
// (then ‖a·2^s‖₁ and ‖a·2^t‖₁ both exceed L, and ν maps both to
// L·a/‖a‖₁).
func scaleForClip(a []float64, s int, l float64, h []float64) {
	var m float64
	for _, v := range a {
		m = max(m, math.Abs(v))
	}
	if m == 0 {
		clear(h)
		return
	}
	_, em := math.Frexp(m)     // 2^(em−1) ≤ m < 2^em
	_, el := math.Frexp(2 * l) // 2^(el−1) ≤ 2L < 2^el
	t := min(s, el-em+1)       // m·2^t ≥ 2^(el) > 2L when t = el−em+1
	for i, v := range a {
		h[i] = math.Ldexp(v, t)
	}
}

var errNoRows = errors.New("vlm: no rows")
