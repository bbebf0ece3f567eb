package classifier

import (
	"math"
	"math/rand/v2"

	gblas "gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/ldpsql/ldpsql/training/nn"
	"github.com/ldpsql/ldpsql/training/nn/sgemm"
)

// blas is gonum's pure-Go BLAS (assembly kernels on amd64), the
// implementation behind blas32 by default. It is called directly rather than
// through blas32's global, so that a process that switched blas32 to a cgo
// BLAS (the vlm package's openblas build) does not pay a cgo call per
// level-1 kernel here: the products below are many short axpys and dots.
var blas gonum.Implementation

// gemm is the products of the MLP's layers (W·A forward, Wᵀ·dZ backward):
// nn/sgemm's register-blocked kernel, which computes each element as the
// same chain of roundings as the axpys it replaces (bias, then + w_ij·a_j in
// order of j, each product rounded), so results are unchanged and the
// layers run several times faster.
var gemm sgemm.Implementation

// net is the classifier's MLP: ReLU hidden layers and a linear output layer
// of K logits. Activations are feature-major: a block of `cols` samples is a
// (units × cols) row-major matrix, so every product below is a sequence of
// long axpys or dots along the sample axis (W·A: for each output unit, one
// axpy per input unit; dW += dZ·Aᵀ: one dot per weight; Wᵀ·dZ: one axpy per
// weight).
type net struct {
	sizes  []int     // input dimension, hidden sizes…, K
	params []float32 // per layer: W (out×in, row-major) then b (out)
	offW   []int     // offset of each layer's W in params
	offB   []int     // offset of each layer's b in params
}

func newNet(sizes []int) *net {
	nt := &net{sizes: sizes}
	off := 0
	for l := 0; l+1 < len(sizes); l++ {
		nt.offW = append(nt.offW, off)
		off += sizes[l] * sizes[l+1]
		nt.offB = append(nt.offB, off)
		off += sizes[l+1]
	}
	nt.params = make([]float32, off)
	return nt
}

// paramCount is the number of weights and biases of an MLP of these sizes,
// or −1 if it exceeds maxParamsLen.
func paramCount(sizes []int) int {
	n := 0
	for l := 0; l+1 < len(sizes); l++ {
		if sizes[l] > maxParamsLen || sizes[l+1] > maxParamsLen {
			return -1
		}
		n += sizes[l]*sizes[l+1] + sizes[l+1]
		if n > maxParamsLen {
			return -1
		}
	}
	return n
}

func (nt *net) layers() int { return len(nt.sizes) - 1 }
func (nt *net) inDim() int  { return nt.sizes[0] }
func (nt *net) classes() int {
	return nt.sizes[len(nt.sizes)-1]
}

func (nt *net) w(l int) []float32 {
	return nt.params[nt.offW[l]:nt.offB[l]]
}

func (nt *net) b(l int) []float32 {
	return nt.params[nt.offB[l] : nt.offB[l]+nt.sizes[l+1]]
}

func (nt *net) clone() *net {
	c := *nt
	c.params = append([]float32(nil), nt.params...)
	return &c
}

// init draws the weights from r: He-uniform U(±√(6/fan_in)) for layers
// followed by a ReLU, Glorot-uniform U(±√(6/(fan_in+fan_out))) for the
// output layer; biases 0.
func (nt *net) init(r *rand.Rand) {
	clear(nt.params)
	for l := range nt.layers() {
		in, out := nt.sizes[l], nt.sizes[l+1]
		lim := math.Sqrt(6 / float64(in))
		if l == nt.layers()-1 {
			lim = math.Sqrt(6 / float64(in+out))
		}
		w := nt.w(l)
		for i := range w {
			w[i] = float32((2*r.Float64() - 1) * lim)
		}
	}
}

// actBuf holds one block's activations: a[l] is layer l's output (out_l ×
// cols): post-ReLU for hidden layers, the logits for the last.
type actBuf struct {
	cols int
	a    [][]float32
}

func (nt *net) newActs(cols int) *actBuf {
	ab := &actBuf{cols: cols, a: make([][]float32, nt.layers())}
	for l := range ab.a {
		ab.a[l] = make([]float32, nt.sizes[l+1]*cols)
	}
	return ab
}

// logits returns the output block (K × cols) of the last forward pass.
func (ab *actBuf) logits() []float32 { return ab.a[len(ab.a)-1] }

