package classifier

import (
	"math"
	"math/rand/v2"
)

// synthSpec describes a synthetic LDP data-collection problem in the
// thesis's setting: clean latents z in the ℓ1 ball of radius L (the VLM's
// clipped encoder output), privatised as z̃ = z + Laplace(0, 2L/EpsX)^d and
// ỹ = K-RR(y) at EpsY.
type synthSpec struct {
	K, D          int
	M, N, NVal, T int         // aux, privatised train, privatised validation, clean test
	Means         [][]float64 // class means (K × D)
	Sigma         float64     // isotropic Gaussian spread around the means
	Prior         []float64   // class probabilities (nil: uniform)
	L             float64     // ℓ1 clipping radius
	EpsX, EpsY    float64
	Seed          uint64
}

type synthData struct {
	aux         [][]float32
	train, val  MarginalData
	testX       [][]float32 // clean
	testY       []int
	cleanTrainY []int // true labels of the training rows (diagnostics only)
	b           float64
	r           [][]float64
}

func clipL1(z []float64, l float64) {
	n := 0.0
	for _, v := range z {
		n += math.Abs(v)
	}
	if n > l {
		for i := range z {
			z[i] *= l / n
		}
	}
}

// krr draws a K-RR report of y: keep with probability e^ε/(e^ε+K−1), else
// uniform over the other K−1 labels.
func krr(r *rand.Rand, y, k int, eps float64) int {
	if r.Float64() < math.Exp(eps)/(math.Exp(eps)+float64(k-1)) {
		return y
	}
	o := r.IntN(k - 1)
	if o >= y {
		o++
	}
	return o
}

func (s synthSpec) make() synthData {
	r := rand.New(rand.NewPCG(s.Seed, 99))
	b := 2 * s.L / s.EpsX
	drawY := func() int {
		if s.Prior == nil {
			return r.IntN(s.K)
		}
		u := r.Float64()
		for y, p := range s.Prior {
			if u < p {
				return y
			}
			u -= p
		}
		return s.K - 1
	}
	clean := func() ([]float64, int) {
		y := drawY()
		z := make([]float64, s.D)
		for j := range z {
			z[j] = s.Means[y][j] + s.Sigma*r.NormFloat64()
		}
		clipL1(z, s.L)
		return z, y
	}
	f32 := func(z []float64) []float32 {
		o := make([]float32, len(z))
		for i, v := range z {
			o[i] = float32(v)
		}
		return o
	}
	priv := func(n int) (x [][]float32, yt, yc []int) {
		for range n {
			z, y := clean()
			for j := range z {
				z[j] += laplace(r, b)
			}
			x = append(x, f32(z))
			yt = append(yt, krr(r, y, s.K, s.EpsY))
			yc = append(yc, y)
		}
		return
	}
	var d synthData
	d.b, d.r = b, KRRMatrix(s.EpsY, s.K)
	for range s.M {
		z, _ := clean()
		d.aux = append(d.aux, f32(z))
	}
	x, y, yc := priv(s.N)
	d.train = MarginalData{Aux: d.aux, Noisy: x, Labels: y, Scale: b, R: d.r}
	d.cleanTrainY = yc
	x, y, _ = priv(s.NVal)
	d.val = MarginalData{Aux: d.aux, Noisy: x, Labels: y, Scale: b, R: d.r}
	for range s.T {
		z, y := clean()
		d.testX = append(d.testX, f32(z))
		d.testY = append(d.testY, y)
	}
	return d
}

// randomMeans draws K class means with independent N(0, scale²) entries.
func randomMeans(seed uint64, k, d int, scale float64) [][]float64 {
	r := rand.New(rand.NewPCG(seed, 5))
	m := make([][]float64, k)
	for i := range m {
		m[i] = make([]float64, d)
		for j := range m[i] {
			m[i][j] = scale * r.NormFloat64()
		}
	}
	return m
}

func accuracy(m *Model, x [][]float32, y []int) float64 { return m.Accuracy(x, y) }
