// Package pcaenc is the PCA encoder of the thesis's dimensionality-reduction
// baseline (Mansbridge, §4.3.1.3; digest §7.4) in the form of the generic
// representation-learning Laplace mechanism (§5.2, digest §6.1):
//
//	f(x) = ν(W (x − μ)),   ν(h) = h · min(1, l/‖h‖₁),
//
// where μ is the mean and the rows of W (d × D) are the top-d principal
// components of an auxiliary data set. f maps into the L1 ball of radius l, so
// its L1 sensitivity is 2l and Laplace noise of scale 2l/ε on f(x) is ε-LDP
// (the randomiser's job, not this package's). The decoder is x̂ = μ + Wᵀz.
//
// Fit reads the auxiliary rows once, accumulating the shifted sum and Gram
// matrix (BLAS syrk, one accumulator per CPU), then takes the top d
// eigenvectors of the covariance (gonum mat.EigenSym). The model is a JSON
// artifact. Plugin adapts a Model to plugins/sdk; ../main.go serves it.
package pcaenc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/ldpsql/ldpsql/training/diagnostics"
)

// Format is the artifact format tag.
const Format = "ldpsql-pca/1"

// Params are the Fit hyperparameters, JSON {"d": 8, "l": 10}.
type Params struct {
	// D is the number of components (default 8, as in the thesis).
	D int `json:"d"`
	// L is the L1 radius of the output ball; 0 (the key left out) chooses it
	// from the data: the AutoLQuantile quantile of the fitted rows' encoding
	// norms (see Fit).
	L float64 `json:"l"`
}

// DefaultParams are used for fields left out of the JSON.
var DefaultParams = Params{D: 8}

// AutoLQuantile is the quantile of the fitted rows' unclipped encoding ℓ1
// norms that Fit takes as l when none is given, computed on a uniform sample
// of at most AutoLSample rows.
//
// A low quantile, not a high one, by measurement: the Laplace noise grows
// with l (scale 2l/ε) while the direction of a clipped encoding keeps the
// signal, so accuracy is flat while nearly every row is clipped and falls as
// l grows past the rows' norms. PCA d = 8, the marginal classifier, 2 seeds,
// clean test accuracy: Fashion-MNIST (2,000 auxiliary, 3,000 released, 1,000
// test rows) at ε = 8: l at the 0th–10th percentile 0.60/0.65, 25th
// 0.59/0.66, 50th 0.58/0.65, 90th 0.56/0.62, 99th 0.53/0.59; at ε = 4 the
// 0th–10th 0.25/0.17, 50th 0.11/0.16, 90th 0.09/0.16. Standardised WDBC
// (200/269/100) at ε = 8: 0th–10th 0.86/0.85, 50th 0.86/0.83, 90th
// 0.85/0.72. The 5th percentile sits inside the flat stretch, and, unlike a
// fixed l, follows the data's scale (l = 10 on rows whose encodings have
// norms near 0.1 would be nearly pure noise).
const (
	AutoLQuantile = 0.05
	AutoLSample   = 10000
)

// ParseParams decodes params (nil means all defaults); unknown fields are
// errors.
func ParseParams(raw json.RawMessage) (Params, error) {
	p := DefaultParams
	if len(raw) > 0 && string(raw) != "null" {
		var in struct {
			D *int     `json:"d"`
			L *float64 `json:"l"`
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			return p, fmt.Errorf("pca params: %v (want {\"d\": 8, \"l\": 10}; leave l out to choose it from the data)", err)
		}
		if in.D != nil {
			p.D = *in.D
		}
		if in.L != nil {
			if !(*in.L > 0) {
				return p, fmt.Errorf("pca params: l = %v, want a finite number > 0 (or leave l out to choose it from the data)", *in.L)
			}
			p.L = *in.L
		}
	}
	if p.D < 1 {
		return p, fmt.Errorf("pca params: d = %d, want ≥ 1", p.D)
	}
	if p.L < 0 || math.IsNaN(p.L) || math.IsInf(p.L, 0) {
		return p, fmt.Errorf("pca params: l = %v, want a finite number > 0", p.L)
	}
	return p, nil
}

// Model is a fitted PCA encoder. Its JSON form is the artifact.
type Model struct {
	Format   string  `json:"format"`
	InputDim int     `json:"input_dim"`
	D        int     `json:"d"`
	L        float64 `json:"l"`
	// LRule says how L was chosen when the params left it out.
	LRule string    `json:"l_rule,omitempty"`
	N     int       `json:"n"` // rows it was fitted on
	Mean  []float64 `json:"mean"`
	// Components are the top D principal components, orthonormal rows of
	// InputDim values, by decreasing variance; each has its largest-magnitude
	// entry positive.
	Components [][]float64 `json:"components"`
	// Variances are the matching eigenvalues of the covariance.
	Variances []float64 `json:"variances"`

	w []float64 // D × InputDim, row-major
	b []float64 // W μ
}

