// Package diagnostics says, before any release, whether a mechanism's encoder is any good and what
// survives its privatisation at a given ε: the share of rows it clips, where its encodings sit in the
// output set, the spread of each latent dimension (collapse), the reconstruction error of the
// privatised encoding against a constant predictor, and the accuracy bound of its latent.
//
// Everything is computed on the DBA's auxiliary rows, inside the server, and nothing it computes is
// released: the noise it draws (with the randomisers of package mechanisms, from a seeded generator so
// that the numbers are reproducible) only estimates an expected error. It therefore costs no privacy
// budget. The package knows nothing of SQL or plugins: the encoder and decoder are functions.
package diagnostics

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/training/accuracy"
)

// The sampling plan and the rules, fixed so that the numbers of two mechanisms compare.
const (
	// MaxSample is the most auxiliary rows evaluated: a larger table is reservoir-sampled down to it.
	MaxSample = 20000
	// HoldoutFraction of the sample (at least one row, at most MaxHoldout) is held out: the mean
	// predictor is the mean of the other rows, and the reconstruction errors are measured on these.
	HoldoutFraction = 0.2
	MaxHoldout      = 2000
	// TargetDraws is the number of noisy releases the privatised reconstruction error averages over:
	// each held-out row is privatised ⌈TargetDraws/holdout⌉ times, between 1 and MaxDrawsPerRow.
	TargetDraws    = 4000
	MaxDrawsPerRow = 16
	// ActiveRelative: a latent dimension is active when its variance across the sample is at least
	// this fraction of the largest dimension's (the shape of the encoding, whatever ε).
	ActiveRelative = 0.01
	// ActiveVsNoise: a latent dimension is active at ε when its variance is at least this fraction of
	// the variance of the noise the randomiser adds to it at ε (what survives privatisation).
	ActiveVsNoise = 0.1
	// ExplainedMin: a reconstruction that explains less than this share of the held-out rows' squared
	// distance to the mean (MSE > (1 − ExplainedMin)·MSEMean) is hardly better than the mean predictor:
	// clean, the encoding keeps next to nothing of the row (collapse); privatised, nothing of the row
	// survives the noise at ε (a warning).
	ExplainedMin = 0.1
	// BoundaryTolerance: an ℓ1-ball encoding whose norm is within this relative distance of the radius
	// sits on the boundary, where the encoder's ν (or the host) clipped it.
	BoundaryTolerance = 1e-5
	// DefaultSeed seeds the sample, the split and the noise when Config.Seed is 0.
	DefaultSeed = 1
	// DefaultK is the number of classes of the accuracy bound when Config.K is 0.
	DefaultK = 2

	batchSize = 4096
)

// Codec is the encoder under evaluation, as the host runs it. Decode is nil for a mechanism without a
// decoder; the reconstruction errors are then not applicable.
type Codec struct {
	Encode func(ctx context.Context, rows [][]float32) ([][]float32, error)
	Decode func(ctx context.Context, latents [][]float32) ([][]float32, error)
}

// Config says what to evaluate against.
type Config struct {
	Set        mechanisms.OutputSet // the output set recorded for the mechanism (L1Ball or Box)
	Eps        float64              // the ε the releases would be made at
	Randomiser string               // "" means laplace
	K          int                  // classes for the accuracy bound; 0 means DefaultK
	Seed       uint64               // 0 means DefaultSeed
}

