package classifier

import (
	"errors"
	"fmt"
	"math"
)

// MarginalData is one split (training or validation) of privatised
// representations for the prior-marginalised objective (Eq 4.11).
type MarginalData struct {
	// Aux are the clean auxiliary latents ẑ_m (M rows of dimension d), the
	// empirical prior and the classifier's only inputs. In a validation
	// split nil means the training split's.
	Aux [][]float32
	// Noisy are the privatised latents z̃_n = z_n + Laplace(0, Scale)^d
	// (N rows of dimension d).
	Noisy [][]float32
	// Labels are the privatised labels ỹ_n ∈ {0, …, K−1}.
	Labels []int
	// Scale is the Laplace privatisation scale b = 2l/ε_x (not a training
	// scale). In a validation split 0 means the training split's.
	Scale float64
	// R is the K×K label channel, R[i][j] = p(ỹ = i | y = j), each column
	// summing to 1 (see [KRRMatrix]). In a validation split nil means the
	// training split's.
	R [][]float64
}

// ForwardData is one split of privatised inputs for the forward-corrected
// objective (Eq 4.12): the classifier is applied to X directly.
type ForwardData struct {
	// X are the privatised inputs x̃_n (N rows of one dimension: latents,
	// noisy pixels, …).
	X [][]float32
	// Labels are the privatised labels ỹ_n ∈ {0, …, K−1}.
	Labels []int
	// R is the K×K label channel as in MarginalData. In a validation split
	// nil means the training split's.
	R [][]float64
}

// KRRMatrix returns the channel of K-ary randomised response at ε
// (thesis Eq 4.7): R[i][j] = e^ε/(e^ε+K−1) if i = j, 1/(e^ε+K−1) otherwise.
// It is computed as 1/(1+(K−1)e^−ε) and e^−ε/(1+(K−1)e^−ε), so large ε does
// not overflow and ε = +Inf gives the identity (labels not privatised). It
// returns nil when k < 2 or ε is NaN or negative.
func KRRMatrix(eps float64, k int) [][]float64 {
	if k < 2 || k > MaxClasses || math.IsNaN(eps) || eps < 0 {
		return nil
	}
	t := math.Exp(-eps) // e^−ε, 0 at +Inf
	den := 1 + float64(k-1)*t
	keep, flip := 1/den, t/den
	r := make([][]float64, k)
	for i := range r {
		r[i] = make([]float64, k)
		for j := range r[i] {
			if i == j {
				r[i][j] = keep
			} else {
				r[i][j] = flip
			}
		}
	}
	return r
}

// stochasticTol is how far a column of R may sum from 1.
const stochasticTol = 1e-6

// checkChannel validates R and returns K.
func checkChannel(r [][]float64) (int, error) {
	k := len(r)
	if k == 0 {
		return 0, errors.New("R is empty: want the K×K label channel p(ỹ=i|y=j)")
	}
	if k < 2 || k > MaxClasses {
		return 0, fmt.Errorf("R is %d×%d: want 2 ≤ K ≤ %d classes", k, k, MaxClasses)
	}
	for i, row := range r {
		if len(row) != k {
			return 0, fmt.Errorf("R row %d has %d entries: want a square %d×%d matrix", i, len(row), k, k)
		}
		for j, v := range row {
			if math.IsNaN(v) || v < 0 || v > 1 {
				return 0, fmt.Errorf("R[%d][%d] = %v: want a probability in [0, 1]", i, j, v)
			}
		}
	}
	for j := range k {
		s := 0.0
		for i := range k {
			s += r[i][j]
		}
		if math.Abs(s-1) > stochasticTol {
			return 0, fmt.Errorf("column %d of R sums to %v: want 1 (R[i][j] = p(ỹ=i|y=j) must be column-stochastic)", j, s)
		}
	}
	return k, nil
}

// maxAbsInput bounds input values, so that ℓ1 distances and standardised
// values stay far inside float32 range.
const maxAbsInput = 1e15

// checkRows validates a matrix of finite rows of one width (want > 0 fixes
// the width) and returns the width.
func checkRows(name string, rows [][]float32, want int) (int, error) {
	if len(rows) == 0 {
		return 0, fmt.Errorf("%s is empty", name)
	}
	d := want
	if d <= 0 {
		d = len(rows[0])
	}
	if d == 0 {
		return 0, fmt.Errorf("%s row 0 is empty: want at least one feature", name)
	}
	if d > MaxInputDim {
		return 0, fmt.Errorf("%s rows have %d features: want at most %d", name, d, MaxInputDim)
	}
	for i, row := range rows {
		if len(row) != d {
			return 0, fmt.Errorf("%s row %d has %d features, want %d (rows must all have one length)", name, i, len(row), d)
		}
		for j, v := range row {
			if v != v || math.Abs(float64(v)) > maxAbsInput {
				return 0, fmt.Errorf("%s[%d][%d] = %v: want a finite value of magnitude at most %g", name, i, j, v, maxAbsInput)
			}
		}
	}
	return d, nil
}