// Fit fits a model on the rows next yields (batches of inputDim values, then
// io.EOF). It needs at least two rows and finite values. With p.L = 0 it
// chooses l as the AutoLQuantile quantile of the unclipped encodings' ℓ1
// norms of a seeded uniform sample of the rows.
func Fit(p Params, inputDim int, next func() ([][]float32, error)) (*Model, error) {
	if p.L == 0 {
		sample := diagnostics.NewReservoir(AutoLSample, 0x70ca)
		m, err := fit(p, inputDim, func() ([][]float32, error) {
			b, err := next()
			for _, r := range b {
				sample.Add(slices.Clone(r)) // the stream may reuse its buffers
			}
			return b, err
		})
		if err != nil {
			return nil, err
		}
		return m, m.chooseL(sample.Rows(), sample.Seen())
	}
	return fit(p, inputDim, next)
}

// chooseL sets L from the unclipped encodings of rows (a sample of seen).
func (m *Model) chooseL(rows [][]float32, seen int) error {
	norms := make([]float64, len(rows))
	h := make([]float64, m.D)
	x := make([]float64, m.InputDim)
	for i, r := range rows {
		for k, v := range r {
			x[k] = float64(v)
		}
		for j := range h {
			norms[i] += math.Abs(floats.Dot(m.w[j*m.InputDim:(j+1)*m.InputDim], x) - m.b[j])
		}
	}
	slices.Sort(norms)
	l := norms[int(AutoLQuantile*float64(len(norms)-1))]
	rule := fmt.Sprintf("the %g quantile of the l1 norms of %d rows' encodings (of %d fitted)", AutoLQuantile, len(rows), seen)
	if !(l > 0) {
		l = norms[len(norms)/2]
		rule = fmt.Sprintf("the median of the l1 norms of %d rows' encodings (of %d fitted; the %g quantile is 0)", len(rows), seen, AutoLQuantile)
	}
	if !(l > 0) || math.IsInf(l, 0) {
		return fmt.Errorf("pca: cannot choose l from the data: most rows encode to the centre (give l)")
	}
	m.L, m.LRule = l, rule
	return nil
}

func fit(p Params, inputDim int, next func() ([][]float32, error)) (*Model, error) {
	if inputDim < 1 {
		return nil, fmt.Errorf("pca: input dimension %d", inputDim)
	}
	if p.D > inputDim {
		return nil, fmt.Errorf("pca: d = %d exceeds the input dimension %d", p.D, inputDim)
	}
	acc := newAccumulator(inputDim)
	defer acc.abort()
	for {
		batch, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if err := acc.add(batch); err != nil {
			return nil, err
		}
	}
	n, mean, cov, err := acc.finish()
	if err != nil {
		return nil, err
	}
	if n < 2 {
		return nil, fmt.Errorf("pca: %d rows; need at least 2", n)
	}
	var es mat.EigenSym
	if !es.Factorize(cov, true) {
		return nil, errors.New("pca: eigendecomposition did not converge")
	}
	vals := es.Values(nil) // ascending
	var vecs mat.Dense
	es.VectorsTo(&vecs)
	m := &Model{Format: Format, InputDim: inputDim, D: p.D, L: p.L, N: n, Mean: mean}
	if m.L == 0 {
		m.L = 1 // chosen by Fit once the components are known
	}
	for k := 0; k < p.D; k++ {
		col := inputDim - 1 - k
		c := mat.Col(nil, col, &vecs)
		big := 0
		for i := range c {
			if math.Abs(c[i]) > math.Abs(c[big]) {
				big = i
			}
		}
		if c[big] < 0 {
			for i := range c {
				c[i] = -c[i]
			}
		}
		m.Components = append(m.Components, c)
		m.Variances = append(m.Variances, max(vals[col], 0))
	}
	if err := m.init(); err != nil {
		return nil, err
	}
	return m, nil
}

// FitRows fits a model on rows held in memory.
func FitRows(p Params, rows [][]float32) (*Model, error) {
	if len(rows) == 0 {
		return nil, errors.New("pca: no rows")
	}
	done := false
	return Fit(p, len(rows[0]), func() ([][]float32, error) {
		if done {
			return nil, io.EOF
		}
		done = true
		return rows, nil
	})
}