// Report is the result. Its JSON form is what ldpsql stores under "diagnostics" in ldp_models.params.
// Error fields are nil (JSON null) where they do not apply, with the reason in the matching note.
type Report struct {
	Table  string `json:"table,omitempty"`
	Column string `json:"column,omitempty"`

	Eps         float64 `json:"eps"`
	Randomiser  string  `json:"randomiser"`
	OutputSet   string  `json:"output_set"`
	D           int     `json:"d"`
	InputDim    int     `json:"input_dim"`
	Rows        int     `json:"rows"`         // rows evaluated (the sample)
	HoldoutRows int     `json:"holdout_rows"` // of which held out
	DrawsPerRow int     `json:"draws_per_row"`
	Seed        uint64  `json:"seed"`

	// ClippedShare is the share of rows whose encoding lies on or outside the set's boundary: an
	// ℓ1 norm within BoundaryTolerance of the radius, or a coordinate at or beyond a box bound.
	ClippedShare float64 `json:"clipped_share"`
	// NormQ10, NormQ50, NormQ90 are quantiles of the clipped encodings' position in the set: ‖z‖₁/l
	// for an ℓ1 ball, the mean over coordinates of |z_j − mid_j|/half_j for a box (0 the centre, 1 the
	// boundary).
	NormQ10 float64 `json:"norm_q10"`
	NormQ50 float64 `json:"norm_q50"`
	NormQ90 float64 `json:"norm_q90"`
	// NonFinite counts encodings with NaN, ±Inf or the wrong length, taken (as the host releases
	// them) as the set's centre.
	NonFinite int `json:"nonfinite_encodings"`

	LatentVariance  []float64 `json:"latent_variance"` // per dimension, of the clipped encodings
	NoiseVariance   []float64 `json:"noise_variance"`  // per dimension, of the randomiser's noise at ε
	ActiveDims      int       `json:"active_dims"`     // variance ≥ ActiveRelative × the largest
	ActiveDimsAtEps int       `json:"active_dims_at_eps"`

	// Mean squared reconstruction error per feature on the held-out rows: of the mean of the other
	// rows (MSEMean), of the decoded clean encoding (MSEClean), and of the decoded privatised encoding
	// at ε (MSEPrivate, averaged over DrawsPerRow releases of each row); PrivateVsMean is
	// MSEPrivate/MSEMean (< 1: the release reconstructs better than knowing nothing about the row).
	MSEMean            *float64 `json:"mse_mean"`
	MSEClean           *float64 `json:"mse_clean"`
	MSEPrivate         *float64 `json:"mse_private"`
	PrivateVsMean      *float64 `json:"private_vs_mean"`
	ReconstructionNote string   `json:"reconstruction_note,omitempty"`

	// AccuracyBound is accuracy.Bound(ε, K) where its assumptions hold (Laplace noise on an ℓ1 ball,
	// d ≥ K/2, K even): the best accuracy any K-class classifier can reach on these latents at ε.
	AccuracyBound     *float64 `json:"accuracy_bound"`
	AccuracyBoundK    int      `json:"accuracy_bound_k"`
	AccuracyBoundNote string   `json:"accuracy_bound_note,omitempty"`

	// Collapsed: fewer than half of the d dimensions are active, or the clean reconstruction is
	// hardly better than the mean predictor (see ExplainedMin). Warnings give these reasons: a job
	// that trained or fitted a collapsed encoder finishes with them.
	Collapsed bool     `json:"collapsed"`
	Warnings  []string `json:"warnings"`
	// Notes say what is worth knowing but no fault of the encoder: a privatised reconstruction
	// hardly better than the mean predictor at ε. At ε = 4 that holds for every encoder on small
	// tabular data (PCA on WDBC included: one row's release says little about that row, which is the
	// point of LDP), so as a job warning it would fire on every job and mean nothing.
	Notes []string `json:"notes"`
}

// Reservoir keeps a uniform sample of at most Max rows of a stream (Algorithm R), seeded, so the same
// stream gives the same sample.
type Reservoir struct {
	Max  int
	rows [][]float32
	seen int
	rng  *rand.Rand
}

// NewReservoir returns a reservoir of at most max rows (MaxSample when max ≤ 0).
func NewReservoir(max int, seed uint64) *Reservoir {
	if max <= 0 {
		max = MaxSample
	}
	if seed == 0 {
		seed = DefaultSeed
	}
	return &Reservoir{Max: max, rng: rand.New(rand.NewPCG(seed, 0x5eed))}
}

// Add offers one row.
func (r *Reservoir) Add(row []float32) {
	r.seen++
	if len(r.rows) < r.Max {
		r.rows = append(r.rows, row)
		return
	}
	if j := r.rng.IntN(r.seen); j < r.Max {
		r.rows[j] = row
	}
}

