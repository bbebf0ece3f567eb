package taskaware

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"
)

// Format is the artifact format tag.
const Format = "ldpsql-task-aware-linear/1"

// Model is a fitted linear task-aware encoder and its decoder. Its JSON form
// is the artifact.
//
// Encode: x is clipped into the box [Lo, Hi] (the public input domain,
// recorded at fit time), then φ = A(x − mid) with mid the box's centre. The
// image of the box is centrally symmetric about 0, so it lies in the ℓ1 ball
// of radius Radius = Δ1/2 (Δ1 from [BoxL1Diameter]), the output set the
// plugin declares; the host's Laplace randomiser on that ball uses scale
// 2·Radius/ε = Δ1/ε, the paper's b (eq. 2), for exactly ε-LDP.
//
// Decode: x̂ = DecoderOffset + Σ_i y_i·Decoder[i], the LMMSE estimate of x
// from y = φ + w with w Laplace of scale NoiseScale (Prop. 1, in x-space:
// x̂ = μ + L D(y + A(mid − μ))).
type Model struct {
	Format   string  `json:"format"`
	InputDim int     `json:"input_dim"`
	Z        int     `json:"z"`     // latent dimension = min(z cap, Z′)
	ZMax     int     `json:"z_max"` // the cap (params "z")
	Eps      float64 `json:"eps"`   // the ε the encoder and decoder are designed for
	N        int     `json:"n"`     // auxiliary rows fitted on
	Task     string  `json:"task"`  // "weights" or "task_matrix"

	// Lo and Hi are the input box: the auxiliary rows' per-feature minimum
	// and maximum. Inputs are clipped into it.
	Lo []float64 `json:"lo"`
	Hi []float64 `json:"hi"`
	// Mean is μ, the auxiliary rows' mean.
	Mean []float64 `json:"mean"`
	// Encoder is A, Z rows of InputDim values.
	Encoder [][]float64 `json:"encoder"`
	// Radius is the declared ℓ1 radius, Δ1/2.
	Radius float64 `json:"radius"`
	// Delta1 is the encoder's ℓ1 sensitivity over the box; NoiseScale =
	// Delta1/Eps the Laplace scale the host adds at Eps, NoiseVar = 2·NoiseScale².
	Delta1     float64 `json:"delta1"`
	NoiseScale float64 `json:"noise_scale"`
	NoiseVar   float64 `json:"noise_var"`
	// DecoderOffset (InputDim values) and Decoder (Z rows of InputDim
	// values) are the LMMSE decoder for NoiseVar.
	DecoderOffset []float64   `json:"decoder_offset"`
	Decoder       [][]float64 `json:"decoder"`

	// The design, for diagnostics: Lambda are all eigenvalues of PᵀP
	// (descending), C the water-filling parameter, ZPrime eq. 12's Z′ for
	// it without the cap (Z = min(ZMax, ZPrime) unless fewer eigenvalues
	// are positive), Sigma2 the scales σ_i² (Σ = 1), Rule how C was chosen.
	Lambda []float64 `json:"lambda"`
	C      float64   `json:"c"`
	ZPrime int       `json:"z_prime"`
	Sigma2 []float64 `json:"sigma2"`
	Rule   string    `json:"rule"`
	// Losses, E‖K(x̂ − x)‖² summed over the task outputs, on the auxiliary
	// rows' mean and covariance: Loss of this encoder at NoiseVar (eq. 9),
	// LossMean of the mean predictor (Tr PᵀP), LossTaskAgnostic of the
	// paper's task-agnostic baseline on the same box (φ = x, one Laplace
	// scale Σ_j(Hi_j − Lo_j)/ε, LMMSE decoder; Corollary 2).
	Loss             float64 `json:"loss"`
	LossMean         float64 `json:"loss_mean"`
	LossTaskAgnostic float64 `json:"loss_task_agnostic"`
	// ExtremeVertices are two opposite vertices of the box whose encodings
	// are Δ1 apart ([Model.Extremes]), for an auditor's --inputs.
	ExtremeVertices [][]float64 `json:"extreme_vertices"`

	mid []float64
}

