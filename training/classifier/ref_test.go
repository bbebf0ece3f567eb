package classifier

// Independent float64 reference implementations of the two objectives, used
// by the value and gradient tests. They share nothing with the package's
// kernels but the parameter layout and the standardiser's stored mean/std.

import (
	"math"
	"math/rand/v2"

	"github.com/ldpsql/ldpsql/training/nn"
)

// refLogits is the MLP in float64 on one standardised row.
func refLogits(sizes []int, params []float64, x []float64) []float64 {
	a := x
	off := 0
	for l := 0; l+1 < len(sizes); l++ {
		in, out := sizes[l], sizes[l+1]
		w := params[off : off+in*out]
		off += in * out
		b := params[off : off+out]
		off += out
		z := make([]float64, out)
		for i := range out {
			s := b[i]
			for j := range in {
				s += w[i*in+j] * a[j]
			}
			if l+2 < len(sizes) {
				s = math.Max(s, 0)
			}
			z[i] = s
		}
		a = z
	}
	return a
}

func refStd(std nn.Standardiser, x []float32) []float64 {
	o := make([]float64, len(x))
	for j, v := range x {
		o[j] = (float64(v) - float64(std.Mean[j])) / float64(std.Std[j])
	}
	return o
}

func refSoftmax(l []float64) []float64 {
	mx := math.Inf(-1)
	for _, v := range l {
		mx = math.Max(mx, v)
	}
	p := make([]float64, len(l))
	s := 0.0
	for i, v := range l {
		p[i] = math.Exp(v - mx)
		s += p[i]
	}
	for i := range p {
		p[i] /= s
	}
	return p
}

// refMarginalLog is −(1/N)·Σ_n log p(ỹ_n, z̃_n) by Eq 4.11 evaluated in log
// space in float64: log p = −log M + LSE_m[w_nm + log Σ_y R[ỹ_n][y]·p_ψ(y|ẑ_m)].
func refMarginalLog(sizes []int, params []float64, std nn.Standardiser, aux, noisy [][]float32, labels []int, b float64, r [][]float64) float64 {
	m, d, k := len(aux), len(aux[0]), len(r)
	logQ := make([][]float64, m) // logQ[m][k]
	for i, z := range aux {
		p := refSoftmax(refLogits(sizes, params, refStd(std, z)))
		logQ[i] = make([]float64, k)
		for kk := range k {
			q := 0.0
			for y := range k {
				q += r[kk][y] * p[y]
			}
			logQ[i][kk] = math.Log(q)
		}
	}
	total := 0.0
	terms := make([]float64, m)
	for n, zt := range noisy {
		for i, z := range aux {
			l1 := 0.0
			for j := range d {
				l1 += math.Abs(float64(zt[j]) - float64(z[j]))
			}
			terms[i] = -float64(d)*math.Log(2*b) - l1/b + logQ[i][labels[n]]
		}
		total += -(-math.Log(float64(m)) + nn.LogSumExp(terms))
	}
	return total / float64(len(noisy))
}

// refMarginalDirect is Eq 4.11 exactly as printed, in probability space:
// p(ỹ, z̃) = (1/M) Σ_m Σ_y R[ỹ][y]·p_ψ(y|ẑ_m)·Π_i (1/2b)·exp(−|z̃_i − ẑ_m,i|/b).
// It underflows to log 0 = −Inf when b is small.
func refMarginalDirect(sizes []int, params []float64, std nn.Standardiser, aux, noisy [][]float32, labels []int, b float64, r [][]float64) float64 {
	m, d, k := len(aux), len(aux[0]), len(r)
	probs := make([][]float64, m)
	for i, z := range aux {
		probs[i] = refSoftmax(refLogits(sizes, params, refStd(std, z)))
	}
	total := 0.0
	for n, zt := range noisy {
		p := 0.0
		for i, z := range aux {
			lik := 1.0
			for j := range d {
				lik *= 1 / (2 * b) * math.Exp(-math.Abs(float64(zt[j])-float64(z[j]))/b)
			}
			for y := range k {
				p += r[labels[n]][y] * probs[i][y] * lik
			}
		}
		total += -math.Log(p / float64(m))
	}
	return total / float64(len(noisy))
}

// refForwardLoss is −(1/N)·Σ_n log Σ_y R[ỹ_n][y]·softmax(x̃_n)_y (Eq 4.12).
func refForwardLoss(sizes []int, params []float64, std nn.Standardiser, x [][]float32, labels []int, r [][]float64) float64 {
	total := 0.0
	for n, row := range x {
		p := refSoftmax(refLogits(sizes, params, refStd(std, row)))
		q := 0.0
		for y := range p {
			q += r[labels[n]][y] * p[y]
		}
		total += -math.Log(q)
	}
	return total / float64(len(x))
}

// centralDiff is the central-difference gradient of f at params.
func centralDiff(f func([]float64) float64, params []float64, h float64) []float64 {
	g := make([]float64, len(params))
	p := append([]float64(nil), params...)
	for i := range p {
		v := p[i]
		p[i] = v + h
		fp := f(p)
		p[i] = v - h
		fm := f(p)
		p[i] = v
		g[i] = (fp - fm) / (2 * h)
	}
	return g
}

func f64s(v []float32) []float64 {
	o := make([]float64, len(v))
	for i, x := range v {
		o[i] = float64(x)
	}
	return o
}

// laplace draws Laplace(0, b).
func laplace(r *rand.Rand, b float64) float64 {
	u := r.Float64() - 0.5
	for u == -0.5 {
		u = r.Float64() - 0.5
	}
	if u < 0 {
		return b * math.Log(1+2*u)
	}
	return -b * math.Log(1-2*u)
}

// tinyMarginal draws a small random problem: m aux points and n privatised
// points (other clean points plus Laplace(b) noise) in d dimensions with k
// classes and labels uniform.
func tinyMarginal(seed uint64, m, n, d, k int, b float64) (aux, noisy [][]float32, labels []int) {
	r := rand.New(rand.NewPCG(seed, 7))
	point := func() []float32 {
		z := make([]float32, d)
		for j := range z {
			z[j] = float32(r.NormFloat64())
		}
		return z
	}
	for range m {
		aux = append(aux, point())
	}
	for range n {
		z := point()
		for j := range z {
			z[j] += float32(laplace(r, b))
		}
		noisy = append(noisy, z)
		labels = append(labels, r.IntN(k))
	}
	return aux, noisy, labels
}

// randomiseParams sets every parameter (biases included) to a random value
// of the initialisation's scale, so no gradient is trivially zero.
func randomiseParams(nt *net, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 11))
	nt.init(r)
	for l := range nt.layers() {
		for i := range nt.b(l) {
			nt.b(l)[i] = float32(0.3 * r.NormFloat64())
		}
	}
}