// Rows returns the sample; Seen the number of rows offered.
func (r *Reservoir) Rows() [][]float32 { return r.rows }
func (r *Reservoir) Seen() int         { return r.seen }

// Evaluate computes the report for rows (raw features, all of one length; at most MaxSample of them are
// used, a seeded sample of a longer slice).
func Evaluate(ctx context.Context, rows [][]float32, codec Codec, cfg Config) (*Report, error) {
	if cfg.Set == nil {
		return nil, errors.New("diagnostics: no output set")
	}
	if err := cfg.Set.Validate(); err != nil {
		return nil, err
	}
	if cfg.Randomiser == "" {
		cfg.Randomiser = mechanisms.RandomiserLaplace
	}
	if cfg.Seed == 0 {
		cfg.Seed = DefaultSeed
	}
	if cfg.K == 0 {
		cfg.K = DefaultK
	}
	rnd, err := mechanisms.NewRandomiser(cfg.Randomiser, cfg.Set, cfg.Eps)
	if err != nil {
		return nil, err
	}
	if len(rows) > MaxSample {
		res := NewReservoir(MaxSample, cfg.Seed)
		for _, r := range rows {
			res.Add(r)
		}
		rows = res.Rows()
	}
	n := len(rows)
	if n < 2 {
		return nil, fmt.Errorf("diagnostics: %d rows; need at least 2", n)
	}
	inputDim := len(rows[0])
	for i, r := range rows {
		if len(r) != inputDim {
			return nil, fmt.Errorf("diagnostics: row %d has %d features, row 0 %d", i, len(r), inputDim)
		}
	}
	d := cfg.Set.Dim()
	rep := &Report{Eps: cfg.Eps, Randomiser: cfg.Randomiser, OutputSet: describeSet(cfg.Set), D: d, InputDim: inputDim,
		Rows: n, Seed: cfg.Seed, AccuracyBoundK: cfg.K, Warnings: []string{}, Notes: []string{}}

	// Encode every row, as the host would: a faulty encoding is the set's centre, then clip.
	enc, err := inBatches(ctx, rows, codec.Encode)
	if err != nil {
		return nil, fmt.Errorf("diagnostics: encoding: %w", err)
	}
	if len(enc) != n {
		return nil, fmt.Errorf("diagnostics: the encoder returned %d encodings for %d rows", len(enc), n)
	}
	latents := make([][]float64, n)
	pos := make([]float64, n)
	var clipped int
	for i, z := range enc {
		x, ok := toFinite(z, d)
		if !ok {
			rep.NonFinite++
			x = centre(cfg.Set)
		}
		if onBoundary(cfg.Set, x) {
			clipped++
		}
		if latents[i], err = cfg.Set.Clip(x); err != nil {
			return nil, err
		}
		pos[i] = position(cfg.Set, latents[i])
	}
	rep.ClippedShare = float64(clipped) / float64(n)
	slices.Sort(pos)
	rep.NormQ10, rep.NormQ50, rep.NormQ90 = quantile(pos, 0.1), quantile(pos, 0.5), quantile(pos, 0.9)

	// Spread of each latent dimension, against the largest and against the noise at ε.
	rep.LatentVariance = variances(latents)
	holdout, rest := split(n, cfg.Seed)
	rep.HoldoutRows = len(holdout)
	rep.DrawsPerRow = min(MaxDrawsPerRow, max(1, (TargetDraws+len(holdout)-1)/len(holdout)))
	noise := rand.New(rand.NewChaCha8(seedKey(cfg.Seed))) // never released: see the package comment
	releases := make([][]float32, 0, len(holdout)*rep.DrawsPerRow)
	owner := make([]int, 0, cap(releases))
	empirical := make([]float64, d)
	for r := 0; r < rep.DrawsPerRow; r++ {
		for _, i := range holdout {
			y, err := rnd.Randomise(latents[i], noise)
			if err != nil {
				return nil, err
			}
			for j := range y {
				e := y[j] - latents[i][j]
				empirical[j] += e * e
			}
			if b, ok := cfg.Set.(mechanisms.Box); ok {
				// The true encoding lies in the box, so clamping the release into it only brings each
				// coordinate closer (post-processing).
				if y, err = b.Clip(y); err != nil {
					return nil, err
				}
			}
			releases = append(releases, toFloat32(y))
			owner = append(owner, i)
		}
	}
	rep.NoiseVariance = noiseVariance(cfg.Set, rnd, cfg.Eps, empirical, len(releases))
	rep.ActiveDims, rep.ActiveDimsAtEps = activeDims(rep.LatentVariance, rep.NoiseVariance)

	// Reconstruction on the held-out rows.
	if codec.Decode == nil {
		rep.ReconstructionNote = "not applicable: the mechanism has no decoder"
	} else if err := reconstruct(ctx, rep, codec, rows, latents, holdout, rest, releases, owner); err != nil {
		return nil, err
	}

	accuracyBound(rep, cfg.Set, cfg.Randomiser, cfg.Eps, cfg.K)
	judge(rep)
	return rep, nil
}