// Load decodes and checks an artifact.
func Load(artifact []byte) (*Model, error) {
	m := new(Model)
	if err := json.Unmarshal(artifact, m); err != nil {
		return nil, fmt.Errorf("pca artifact: %v", err)
	}
	if m.Format != Format {
		return nil, fmt.Errorf("pca artifact: format %q, want %q", m.Format, Format)
	}
	if err := m.init(); err != nil {
		return nil, err
	}
	return m, nil
}

// Artifact encodes the model.
func (m *Model) Artifact() ([]byte, error) { return json.Marshal(m) }

// init checks the model and derives w and b.
func (m *Model) init() error {
	if m.InputDim < 1 || m.D < 1 || m.D > m.InputDim {
		return fmt.Errorf("pca model: dimensions %d -> %d", m.InputDim, m.D)
	}
	if !(m.L > 0) || math.IsInf(m.L, 0) {
		return fmt.Errorf("pca model: l = %v", m.L)
	}
	if len(m.Mean) != m.InputDim || len(m.Components) != m.D {
		return fmt.Errorf("pca model: mean has %d values and there are %d components, want %d and %d", len(m.Mean), len(m.Components), m.InputDim, m.D)
	}
	m.w = make([]float64, m.D*m.InputDim)
	m.b = make([]float64, m.D)
	for _, v := range m.Mean {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return errors.New("pca model: non-finite mean")
		}
	}
	for j, c := range m.Components {
		if len(c) != m.InputDim {
			return fmt.Errorf("pca model: component %d has %d values, want %d", j, len(c), m.InputDim)
		}
		for k, v := range c {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("pca model: component %d is not finite", j)
			}
			m.w[j*m.InputDim+k] = v
			m.b[j] += v * m.Mean[k]
		}
	}
	return nil
}