// Fit designs the encoder and decoder from the rows next yields (batches of
// inputDim finite values, then io.EOF; at least two rows).
func Fit(p Params, inputDim int, next func() ([][]float32, error)) (*Model, error) {
	if inputDim < 1 {
		return nil, fmt.Errorf("task_aware_linear: input dimension %d", inputDim)
	}
	zmax, err := p.checkDim(inputDim)
	if err != nil {
		return nil, err
	}
	mo, err := moments(inputDim, next)
	if err != nil {
		return nil, err
	}
	n := inputDim
	cov, err := covarianceRoot(mo.cov)
	if err != nil {
		return nil, err
	}
	g, task := p.taskGram(n)
	lambda, q, err := taskEigen(&cov.s, g)
	if err != nil {
		return nil, err
	}
	rows, dirs := encoderDirections(&cov.s, g, lambda, q, zmax)
	if len(rows) == 0 {
		return nil, errors.New("task_aware_linear: the task is constant on the auxiliary rows (K Σ Kᵀ = 0): nothing to release")
	}
	width := make([]float64, n)
	for j := range width {
		width[j] = mo.hi[j] - mo.lo[j]
	}
	d, rule, err := p.design(lambda, rows, width)
	if err != nil {
		return nil, fmt.Errorf("task_aware_linear: %w", err)
	}
	sigma := make([]float64, d.ZPrime)
	for i := range sigma {
		sigma[i] = math.Sqrt(d.Sigma2[i])
	}
	m := &Model{
		Format: Format, InputDim: n, Z: d.ZPrime, ZMax: zmax, Eps: p.Eps, N: mo.n, Task: task,
		Lo: mo.lo, Hi: mo.hi, Mean: mo.mean, Encoder: scaleRows(rows, sigma),
		Delta1: d.Delta1, Radius: d.Delta1 / 2, NoiseScale: d.Delta1 / p.Eps, NoiseVar: d.NoiseVar,
		Lambda: lambda, C: d.C, Sigma2: d.Sigma2, Rule: rule, Loss: d.Loss, LossMean: sumPos(lambda),
	}
	_, m.ZPrime = WaterFill(lambda, d.C, n)
	m.setDecoder(mo, dirs, sigma, d)
	m.LossTaskAgnostic = cov.taskAgnosticLoss(g, sumPos(width)/p.Eps)
	if err := m.init(); err != nil {
		return nil, err
	}
	x, y := m.Extremes()
	m.ExtremeVertices = [][]float64{x, y}
	return m, nil
}

// covRoot is the auxiliary rows' covariance Σ = V diag(e) Vᵀ and its root S = Σ^{1/2} = V diag(√e) Vᵀ
// (negative rounding of e set to 0).
type covRoot struct {
	e []float64
	v mat.Dense
	s mat.Dense
}

// covarianceRoot factorises the covariance.
func covarianceRoot(cov *mat.SymDense) (*covRoot, error) {
	var es mat.EigenSym
	if !es.Factorize(cov, true) {
		return nil, errors.New("task_aware_linear: eigendecomposition of the covariance did not converge")
	}
	c := &covRoot{e: es.Values(nil)}
	es.VectorsTo(&c.v)
	n := len(c.e)
	vs := mat.DenseCopyOf(&c.v)
	for k := range c.e {
		c.e[k] = max(c.e[k], 0)
		for i := 0; i < n; i++ {
			vs.Set(i, k, c.v.At(i, k)*math.Sqrt(c.e[k]))
		}
	}
	c.s.Mul(vs, c.v.T())
	return c, nil
}