// reconstruct fills the reconstruction errors.
func reconstruct(ctx context.Context, rep *Report, codec Codec, rows [][]float32, latents [][]float64,
	holdout, rest []int, releases [][]float32, owner []int) error {
	D := rep.InputDim
	mean := make([]float64, D)
	for _, i := range rest {
		for k, v := range rows[i] {
			mean[k] += float64(v)
		}
	}
	for k := range mean {
		mean[k] /= float64(len(rest))
	}
	// mse is the mean over r of row of[r]'s squared error per feature against xhat(r, ·).
	mse := func(of []int, xhat func(r, k int) float64) float64 {
		var sum float64
		for r, i := range of {
			var s float64
			for k, v := range rows[i] {
				e := float64(v) - xhat(r, k)
				s += e * e
			}
			sum += s / float64(D)
		}
		return sum / float64(len(of))
	}
	mseMean := mse(holdout, func(_, k int) float64 { return mean[k] })

	clean := make([][]float32, len(holdout))
	for h, i := range holdout {
		clean[h] = toFloat32(latents[i])
	}
	decodedClean, err := decode(ctx, codec, clean, D)
	if err != nil {
		return err
	}
	mseClean := mse(holdout, func(h, k int) float64 { return float64(decodedClean[h][k]) })

	decodedPrivate, err := decode(ctx, codec, releases, D)
	if err != nil {
		return err
	}
	msePrivate := mse(owner, func(r, k int) float64 { return float64(decodedPrivate[r][k]) })

	rep.MSEMean, rep.MSEClean, rep.MSEPrivate = &mseMean, &mseClean, &msePrivate
	if mseMean > 0 {
		ratio := msePrivate / mseMean
		rep.PrivateVsMean = &ratio
	} else {
		rep.ReconstructionNote = "the held-out rows are all equal to the mean: no ratio"
	}
	return nil
}

func decode(ctx context.Context, codec Codec, latents [][]float32, D int) ([][]float32, error) {
	out, err := inBatches(ctx, latents, codec.Decode)
	if err != nil {
		return nil, fmt.Errorf("diagnostics: decoding: %w", err)
	}
	if len(out) != len(latents) {
		return nil, fmt.Errorf("diagnostics: the decoder returned %d rows for %d latents", len(out), len(latents))
	}
	for i, x := range out {
		if len(x) != D {
			return nil, fmt.Errorf("diagnostics: the decoder returned %d features, the input has %d", len(x), D)
		}
		for _, v := range x {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return nil, fmt.Errorf("diagnostics: the decoder returned a non-finite value for latent %d", i)
			}
		}
	}
	return out, nil
}

