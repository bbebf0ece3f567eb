package spread

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Channel kinds.
const (
	KindRR      = "rr"
	KindLaplace = "laplace"
	KindClean   = "clean"
)

// Limits on Data.
const (
	MaxClasses  = 1 << 12
	MaxInputDim = 1 << 20
)

// Channel is the known privatisation channel of one feature.
//
//   - "rr": categorical randomised response on a discretised feature. [Lo, Hi]
//     is split into Bins ≥ 2 equal bins (bin k is [Lo + k·w, Lo + (k+1)·w),
//     w = (Hi − Lo)/Bins, the last one closed); the released bin is kept with
//     probability 1 − FlipProb and otherwise replaced by one of the other
//     Bins − 1 bins uniformly. The privatised value x̃ may be any number in
//     [Lo, Hi] that lies in the released bin (its centre, say); the model
//     sees a bin as its centre Lo + (k + ½)·w.
//   - "laplace": x̃ = x + Laplace(0, Scale) with the clean x in [Lo, Hi]. The
//     prior is categorical over Bins bins of [Lo, Hi] (Config.Bins when
//     Bins is 0) placed at the bin centres; x̃ may be any finite number.
//   - "clean": x̃ = x, not privatised; the other fields are ignored.
type Channel struct {
	Kind     string  // "rr", "laplace", "clean"
	Lo, Hi   float64 // range of the clean feature
	Bins     int     // rr: number of states; laplace: prior bins (0: Config.Bins)
	FlipProb float64 // rr: probability the released bin differs from the true one
	Scale    float64 // laplace: b, the noise scale
}

// Data is a privatised training set: N rows of D features and a label each.
type Data struct {
	// X holds the privatised features x̃_n, N rows of D = len(Channels).
	X [][]float64
	// Labels holds the privatised labels c̃_n ∈ {0, …, K−1}.
	Labels []int
	// Channels holds each feature's privatisation channel.
	Channels []Channel
	// R is the K×K label channel, R[i][j] = p(c̃ = i | c = j): each column
	// sums to 1 and R must be invertible (k-ary randomised response with keep
	// probability 1 − p and flips p/(K−1) is the usual choice).
	R [][]float64
}

// Label-channel tolerances.
const (
	columnSumTol = 1e-6
	maxCondR     = 1e12
)

// validate checks d and returns K.
func (d Data) validate() (int, error) {
	k := len(d.R)
	if k < 2 || k > MaxClasses {
		return 0, fmt.Errorf("R has %d rows: want a K×K label channel with 2 ≤ K ≤ %d", k, MaxClasses)
	}
	for i, row := range d.R {
		if len(row) != k {
			return 0, fmt.Errorf("R[%d] has %d entries: R must be K×K with K = %d", i, len(row), k)
		}
		for j, v := range row {
			if math.IsNaN(v) || v < 0 || v > 1 {
				return 0, fmt.Errorf("R[%d][%d] = %v: want a probability in [0, 1]", i, j, v)
			}
		}
	}
	for j := 0; j < k; j++ {
		s := 0.0
		for i := 0; i < k; i++ {
			s += d.R[i][j]
		}
		if math.Abs(s-1) > columnSumTol {
			return 0, fmt.Errorf("column %d of R sums to %v: R[i][j] = p(c̃=i|c=j), so every column must sum to 1", j, s)
		}
	}
	var lu mat.LU
	rm := mat.NewDense(k, k, nil)
	for i := range k {
		rm.SetRow(i, d.R[i])
	}
	lu.Factorize(rm)
	if c := lu.Cond(); !(c < maxCondR) {
		return 0, fmt.Errorf("R is singular (condition number %.3g): the noisy labels carry no recoverable information "+
			"about the true ones (for k-ary randomised response this is flip probability (K−1)/K), and the spread "+
			"likelihood is not identifiable", c)
	}

	dim := len(d.Channels)
	if dim < 1 || dim > MaxInputDim {
		return 0, fmt.Errorf("%d channels: want one per feature, 1 ≤ D ≤ %d", dim, MaxInputDim)
	}
	for i, ch := range d.Channels {
		if err := ch.validate(); err != nil {
			return 0, fmt.Errorf("Channels[%d]: %w", i, err)
		}
	}
	n := len(d.X)
	if n < 1 {
		return 0, errors.New("X has no rows")
	}
	if len(d.Labels) != n {
		return 0, fmt.Errorf("%d labels for %d rows of X", len(d.Labels), n)
	}
	for r, row := range d.X {
		if len(row) != dim {
			return 0, fmt.Errorf("X[%d] has %d features: want D = %d (one per channel)", r, len(row), dim)
		}
		for i, v := range row {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return 0, fmt.Errorf("X[%d][%d] = %v: want a finite number", r, i, v)
			}
			if ch := d.Channels[i]; ch.Kind == KindRR {
				if tol := 1e-9 * (ch.Hi - ch.Lo); v < ch.Lo-tol || v > ch.Hi+tol {
					return 0, fmt.Errorf("X[%d][%d] = %v is outside the rr channel's range [%v, %v]: randomised response releases a bin of that range",
						r, i, v, ch.Lo, ch.Hi)
				}
			}
		}
		if c := d.Labels[r]; c < 0 || c >= k {
			return 0, fmt.Errorf("Labels[%d] = %d: want a class in 0..%d (R is %d×%d)", r, c, k-1, k, k)
		}
	}
	return k, nil
}