// taskAgnosticLoss is the paper's task-agnostic baseline's loss (Corollary 2): φ = x with one Laplace
// scale b on every coordinate and the LMMSE decoder, Σ_k (v_kᵀ G v_k)·e_k σ²/(e_k + σ²) with σ² = 2b².
func (c *covRoot) taskAgnosticLoss(g *mat.Dense, b float64) float64 {
	n := len(c.e)
	nv := 2 * b * b
	loss := 0.0
	for k := range c.e {
		vk := mat.NewVecDense(n, mat.Col(nil, k, &c.v))
		if c.e[k] > 0 {
			loss += mat.Inner(vk, g, vk) * c.e[k] * nv / (c.e[k] + nv)
		}
	}
	return loss
}

// taskGram is G = KᵀK, from the weights (K diagonal) or the task matrix, and the task's name.
func (p Params) taskGram(n int) (*mat.Dense, string) {
	g := mat.NewDense(n, n, nil)
	if p.Weights != nil {
		for j, w := range p.Weights {
			g.Set(j, j, w*w)
		}
		return g, "weights"
	}
	k := mat.NewDense(len(p.TaskMatrix), n, nil)
	for i, r := range p.TaskMatrix {
		k.SetRow(i, r)
	}
	g.Mul(k.T(), k)
	return g, "task_matrix"
}

// taskEigen factorises PᵀP = S G S (symmetrised): its eigenvalues λ in descending order (rounding of a
// zero eigenvalue set to 0) and its eigenvectors q (columns in ascending order, as EigenSym gives them).
func taskEigen(s *mat.Dense, g *mat.Dense) ([]float64, *mat.Dense, error) {
	n, _ := s.Dims()
	var sg, ptp mat.Dense
	sg.Mul(s, g)
	ptp.Mul(&sg, s)
	sym := mat.NewSymDense(n, nil)
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			sym.SetSym(i, j, (ptp.At(i, j)+ptp.At(j, i))/2)
		}
	}
	var pe mat.EigenSym
	if !pe.Factorize(sym, true) {
		return nil, nil, errors.New("task_aware_linear: eigendecomposition of PᵀP did not converge")
	}
	asc := pe.Values(nil)
	var q mat.Dense
	pe.VectorsTo(&q)
	lambda := make([]float64, n)
	for i := range lambda {
		lambda[i] = max(asc[n-1-i], 0)
		if lambda[i] <= 1e-12*lambda[0] { // rounding of a zero eigenvalue
			lambda[i] = 0
		}
	}
	return lambda, &q, nil
}

// encoderDirections are the encoder's rows per unit scale and their decoder directions, for the at most
// zmax positive eigenvalues. Row i is ã_i = G S q_i/λ_i, so that ã_iᵀ(x − μ) = q_iᵀ h for every x − μ
// in the span of the rows (there q_i = S G S q_i/λ_i, and S⁻¹ on that span gives the identity), with no
// inverse of a near-singular Σ; its decoder direction is S q_i. Each row's largest entry is positive
// (a deterministic sign).
func encoderDirections(s, g *mat.Dense, lambda []float64, q *mat.Dense, zmax int) (rows, dirs [][]float64) {
	n := len(lambda)
	var gs mat.Dense
	gs.Mul(g, s)
	for i := 0; i < zmax && lambda[i] > 0; i++ {
		qi := mat.NewVecDense(n, mat.Col(nil, n-1-i, q))
		var a, d mat.VecDense
		a.MulVec(&gs, qi)
		a.ScaleVec(1/lambda[i], &a)
		d.MulVec(s, qi)
		ar, dr := a.RawVector().Data, d.RawVector().Data
		big := 0
		for j := range ar {
			if math.Abs(ar[j]) > math.Abs(ar[big]) {
				big = j
			}
		}
		if ar[big] < 0 {
			for j := range ar {
				ar[j], dr[j] = -ar[j], -dr[j]
			}
		}
		rows, dirs = append(rows, ar), append(dirs, dr)
	}
	return rows, dirs
}