// judge sets Collapsed and the warnings.
func judge(rep *Report) {
	if 2*rep.ActiveDims < rep.D {
		rep.Collapsed = true
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("collapse: only %d of %d latent dimensions are active (variance at least %g of the largest dimension's)",
			rep.ActiveDims, rep.D, ActiveRelative))
	}
	if rep.MSEClean != nil && *rep.MSEMean > 0 && *rep.MSEClean > (1-ExplainedMin)**rep.MSEMean {
		rep.Collapsed = true
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("collapse: the clean reconstruction (MSE %.4g) is hardly better than the mean of the rows (MSE %.4g; it explains under %g of it): the encoding keeps next to nothing of the row",
			*rep.MSEClean, *rep.MSEMean, ExplainedMin))
	}
	if rep.MSEPrivate != nil && *rep.MSEMean > 0 && *rep.MSEPrivate > (1-ExplainedMin)**rep.MSEMean {
		rep.Notes = append(rep.Notes, fmt.Sprintf("at eps = %g the privatised reconstruction (MSE %.4g) is hardly better than the mean of the rows (MSE %.4g; it explains under %g of it): "+
			"one release says little about its own row, as LDP intends; classifiers and aggregates over many releases can still do well",
			rep.Eps, *rep.MSEPrivate, *rep.MSEMean, ExplainedMin))
	}
}

// accuracyBound applies accuracy.Bound where its assumptions hold.
func accuracyBound(rep *Report, set mechanisms.OutputSet, randomiser string, eps float64, k int) {
	switch {
	case randomiser != mechanisms.RandomiserLaplace:
		rep.AccuracyBoundNote = "not applicable: the bound is for the Laplace randomiser, not " + randomiser
	case !isBall(set):
		rep.AccuracyBoundNote = "not applicable: the bound is for latents in an l1 ball; a box is noised coordinate by coordinate at eps/d"
	case k < 2 || k%2 != 0:
		rep.AccuracyBoundNote = fmt.Sprintf("not applicable: K = %d; the bound needs an even K ≥ 2", k)
	case 2*set.Dim() < k:
		rep.AccuracyBoundNote = fmt.Sprintf("not applicable: d = %d < K/2 = %d; the bound places the K classes on pairs of opposite vertices of the ball", set.Dim(), k/2)
	default:
		b, err := accuracy.Bound(eps, k)
		if err != nil {
			rep.AccuracyBoundNote = "not applicable: " + err.Error()
			return
		}
		rep.AccuracyBound = &b
		rep.AccuracyBoundNote = fmt.Sprintf("K = %d balanced classes, Laplace noise on the l1 ball, any encoder", k)
	}
}

// activeDims counts the dimensions active relative to the largest and against the noise.
func activeDims(latent, noise []float64) (relative, atEps int) {
	largest := slices.Max(latent)
	for j, v := range latent {
		if largest > 0 && v >= ActiveRelative*largest {
			relative++
		}
		if v > 0 && v >= ActiveVsNoise*noise[j] {
			atEps++
		}
	}
	return relative, atEps
}

// noiseVariance is the variance of the noise on each coordinate: exact for Laplace (2b², b = 2l/ε on
// an ℓ1 ball, d·(hi_j − lo_j)/ε on a box), otherwise estimated from the draws (the other randomisers'
// noise depends on the input).
func noiseVariance(set mechanisms.OutputSet, rnd mechanisms.VectorRandomiser, eps float64, sumSq []float64, draws int) []float64 {
	v := make([]float64, set.Dim())
	if rnd.Name() == mechanisms.RandomiserLaplace {
		switch s := set.(type) {
		case mechanisms.L1Ball:
			b := 2 * s.Radius / eps
			for j := range v {
				v[j] = 2 * b * b
			}
			return v
		case mechanisms.Box:
			for j := range v {
				b := float64(len(v)) * (s.Hi[j] - s.Lo[j]) / eps
				v[j] = 2 * b * b
			}
			return v
		}
	}
	for j := range v {
		v[j] = sumSq[j] / float64(draws)
	}
	return v
}