func (ch Channel) validate() error {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	rangeOK := func() error {
		if !finite(ch.Lo) || !finite(ch.Hi) || !(ch.Lo < ch.Hi) || !finite(ch.Hi-ch.Lo) {
			return fmt.Errorf("%s channel range [%v, %v]: want finite Lo < Hi", ch.Kind, ch.Lo, ch.Hi)
		}
		return nil
	}
	switch ch.Kind {
	case KindClean:
		return nil
	case KindRR:
		if err := rangeOK(); err != nil {
			return err
		}
		if ch.Bins < 2 || ch.Bins > MaxBins {
			return fmt.Errorf("rr channel Bins = %d: want 2 ≤ Bins ≤ %d", ch.Bins, MaxBins)
		}
		if math.IsNaN(ch.FlipProb) || ch.FlipProb < 0 || ch.FlipProb > 1 {
			return fmt.Errorf("rr channel FlipProb = %v: want a probability in [0, 1]", ch.FlipProb)
		}
		if s := float64(ch.Bins-1) / float64(ch.Bins); math.Abs(ch.FlipProb-s) < 1e-9 {
			return fmt.Errorf("rr channel FlipProb = %v = (Bins−1)/Bins: the released bin is then uniform whatever the true one, "+
				"so it carries no information (the channel matrix is singular)", ch.FlipProb)
		}
		return nil
	case KindLaplace:
		if err := rangeOK(); err != nil {
			return err
		}
		if !finite(ch.Scale) || !(ch.Scale > 0) {
			return fmt.Errorf("laplace channel Scale = %v: want a finite noise scale b > 0", ch.Scale)
		}
		if ch.Bins != 0 && (ch.Bins < 2 || ch.Bins > MaxBins) {
			return fmt.Errorf("laplace channel Bins = %d: want 0 (Config.Bins) or 2 ≤ Bins ≤ %d", ch.Bins, MaxBins)
		}
		return nil
	case "":
		return fmt.Errorf("channel Kind is empty: want %q, %q or %q", KindRR, KindLaplace, KindClean)
	}
	return fmt.Errorf("channel Kind %q: want %q, %q or %q", ch.Kind, KindRR, KindLaplace, KindClean)
}

// binOf returns the bin of [lo, hi] split into b equal bins that holds v
// (clamped to the end bins).
func binOf(v, lo, hi float64, b int) int {
	k := int(math.Floor((v - lo) / (hi - lo) * float64(b)))
	return min(max(k, 0), b-1)
}

// binCentre returns the centre of bin k of [lo, hi] split into b bins.
func binCentre(k int, lo, hi float64, b int) float64 {
	return lo + (float64(k)+0.5)*(hi-lo)/float64(b)
}