// scaleRows is the encoder of the given scales: row i of rows times sigma[i], for the first len(sigma).
func scaleRows(rows [][]float64, sigma []float64) [][]float64 {
	a := make([][]float64, len(sigma))
	for i, sg := range sigma {
		a[i] = make([]float64, len(rows[i]))
		for j, x := range rows[i] {
			a[i][j] = sg * x
		}
	}
	return a
}

// design chooses the scales, noise and decoder gains for the encoder's real ℓ1 diameter over the box:
// by the paper's Theorem 1 recipe when p.R is set, else the c that minimises the loss (eq. 9). It also
// returns the rule it followed, in words.
func (p Params) design(lambda []float64, rows [][]float64, width []float64) (Design, string, error) {
	delta1 := func(sigma []float64) (float64, error) {
		d, _, err := BoxL1Diameter(scaleRows(rows, sigma), width)
		return d, err
	}
	if p.R > 0 {
		c := 8 * p.R * p.R / (p.Eps * p.Eps)
		d, err := DesignAt(lambda, len(rows), p.Eps, c, delta1)
		return d, fmt.Sprintf("the paper's Theorem 1 recipe with r = %g: c = 8r²/ε² = %g; noise and decoder for the encoder's real Δ1 over the box", p.R, c), err
	}
	d, err := OptimiseDesign(lambda, len(rows), p.Eps, delta1)
	return d, fmt.Sprintf("c minimising the loss (eq. 9) at the noise of the encoder's real Δ1 over the box (r equivalent ε√(c/8) = %g)", p.Eps*math.Sqrt(d.C/8)), err
}

// setDecoder sets the decoder: column i of D is q_i σ_i/(σ_i² + σ_w²); in x-space
// x̂ = μ + S D(y + A(mid − μ)), with mid the box's centre.
func (m *Model) setDecoder(mo *stats, dirs [][]float64, sigma []float64, d Design) {
	n := len(mo.mean)
	mid := make([]float64, n)
	for j := range mid {
		mid[j] = (mo.lo[j] + mo.hi[j]) / 2
	}
	m.DecoderOffset = append([]float64(nil), mo.mean...)
	for i := range sigma {
		gi := sigma[i] / (d.Sigma2[i] + d.NoiseVar)
		ci := 0.0
		for j, a := range m.Encoder[i] {
			ci += a * (mid[j] - mo.mean[j])
		}
		col := make([]float64, n)
		for j, x := range dirs[i] {
			col[j] = gi * x
			m.DecoderOffset[j] += col[j] * ci
		}
		m.Decoder = append(m.Decoder, col)
	}
}