// split returns a seeded holdout of HoldoutFraction of n rows (at least 1, at most MaxHoldout) and the
// rest.
func split(n int, seed uint64) (holdout, rest []int) {
	h := min(MaxHoldout, max(1, int(math.Round(HoldoutFraction*float64(n)))))
	perm := rand.New(rand.NewPCG(seed, 0x4011)).Perm(n)
	holdout, rest = perm[:h], perm[h:]
	slices.Sort(holdout)
	slices.Sort(rest)
	return holdout, rest
}

func inBatches(ctx context.Context, rows [][]float32, f func(context.Context, [][]float32) ([][]float32, error)) ([][]float32, error) {
	out := make([][]float32, 0, len(rows))
	for lo := 0; lo < len(rows); lo += batchSize {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, err := f(ctx, rows[lo:min(lo+batchSize, len(rows))])
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return out, nil
}

func variances(xs [][]float64) []float64 {
	d := len(xs[0])
	mean := make([]float64, d)
	for _, x := range xs {
		for j, v := range x {
			mean[j] += v
		}
	}
	for j := range mean {
		mean[j] /= float64(len(xs))
	}
	out := make([]float64, d)
	for _, x := range xs {
		for j, v := range x {
			e := v - mean[j]
			out[j] += e * e
		}
	}
	for j := range out {
		out[j] /= float64(len(xs))
	}
	return out
}

// quantile of sorted xs at p, interpolating linearly between order statistics.
func quantile(sorted []float64, p float64) float64 {
	h := p * float64(len(sorted)-1)
	lo := int(math.Floor(h))
	if lo+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	return sorted[lo] + (h-float64(lo))*(sorted[lo+1]-sorted[lo])
}

func toFinite(z []float32, d int) ([]float64, bool) {
	if len(z) != d {
		return nil, false
	}
	x := make([]float64, d)
	for j, v := range z {
		x[j] = float64(v)
		if math.IsNaN(x[j]) || math.IsInf(x[j], 0) {
			return nil, false
		}
	}
	return x, true
}

func toFloat32(x []float64) []float32 {
	out := make([]float32, len(x))
	for j, v := range x {
		out[j] = float32(v)
	}
	return out
}

func isBall(set mechanisms.OutputSet) bool {
	_, ok := set.(mechanisms.L1Ball)
	return ok
}

// onBoundary reports whether x (finite, of the set's dimension) is on or outside the set's boundary.
func onBoundary(set mechanisms.OutputSet, x []float64) bool {
	if !set.Contains(x) {
		return true
	}
	switch s := set.(type) {
	case mechanisms.L1Ball:
		var n float64
		for _, v := range x {
			n += math.Abs(v)
		}
		return n >= (1-BoundaryTolerance)*s.Radius
	case mechanisms.Box:
		for j, v := range x {
			if v <= s.Lo[j] || v >= s.Hi[j] {
				return true
			}
		}
	}
	return false
}

// position is x's place in the set: 0 the centre, 1 the boundary.
func position(set mechanisms.OutputSet, x []float64) float64 {
	var s float64
	switch b := set.(type) {
	case mechanisms.L1Ball:
		for _, v := range x {
			s += math.Abs(v)
		}
		return s / b.Radius
	case mechanisms.Box:
		for j, v := range x {
			half := (b.Hi[j] - b.Lo[j]) / 2
			s += math.Abs(v-(b.Lo[j]+half)) / half
		}
		return s / float64(len(x))
	}
	return math.NaN()
}

func centre(set mechanisms.OutputSet) []float64 {
	x := make([]float64, set.Dim())
	if b, ok := set.(mechanisms.Box); ok {
		for j := range x {
			x[j] = b.Lo[j] + (b.Hi[j]-b.Lo[j])/2
		}
	}
	return x
}

func describeSet(set mechanisms.OutputSet) string {
	switch s := set.(type) {
	case mechanisms.L1Ball:
		return fmt.Sprintf("l1_ball(radius=%g)", s.Radius)
	case mechanisms.Box:
		return fmt.Sprintf("box(%d coordinates)", len(s.Lo))
	}
	return fmt.Sprintf("%T", set)
}

func seedKey(seed uint64) [32]byte {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:8], seed)
	copy(key[8:], "ldpsql/diagnostics/noise")
	return key
}