// checkLabels validates labels against n rows and the channel r (K×K).
func checkLabels(name string, labels []int, n int, r [][]float64) error {
	if len(labels) != n {
		return fmt.Errorf("%s has %d labels for %d rows", name, len(labels), n)
	}
	k := len(r)
	possible := make([]bool, k)
	for i, row := range r {
		for _, v := range row {
			possible[i] = possible[i] || v > 0
		}
	}
	for i, y := range labels {
		if y < 0 || y >= k {
			return fmt.Errorf("%s label %d is %d: want 0 ≤ label < K = %d", name, i, y, k)
		}
		if !possible[y] {
			return fmt.Errorf("%s label %d is %d, which R can never report (row %d of R is all zero)", name, i, y, y)
		}
	}
	return nil
}

// Bounds on the privatisation scale b.
const (
	minScale = 1e-30
	maxScale = 1e30
)

// marginalShape is the validated shape of a MarginalData pair.
type marginalShape struct {
	d, k int
}

// checkMarginal validates train and val (after val's nil fields are filled
// from train) and returns d and K.
func checkMarginal(train, val *MarginalData) (marginalShape, error) {
	var s marginalShape
	d, err := checkRows("train Aux", train.Aux, 0)
	if err != nil {
		return s, err
	}
	if _, err := checkRows("train Noisy", train.Noisy, d); err != nil {
		return s, err
	}
	b := train.Scale
	if math.IsNaN(b) || !(b >= minScale) || b > maxScale {
		return s, fmt.Errorf("train Scale = %v: want the Laplace privatisation scale b = 2l/ε_x in [%g, %g]", b, minScale, maxScale)
	}
	k, err := checkChannel(train.R)
	if err != nil {
		return s, fmt.Errorf("train: %w", err)
	}
	if err := checkLabels("train", train.Labels, len(train.Noisy), train.R); err != nil {
		return s, err
	}
	if val.Aux == nil {
		val.Aux = train.Aux
	}
	if val.Scale == 0 {
		val.Scale = train.Scale
	}
	if val.R == nil {
		val.R = train.R
	}
	if len(val.Noisy) == 0 && len(val.Labels) == 0 {
		return marginalShape{d: d, k: k}, nil // no validation split
	}
	if _, err := checkRows("val Aux", val.Aux, d); err != nil {
		return s, err
	}
	if _, err := checkRows("val Noisy", val.Noisy, d); err != nil {
		return s, err
	}
	b = val.Scale
	if math.IsNaN(b) || !(b >= minScale) || b > maxScale {
		return s, fmt.Errorf("val Scale = %v: want the Laplace privatisation scale in [%g, %g]", b, minScale, maxScale)
	}
	vk, err := checkChannel(val.R)
	if err != nil {
		return s, fmt.Errorf("val: %w", err)
	}
	if vk != k {
		return s, fmt.Errorf("val R is %d×%d but train R is %d×%d: both splits need the same K", vk, vk, k, k)
	}
	if err := checkLabels("val", val.Labels, len(val.Noisy), val.R); err != nil {
		return s, err
	}
	return marginalShape{d: d, k: k}, nil
}

// checkForward validates train and val (val.R filled from train) and returns
// the input dimension and K.
func checkForward(train, val *ForwardData) (int, int, error) {
	d, err := checkRows("train X", train.X, 0)
	if err != nil {
		return 0, 0, err
	}
	k, err := checkChannel(train.R)
	if err != nil {
		return 0, 0, fmt.Errorf("train: %w", err)
	}
	if err := checkLabels("train", train.Labels, len(train.X), train.R); err != nil {
		return 0, 0, err
	}
	if val.R == nil {
		val.R = train.R
	}
	if len(val.X) == 0 && len(val.Labels) == 0 {
		return d, k, nil
	}
	if _, err := checkRows("val X", val.X, d); err != nil {
		return 0, 0, err
	}
	vk, err := checkChannel(val.R)
	if err != nil {
		return 0, 0, fmt.Errorf("val: %w", err)
	}
	if vk != k {
		return 0, 0, fmt.Errorf("val R is %d×%d but train R is %d×%d: both splits need the same K", vk, vk, k, k)
	}
	if err := checkLabels("val", val.Labels, len(val.X), val.R); err != nil {
		return 0, 0, err
	}
	return d, k, nil
}