// Encode returns ν(W(x − μ)) for each row; every result has ‖·‖₁ ≤ L (in
// float32). Rows with a value that is NaN or infinite are an error.
func (m *Model) Encode(rows [][]float32) ([][]float32, error) {
	for i, r := range rows {
		if len(r) != m.InputDim {
			return nil, fmt.Errorf("pca: row %d has %d values, want %d", i, len(r), m.InputDim)
		}
	}
	d := m.D
	flat := make([]float32, len(rows)*d)
	out := make([][]float32, len(rows))
	err := parallel(len(rows), func(lo, hi int) error {
		h := make([]float64, d)
		x := make([]float64, m.InputDim)
		for i := lo; i < hi; i++ {
			for k, v := range rows[i] {
				x[k] = float64(v)
			}
			for j := 0; j < d; j++ {
				h[j] = floats.Dot(m.w[j*m.InputDim:(j+1)*m.InputDim], x) - m.b[j]
			}
			z := flat[i*d : (i+1)*d : (i+1)*d]
			if err := ClipL1(h, m.L, z); err != nil {
				return fmt.Errorf("pca: row %d: %v", i, err)
			}
			out[i] = z
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Decode returns μ + Wᵀz for each latent z of D values.
func (m *Model) Decode(latents [][]float32) ([][]float32, error) {
	for i, z := range latents {
		if len(z) != m.D {
			return nil, fmt.Errorf("pca: latent %d has %d values, want %d", i, len(z), m.D)
		}
	}
	n := m.InputDim
	flat := make([]float32, len(latents)*n)
	out := make([][]float32, len(latents))
	_ = parallel(len(latents), func(lo, hi int) error {
		x := make([]float64, n)
		for i := lo; i < hi; i++ {
			copy(x, m.Mean)
			for j, zj := range latents[i] {
				blas64.Implementation().Daxpy(n, float64(zj), m.w[j*n:(j+1)*n], 1, x, 1)
			}
			r := flat[i*n : (i+1)*n : (i+1)*n]
			for k, v := range x {
				r[k] = float32(v)
			}
			out[i] = r
		}
		return nil
	})
	return out, nil
}

// ClipL1 writes ν(h) = h·min(1, l/‖h‖₁) to z as float32, guaranteeing
// Σ|z_i| ≤ l when the sum is taken in float64 over the float32 values. A
// non-finite h is an error.
func ClipL1(h []float64, l float64, z []float32) error {
	n := 0.0
	for _, v := range h {
		n += math.Abs(v)
	}
	if math.IsNaN(n) || math.IsInf(n, 0) {
		return errors.New("input is not finite")
	}
	scale := 1.0
	if n > l {
		scale = l / n
	}
	for range 64 {
		s := 0.0
		for i, v := range h {
			z[i] = float32(v * scale)
			s += math.Abs(float64(z[i]))
		}
		if s <= l {
			return nil
		}
		scale *= (l / s) * (1 - 1e-7) // float32 rounding pushed it over
	}
	clear(z) // unreachable in practice; 0 is in the ball
	return nil
}

// parallel runs f over [0, n) in up to GOMAXPROCS contiguous ranges (one for
// small n) and returns the first error.
func parallel(n int, f func(lo, hi int) error) error {
	p := runtime.GOMAXPROCS(0)
	if n < 512 || p == 1 {
		return f(0, n)
	}
	step := (n + p - 1) / p
	errs := make([]error, p)
	var wg sync.WaitGroup
	for t := 0; t < p; t++ {
		lo, hi := t*step, min((t+1)*step, n)
		if lo >= hi {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[t] = f(lo, hi)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// accumulator computes the mean and covariance of a stream of rows in one
// pass: with a shift c (the first batch's mean), s = Σ(x−c) and
// G = Σ(x−c)(x−c)ᵀ give mean = c + s/n and cov = (G − s sᵀ/n)/(n−1).
// Blocks of rows go to one worker per CPU, each with its own G.
type accumulator struct {
	dim   int
	n     int
	shift []float64
	sum   []float64
	block []float64 // rows of (x − c) being filled
	nb    int       // rows in block
	free  chan []float64
	work  chan blockJob
	wg    sync.WaitGroup
	grams [][]float64
	once  sync.Once
}

type blockJob struct {
	data []float64
	rows int
}

const blockRows = 256

func newAccumulator(dim int) *accumulator {
	p := max(1, runtime.GOMAXPROCS(0))
	a := &accumulator{dim: dim, sum: make([]float64, dim), free: make(chan []float64, 2*p), work: make(chan blockJob, p)}
	for range 2 * p {
		a.free <- make([]float64, blockRows*dim)
	}
	for t := 0; t < p; t++ {
		g := make([]float64, dim*dim)
		a.grams = append(a.grams, g)
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			c := blas64.Symmetric{Uplo: blas.Upper, N: dim, Stride: dim, Data: g}
			for j := range a.work {
				blas64.Syrk(blas.Trans, 1, blas64.General{Rows: j.rows, Cols: dim, Stride: dim, Data: j.data[:j.rows*dim]}, 1, c)
				a.free <- j.data
			}
		}()
	}
	return a
}

func (a *accumulator) add(rows [][]float32) error {
	if len(rows) == 0 {
		return nil
	}
	if a.shift == nil {
		a.shift = make([]float64, a.dim)
		for _, r := range rows {
			if len(r) != a.dim {
				return fmt.Errorf("pca: a row has %d values, want %d", len(r), a.dim)
			}
			for k, v := range r {
				a.shift[k] += float64(v)
			}
		}
		for k := range a.shift {
			a.shift[k] /= float64(len(rows))
		}
	}
	for _, r := range rows {
		if len(r) != a.dim {
			return fmt.Errorf("pca: a row has %d values, want %d", len(r), a.dim)
		}
		if a.block == nil {
			a.block = <-a.free
			a.nb = 0
		}
		dst := a.block[a.nb*a.dim : (a.nb+1)*a.dim]
		for k, v := range r {
			f := float64(v)
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Errorf("pca: row %d of the auxiliary data has a non-finite value", a.n)
			}
			dst[k] = f - a.shift[k]
			a.sum[k] += dst[k]
		}
		a.n++
		a.nb++
		if a.nb == blockRows {
			a.work <- blockJob{a.block, a.nb}
			a.block = nil
		}
	}
	return nil
}

// abort stops the workers (idempotent; finish calls it too).
func (a *accumulator) abort() {
	a.once.Do(func() {
		close(a.work)
		a.wg.Wait()
	})
}

func (a *accumulator) finish() (int, []float64, *mat.SymDense, error) {
	if a.block != nil && a.nb > 0 {
		a.work <- blockJob{a.block, a.nb}
		a.block = nil
	}
	a.abort()
	n, d := a.n, a.dim
	if n < 2 {
		return n, nil, nil, nil
	}
	mean := make([]float64, d)
	for k := range mean {
		mean[k] = a.shift[k] + a.sum[k]/float64(n)
	}
	cov := mat.NewSymDense(d, nil)
	for i := 0; i < d; i++ {
		for j := i; j < d; j++ {
			g := 0.0
			for _, gr := range a.grams {
				g += gr[i*d+j]
			}
			cov.SetSym(i, j, (g-a.sum[i]*a.sum[j]/float64(n))/float64(n-1))
		}
	}
	return n, mean, cov, nil
}