// FitRows fits a model on rows held in memory.
func FitRows(p Params, rows [][]float32) (*Model, error) {
	if len(rows) == 0 {
		return nil, errors.New("task_aware_linear: no rows")
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

type stats struct {
	n              int
	lo, hi, mean   []float64
	cov            *mat.SymDense // population covariance (1/N), as the paper's code
	shift, sum, gr []float64
}

// moments reads the rows once: the box, the mean and the covariance (sums
// shifted by the first row, so that a large common offset cannot cancel).
func moments(dim int, next func() ([][]float32, error)) (*stats, error) {
	st := &stats{lo: make([]float64, dim), hi: make([]float64, dim), sum: make([]float64, dim), gr: make([]float64, dim*dim)}
	gram := blas64.Symmetric{Uplo: blas.Upper, N: dim, Stride: dim, Data: st.gr}
	var buf []float64
	for {
		batch, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(batch) == 0 {
			continue
		}
		buf = buf[:0]
		for _, r := range batch {
			if len(r) != dim {
				return nil, fmt.Errorf("task_aware_linear: a row has %d values, want %d", len(r), dim)
			}
			if st.shift == nil {
				st.shift = make([]float64, dim)
				for j, x := range r {
					st.shift[j] = float64(x)
				}
			}
			for j, x := range r {
				f := float64(x)
				if math.IsNaN(f) || math.IsInf(f, 0) {
					return nil, fmt.Errorf("task_aware_linear: row %d of the auxiliary data has a non-finite value", st.n)
				}
				if st.n == 0 || f < st.lo[j] {
					st.lo[j] = f
				}
				if st.n == 0 || f > st.hi[j] {
					st.hi[j] = f
				}
				st.sum[j] += f - st.shift[j]
				buf = append(buf, f-st.shift[j])
			}
			st.n++
		}
		blas64.Syrk(blas.Trans, 1, blas64.General{Rows: len(batch), Cols: dim, Stride: dim, Data: buf}, 1, gram)
	}
	if st.n < 2 {
		return nil, fmt.Errorf("task_aware_linear: %d auxiliary rows; need at least 2", st.n)
	}
	nf := float64(st.n)
	st.mean = make([]float64, dim)
	for j := range st.mean {
		st.mean[j] = st.shift[j] + st.sum[j]/nf
	}
	st.cov = mat.NewSymDense(dim, nil)
	for i := 0; i < dim; i++ {
		for j := i; j < dim; j++ {
			st.cov.SetSym(i, j, (st.gr[i*dim+j]-st.sum[i]*st.sum[j]/nf)/nf)
		}
	}
	return st, nil
}

// Load decodes and checks an artifact.
func Load(artifact []byte) (*Model, error) {
	m := new(Model)
	if err := json.Unmarshal(artifact, m); err != nil {
		return nil, fmt.Errorf("task_aware_linear artifact: %v", err)
	}
	if m.Format != Format {
		return nil, fmt.Errorf("task_aware_linear artifact: format %q, want %q", m.Format, Format)
	}
	if err := m.init(); err != nil {
		return nil, err
	}
	return m, nil
}

// Artifact encodes the model.
func (m *Model) Artifact() ([]byte, error) { return json.Marshal(m) }

// init checks the model, including that Radius is Δ1/2 for the recorded
// encoder and box (recomputed), and derives mid.
func (m *Model) init() error {
	const who = "task_aware_linear model"
	n, z := m.InputDim, m.Z
	if n < 1 || z < 1 || z > MaxZ || z > n {
		return fmt.Errorf("%s: dimensions %d -> %d", who, n, z)
	}
	if len(m.Lo) != n || len(m.Hi) != n || len(m.Mean) != n || len(m.DecoderOffset) != n || len(m.Encoder) != z || len(m.Decoder) != z {
		return fmt.Errorf("%s: vectors of the wrong length for %d -> %d", who, n, z)
	}
	all := [][]float64{m.Lo, m.Hi, m.Mean, m.DecoderOffset}
	all = append(append(all, m.Encoder...), m.Decoder...)
	for _, v := range all {
		if len(v) != n {
			return fmt.Errorf("%s: a row has %d values, want %d", who, len(v), n)
		}
		for _, x := range v {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("%s: a parameter is not finite", who)
			}
		}
	}
	width := make([]float64, n)
	m.mid = make([]float64, n)
	for j := range width {
		if !(m.Lo[j] <= m.Hi[j]) {
			return fmt.Errorf("%s: feature %d: [%v, %v] is not an interval", who, j, m.Lo[j], m.Hi[j])
		}
		width[j] = m.Hi[j] - m.Lo[j]
		m.mid[j] = m.Lo[j] + width[j]/2
	}
	d1, _, err := BoxL1Diameter(m.Encoder, width)
	if err != nil {
		return fmt.Errorf("%s: %v", who, err)
	}
	if !(d1 > 0) {
		return fmt.Errorf("%s: the encoder is constant over the box (Δ1 = %v): every feature it reads is constant in the auxiliary rows", who, d1)
	}
	if !(math.Abs(m.Radius-d1/2) <= 1e-9*d1) || !(m.Eps > 0 && m.Eps <= MaxEps) {
		return fmt.Errorf("%s: radius %v, but the encoder's Δ1 over the box is %v (want radius Δ1/2); eps %v", who, m.Radius, d1, m.Eps)
	}
	return nil
}

// Extremes returns two opposite vertices of the input box whose encodings are
// Δ1 apart in ℓ1 (the pair an auditor should try).
func (m *Model) Extremes() (x, y []float64) {
	width := make([]float64, m.InputDim)
	for j := range width {
		width[j] = m.Hi[j] - m.Lo[j]
	}
	_, s, _ := BoxL1Diameter(m.Encoder, width)
	x, y = make([]float64, m.InputDim), make([]float64, m.InputDim)
	for j, sj := range s {
		x[j], y[j] = m.Lo[j], m.Hi[j]
		if sj > 0 {
			x[j], y[j] = m.Hi[j], m.Lo[j]
		}
	}
	return x, y
}

// Encode clips each row into the box and returns ν(A(x − mid)), where ν
// shrinks a vector into the ℓ1 ball of radius Radius; it only acts on the
// rounding of a vertex's encoding, which the float32 result may put just
// outside. Every result has Σ|z_i| ≤ Radius (summed in float64). NaN is an
// error.
func (m *Model) Encode(rows [][]float32) ([][]float32, error) {
	n, z := m.InputDim, m.Z
	flat := make([]float32, len(rows)*z)
	out := make([][]float32, len(rows))
	x := make([]float64, n)
	h := make([]float64, z)
	for i, r := range rows {
		if len(r) != n {
			return nil, fmt.Errorf("task_aware_linear: row %d has %d values, want %d", i, len(r), n)
		}
		for j, v := range r {
			f := float64(v)
			if math.IsNaN(f) {
				return nil, fmt.Errorf("task_aware_linear: row %d, feature %d is NaN", i, j)
			}
			x[j] = min(max(f, m.Lo[j]), m.Hi[j]) - m.mid[j]
		}
		for k, a := range m.Encoder {
			s := 0.0
			for j, aj := range a {
				s += aj * x[j]
			}
			h[k] = s
		}
		out[i] = flat[i*z : (i+1)*z : (i+1)*z]
		clipL1(h, m.Radius, out[i])
	}
	return out, nil
}

// Decode returns DecoderOffset + Σ_i y_i·Decoder[i] for each latent y of Z
// values.
func (m *Model) Decode(latents [][]float32) ([][]float32, error) {
	n := m.InputDim
	flat := make([]float32, len(latents)*n)
	out := make([][]float32, len(latents))
	x := make([]float64, n)
	for i, y := range latents {
		if len(y) != m.Z {
			return nil, fmt.Errorf("task_aware_linear: latent %d has %d values, want %d", i, len(y), m.Z)
		}
		copy(x, m.DecoderOffset)
		for k, yk := range y {
			for j, d := range m.Decoder[k] {
				x[j] += float64(yk) * d
			}
		}
		r := flat[i*n : (i+1)*n : (i+1)*n]
		for j, v := range x {
			r[j] = float32(v)
		}
		out[i] = r
	}
	return out, nil
}

// clipL1 writes h·min(1, l/‖h‖₁) to z as float32 so that Σ|z_i| ≤ l in
// float64 (h is finite: the box and the encoder are).
func clipL1(h []float64, l float64, z []float32) {
	norm := 0.0
	for _, v := range h {
		norm += math.Abs(v)
	}
	scale := 1.0
	if norm > l {
		scale = l / norm
	}
	for range 64 {
		s := 0.0
		for i, v := range h {
			z[i] = float32(v * scale)
			s += math.Abs(float64(z[i]))
		}
		if s <= l {
			return
		}
		scale *= (l / s) * (1 - 1e-7)
	}
	clear(z)
}