// forward runs the MLP on x (in × cols, feature-major) for cols ≤ ab.cols
// columns, storing the block with row stride cols.
func (nt *net) forward(x []float32, cols int, ab *actBuf) {
	if cols == 0 {
		return
	}
	a := x
	for l := range nt.layers() {
		in, out := nt.sizes[l], nt.sizes[l+1]
		z := ab.a[l][:out*cols]
		for i, bi := range nt.b(l) {
			fill(z[i*cols:(i+1)*cols], bi)
		}
		gemm.Sgemm(gblas.NoTrans, gblas.NoTrans, out, cols, in, 1, nt.w(l), in, a, cols, 1, z, cols)
		if l < nt.layers()-1 {
			relu(z)
		}
		a = z
	}
}

// fill sets every element of x to v.
func fill(x []float32, v float32) {
	if len(x) == 0 {
		return
	}
	x[0] = v
	for n := 1; n < len(x); n *= 2 {
		copy(x[n:], x[:n])
	}
}

// relu replaces negative values (and −0, NaN with the sign bit) by +0,
// branch-free: the sign bit, spread by an arithmetic shift, masks the value.
func relu(x []float32) {
	for i, v := range x {
		u := math.Float32bits(v)
		x[i] = math.Float32frombits(u &^ uint32(int32(u)>>31))
	}
}

// maskByPositive zeroes d[c] wherever a[c] (a ReLU output, so +0 or
// positive) is 0, branch-free: for the bits p ≥ 0 of a, −p >> 31 is all
// ones exactly when p > 0.
func maskByPositive(d, a []float32) {
	a = a[:len(d)]
	for c, v := range a {
		m := uint32(-int32(math.Float32bits(v)) >> 31)
		d[c] = math.Float32frombits(math.Float32bits(d[c]) & m)
	}
}

// ones is a vector of 1s for sums as dot products.
var ones = func() []float32 {
	o := make([]float32, max(auxChunk, fwdChunk, predictBlock))
	fill(o, 1)
	return o
}()

// backward accumulates into grad (float64, laid out like params) the
// gradient of Σ_c Σ_k dlogits[k][c]·logit_k(x_c), given the activations of
// the forward pass on the same x. dlogits (K × cols) and the two scratch
// buffers (each at least maxWidth × cols) are overwritten.
func (nt *net) backward(x []float32, cols int, ab *actBuf, dlogits []float32, grad []float64, s0, s1 []float32) {
	dz := dlogits[:nt.classes()*cols]
	for l := nt.layers() - 1; l >= 0; l-- {
		in, out := nt.sizes[l], nt.sizes[l+1]
		prev := x
		if l > 0 {
			prev = ab.a[l-1]
		}
		gw := grad[nt.offW[l]:nt.offB[l]]
		gb := grad[nt.offB[l] : nt.offB[l]+out]
		for i := range out {
			dzi := dz[i*cols : (i+1)*cols]
			gb[i] += float64(blas.Sdot(cols, dzi, 1, ones, 1))
			gwi := gw[i*in : (i+1)*in]
			for j := range gwi {
				gwi[j] += float64(blas.Sdot(cols, dzi, 1, prev[j*cols:(j+1)*cols], 1))
			}
		}
		if l == 0 {
			break
		}
		da := s0[:in*cols]
		s0, s1 = s1, s0
		w := nt.w(l)
		wt := make([]float32, in*out) // Wᵀ, for da = Wᵀ·dz as one product
		for i := range out {
			for j := range in {
				wt[j*out+i] = w[i*in+j]
			}
		}
		gemm.Sgemm(gblas.NoTrans, gblas.NoTrans, in, cols, out, 1, wt, out, dz, cols, 0, da, cols)
		for j := range in {
			maskByPositive(da[j*cols:(j+1)*cols], prev[j*cols:(j+1)*cols])
		}
		dz = da
	}
}

// maxWidth is the largest layer width after the input.
func (nt *net) maxWidth() int {
	m := 0
	for _, s := range nt.sizes[1:] {
		m = max(m, s)
	}
	return m
}

// block writes rows[idx[c]] (or rows[c0+c] when idx is nil), standardised,
// into dst as a feature-major (d × cols) block.
func block(s nn.Standardiser, dst []float32, rows [][]float32, idx []int, c0, cols int) {
	for c := range cols {
		var r []float32
		if idx != nil {
			r = rows[idx[c]]
		} else {
			r = rows[c0+c]
		}
		for j, v := range r {
			dst[j*cols+c] = (v - s.Mean[j]) / s.Std[j]
		}
	}
}
