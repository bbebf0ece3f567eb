package classifier

import (
	"context"
	"math"
	"slices"

	"github.com/ldpsql/ldpsql/training/nn"
)

// auxChunk is the number of auxiliary points per block of the MLP's forward
// and backward passes over the prior (activations of one block stay in
// L1/L2).
const auxChunk = 1024

// Probability-space kernel limits (see the package documentation, "The
// marginal kernel").
const (
	// maxChannelRatio bounds ρ = max_k max_y R[k][y]/min_y R[k][y] for the
	// probability-space kernel (ε_y up to ln 2³² ≈ 22 for K-RR).
	maxChannelRatio = 1 << 32
	// minChannelEntry is the smallest entry of R the probability-space kernel
	// accepts (Q ≥ it, far inside float32's normal range).
	minChannelEntry = 0x1p-60
	// probCut is ln 2^-90: E = exp(w') is stored as 0 below it.
	probCut = -62.383246
	// maxAux bounds M so that the dropped mass M·ρ·2^-90 stays < 2^-27.
	maxAux = 1 << 31
)

// prior is the empirical prior over clean auxiliary latents together with a
// label channel: everything of Eq 4.11 that depends on ψ only through the
// classifier's outputs on the M auxiliary points.
type prior struct {
	m, d, k   int
	r         []float64 // K×K row-major, r[k*K+y] = R[k][y]
	rf        []float32
	probSpace bool // kernel in probability space (all R > 0, ratio ≤ maxChannelRatio)
	// symmetric: R = flip·11ᵀ + (keep − flip)·I (K-RR), so that Q[k] =
	// flip + (keep − flip)·P[k] and Σ_k R[k][j]·H[k] = flip·Σ_k H[k] +
	// (keep − flip)·H[j]: K instead of K² operations per auxiliary point.
	symmetric  bool
	keep, flip float32
	at         auxT // the raw auxiliary latents, feature-major (d × M)
	blocks     []auxBlock
	amax       []float32 // log space: max_m A[k][m] after the last head
	// q is K×M row-major: Q[k][m] = Σ_y R[k][y]·softmax_ψ(ẑ_m)_y in
	// probability space, A[k][m] = log Q[k][m] in log space.
	q []float32
}

// auxBlock is a block of auxiliary points [m0, m0+cols) with its
// standardised inputs (d × cols) and, between the forward and backward
// passes of one step, its activations and softmax outputs (K × cols).
type auxBlock struct {
	m0, cols int
	amax     []float32 // log space: the block's max_m A[k][m]
	// log space, kept from the head for the gradient (cols × K, per column):
	// softmax, its log, and A = log Q, in float64.
	p64, logp64, a64 []float64
	x                []float32
	acts             *actBuf
	p                []float32
}

// channelIsProbSpace reports whether the probability-space kernel is exact
// to rounding for R (K×K row-major).
func channelIsProbSpace(r []float64, k int) bool {
	for i := range k {
		lo, hi := math.Inf(1), 0.0
		for _, v := range r[i*k : (i+1)*k] {
			lo, hi = min(lo, v), max(hi, v)
		}
		if !(lo >= minChannelEntry) || hi/lo > maxChannelRatio {
			return false
		}
	}
	return true
}

func flatChannel(r [][]float64) []float64 {
	k := len(r)
	f := make([]float64, 0, k*k)
	for _, row := range r {
		f = append(f, row...)
	}
	return f
}

func newPrior(nt *net, std nn.Standardiser, aux [][]float32, r [][]float64) *prior {
	m, d, k := len(aux), len(aux[0]), len(r)
	pr := &prior{m: m, d: d, k: k, r: flatChannel(r), at: newAuxT(aux), q: make([]float32, k*m)}
	pr.rf = make([]float32, len(pr.r))
	for i, v := range pr.r {
		pr.rf[i] = float32(v)
	}
	pr.probSpace = channelIsProbSpace(pr.r, k)
	pr.amax = make([]float32, k)
	pr.symmetric = true
	for i := range k {
		for j := range k {
			if (i == j && r[i][j] != r[0][0]) || (i != j && r[i][j] != r[0][1]) {
				pr.symmetric = false
			}
		}
	}
	pr.keep, pr.flip = float32(r[0][0]), float32(r[0][1])
	for m0 := 0; m0 < m; m0 += auxChunk {
		cols := min(auxChunk, m-m0)
		b := auxBlock{m0: m0, cols: cols, x: make([]float32, d*cols), acts: nt.newActs(cols), p: make([]float32, k*cols),
			amax: make([]float32, k)}
		block(std, b.x, aux, nil, m0, cols)
		pr.blocks = append(pr.blocks, b)
	}
	return pr
}

// head runs the MLP on every auxiliary point and fills q (and each block's
// softmax outputs), in parallel over blocks.
func (pr *prior) head(nt *net, p int) {
	nn.ParallelTasks(p, len(pr.blocks), func(_, t int) {
		b := &pr.blocks[t]
		nt.forward(b.x, b.cols, b.acts)
		if pr.probSpace {
			pr.headProb(b)
		} else {
			pr.headLog(b)
		}
	})
	if !pr.probSpace {
		fill(pr.amax, float32(math.Inf(-1)))
		for _, b := range pr.blocks {
			for i, v := range b.amax {
				pr.amax[i] = max(pr.amax[i], v)
			}
		}
	}
}

// headProb: P = softmax over the K rows of each column (fast exp, flushing
// terms below 2^-126 of the largest), then Q = R·P.
func (pr *prior) headProb(b *auxBlock) {
	k, cols, m := pr.k, b.cols, pr.m
	lg := b.acts.logits()[:k*cols]
	p := b.p[:k*cols]
	mx := make([]float32, cols) // small; one per block and step
	copy(mx, lg[:cols])
	for y := 1; y < k; y++ {
		for c, v := range lg[y*cols : (y+1)*cols] {
			mx[c] = max(mx[c], v)
		}
	}
	sum := make([]float32, cols)
	for y := range k {
		py := p[y*cols : (y+1)*cols]
		for c, v := range lg[y*cols : (y+1)*cols] {
			e := fexpFlush(v - mx[c])
			py[c] = e
			sum[c] += e
		}
	}
	for c := range sum {
		sum[c] = 1 / sum[c]
	}
	for y := range k {
		py := p[y*cols : (y+1)*cols]
		for c := range py {
			py[c] *= sum[c]
		}
	}
	if pr.symmetric {
		g := pr.keep - pr.flip
		for i := range k {
			qi := pr.q[i*m+b.m0 : i*m+b.m0+cols]
			for c, v := range p[i*cols : (i+1)*cols] {
				qi[c] = pr.flip + g*v
			}
		}
		return
	}
	for i := range k {
		qi := pr.q[i*m+b.m0 : i*m+b.m0+cols]
		clear(qi)
		for y := range k {
			if rv := pr.rf[i*k+y]; rv != 0 {
				blas.Saxpy(cols, rv, p[y*cols:(y+1)*cols], 1, qi, 1)
			}
		}
	}
}

// colSoftmax64 writes log softmax and softmax of the logits of column c into
// logp and p (float64).
func colSoftmax64(lg []float32, cols, c int, logp, p []float64) {
	mx := math.Inf(-1)
	for y := range logp {
		logp[y] = float64(lg[y*cols+c])
		mx = max(mx, logp[y])
	}
	s := 0.0
	for y := range logp {
		s += math.Exp(logp[y] - mx)
	}
	ls := mx + math.Log(s)
	for y := range logp {
		logp[y] -= ls
		p[y] = math.Exp(logp[y])
	}
}

// logQ returns A = log Σ_y R[i][y]·p_y in float64, falling back to a
// log-sum-exp over log R + log p when the sum underflows.
func logQ(r []float64, logp, p []float64) float64 {
	q := 0.0
	for y, rv := range r {
		q += rv * p[y]
	}
	if q > 1e-300 {
		return math.Log(q)
	}
	mx := math.Inf(-1)
	for y, rv := range r {
		if rv > 0 {
			mx = max(mx, math.Log(rv)+logp[y])
		}
	}
	if math.IsInf(mx, -1) {
		return mx
	}
	s := 0.0
	for y, rv := range r {
		if rv > 0 {
			s += math.Exp(math.Log(rv) + logp[y] - mx)
		}
	}
	return mx + math.Log(s)
}

// headLog: A[k][m] in float64 per column.
func (pr *prior) headLog(b *auxBlock) {
	k, cols, m := pr.k, b.cols, pr.m
	lg := b.acts.logits()
	if b.p64 == nil {
		b.p64, b.logp64, b.a64 = make([]float64, k*cols), make([]float64, k*cols), make([]float64, k*cols)
	}
	for c := range cols {
		logp, p, a := b.logp64[c*k:(c+1)*k], b.p64[c*k:(c+1)*k], b.a64[c*k:(c+1)*k]
		colSoftmax64(lg, cols, c, logp, p)
		for y := range k {
			b.p[y*cols+c] = float32(p[y])
		}
		for i := range k {
			a[i] = logQ(pr.r[i*k:(i+1)*k], logp, p)
			pr.q[i*m+b.m0+c] = float32(a[i])
		}
	}
	for i := range k {
		b.amax[i] = slices.Max(pr.q[i*m+b.m0 : i*m+b.m0+cols])
	}
}

// mset is one split of privatised points with its ψ-independent terms.
type mset struct {
	n, d   int
	noisy  []float32 // N×d row-major
	labels []int
	invb   float32
	// c[n] = min_m ‖z̃_n − ẑ_m‖₁ (float32 distances, as used in every row),
	// konst[n] = −log M − d·log(2b) − c[n]/b.
	c       []float32
	nearest []int32 // argmin_m ‖z̃_n − ẑ_m‖₁ (where w'_nm = 0)
	konst   []float64
	// tab is the precomputed N×M table (nil: recomputed per row): in
	// probability space E[n][m] = exp(−(‖z̃_n − ẑ_m‖₁ − c[n])/b) (0 below
	// 2^-90), in log space w'[n][m] = −(‖z̃_n − ẑ_m‖₁ − c[n])/b.
	tab []float32
}

// row is point i's privatised latent.
func (s *mset) row(i int) []float32 { return s.noisy[i*s.d : (i+1)*s.d] }

// abs32 is |x| for float32 by clearing the sign bit.
func abs32(x float32) float32 {
	return math.Float32frombits(math.Float32bits(x) &^ (1 << 31))
}

// fromDist turns distances into a table row in place.
func (pr *prior) fromDist(dst []float32, c, invb float32) {
	if pr.probSpace {
		for i, v := range dst {
			x := (c - v) * invb
			if x < probCut {
				dst[i] = 0
			} else {
				dst[i] = fexp(x)
			}
		}
		return
	}
	for i, v := range dst {
		dst[i] = (c - v) * invb
	}
}

const rowsPerTask = 16

// newMset prepares a split: constants, and the table when precompute is set.
func newMset(ctx context.Context, pr *prior, noisy [][]float32, labels []int, b float64, precompute bool, p int) (*mset, error) {
	n, d, m := len(noisy), pr.d, pr.m
	s := &mset{n: n, d: d, noisy: make([]float32, 0, n*d), labels: slices.Clone(labels), invb: float32(1 / b),
		c: make([]float32, n), konst: make([]float64, n), nearest: make([]int32, n)}
	for _, r := range noisy {
		s.noisy = append(s.noisy, r...)
	}
	if precompute {
		s.tab = make([]float32, n*m)
	}
	base := -math.Log(float64(m)) - float64(d)*math.Log(2*b)
	bufs := make([][]float32, p)
	tasks := (n + rowsPerTask - 1) / rowsPerTask
	nn.ParallelTasks(p, tasks, func(w, t int) {
		if ctx.Err() != nil {
			return
		}
		if bufs[w] == nil {
			bufs[w] = make([]float32, auxChunk)
		}
		for i := t * rowsPerTask; i < min(n, (t+1)*rowsPerTask); i++ {
			z := s.row(i)
			var row []float32
			if s.tab != nil {
				row = s.tab[i*m : (i+1)*m]
			}
			// c = min_m ‖z − ẑ_m‖₁ and its first index, block by block.
			c, nearest := float32(math.Inf(1)), 0
			for m0 := 0; m0 < m; m0 += auxChunk {
				cols := min(auxChunk, m-m0)
				dst := bufs[w][:cols]
				if row != nil {
					dst = row[m0 : m0+cols]
				}
				if bm := pr.at.distances(z, m0, cols, dst); bm < c {
					c, nearest = bm, m0+slices.Index(dst, bm)
				}
			}
			s.c[i] = c
			s.nearest[i] = int32(nearest)
			s.konst[i] = base - float64(c)/b
			if row != nil {
				pr.fromDist(row, c, s.invb)
			}
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// rowLoss evaluates log p(ỹ_i, z̃_i) for point i of s (Eq 4.11 in the form
// of the package documentation) and returns it with what point i adds to
// the kernel accumulator of its label, f·v: H[ỹ_i] += E_i/S_i in
// probability space (the responsibilities are r_im = Q[ỹ_i][m]·E_im/S_i),
// G[ỹ_i] += e_i/S_i = r_i in log space, e_i = exp(w'_i + A[ỹ_i] − shift).
// With a table, v is its row (probability space) or buf (log space,
// length M); streamed, v is nil and the caller recomputes E_i or e_i per
// block of auxiliary points (auxT.probAxpy, auxT.logAxpy).
func (pr *prior) rowLoss(s *mset, i int, buf []float32) (logp float64, v []float32, f float64, shift float32) {
	if s.tab == nil {
		var lp, fs [1]float64
		var sh [1]float32
		pr.streamLosses(s, []int{i}, lp[:], fs[:], sh[:])
		return lp[0], nil, fs[0], sh[0]
	}
	m, k := pr.m, s.labels[i]
	tab := s.tab[i*m : (i+1)*m]
	var acc [8]float64
	if pr.probSpace {
		dot8(tab, pr.q[k*m:(k+1)*m], &acc)
		sum := lanes8(&acc)
		return s.konst[i] + math.Log(sum), tab, 1 / sum, 0
	}
	a := pr.q[k*m : (k+1)*m]
	shift = pr.logShift(s, i, tab)
	buf = buf[:m]
	logTableRow(tab, a, shift, buf, &acc)
	sum := lanes8(&acc)
	return s.konst[i] + float64(shift) + math.Log(sum), buf, 1 / sum, shift
}

// logShift is the log-space kernel's shift for point i (tab its table row,
// nil when streamed). One pass suffices when A[k][nearest] (a lower bound
// of max_m s_m, attained where w' = 0) is within 80 of the upper bound
// max_m A[k][m]: then no e_m overflows float32, the nearest term is exactly
// 1 so S ≥ 1, and skipped terms are below 2^-126 of it. Otherwise the shift
// is max_m s_m, which costs a pass of its own.
func (pr *prior) logShift(s *mset, i int, tab []float32) float32 {
	m, k := pr.m, s.labels[i]
	a := pr.q[k*m : (k+1)*m]
	shift := a[s.nearest[i]]
	if pr.amax[k]-shift <= 80 {
		return shift
	}
	if tab == nil {
		return pr.at.logMax(s.row(i), s.c[i], s.invb, a)
	}
	shift = float32(math.Inf(-1))
	for j, w := range tab[:len(a)] {
		shift = max(shift, w+a[j])
	}
	return shift
}

// streamLosses is rowLoss for the rows idx of a split without a table:
// logp, f and the shift of each into lp, f and shift. The sums run block by
// block of auxiliary points with every row of idx inside a block, so that
// the block's latents and Q stay in L1 across the rows; each row's lanes
// still take its terms in order of m, so the result is the table's bit for
// bit.
func (pr *prior) streamLosses(s *mset, idx []int, lp, f []float64, shift []float32) {
	m := pr.m
	var accs [streamGroup][8]float64
	for g0 := 0; g0 < len(idx); g0 += streamGroup {
		rows := idx[g0:min(len(idx), g0+streamGroup)]
		acc := accs[:len(rows)]
		clear(acc)
		if !pr.probSpace {
			for r, i := range rows {
				shift[g0+r] = pr.logShift(s, i, nil)
			}
		}
		for m0 := 0; m0 < m; m0 += auxChunk {
			n := min(auxChunk, m-m0)
			for r, i := range rows {
				k := s.labels[i]
				if pr.probSpace {
					pr.at.probSum(s.row(i), s.c[i], s.invb, pr.q[k*m:(k+1)*m], m0, n, &acc[r])
				} else {
					pr.at.logSum(s.row(i), s.c[i], s.invb, pr.q[k*m:(k+1)*m], shift[g0+r], m0, n, &acc[r])
				}
			}
		}
		for r, i := range rows {
			sum := lanes8(&acc[r])
			if pr.probSpace {
				lp[g0+r] = s.konst[i] + math.Log(sum)
			} else {
				lp[g0+r] = s.konst[i] + float64(shift[g0+r]) + math.Log(sum)
			}
			f[g0+r] = 1 / sum
		}
	}
}

// streamGroup is the number of rows streamLosses takes through each block.
const streamGroup = 8

// dlogits writes into dl (K × cols) the gradient of the step's loss
// −(1/B)·Σ_n log p(ỹ_n, z̃_n) with respect to block b's logits, given the
// block's summed kernel accumulators hs (K × cols: H in probability space,
// G in log space). With G[k][m] = Σ_{n: ỹ_n = k} r_nm and p = softmax(logits):
//
//	∂loss/∂logit_j(m) = (p_j/B)·(Σ_k G[k][m] − Σ_k R[k][j]·G[k][m]/Q[k][m])
//
// where G/Q = H in probability space. tot is scratch of length 2·cols.
func (pr *prior) dlogits(b *auxBlock, hs, dl, tot []float32, invB float64) {
	k, cols, m := pr.k, b.cols, pr.m
	if pr.probSpace {
		tot = tot[:cols]
		clear(tot)
		for i := range k {
			qi := pr.q[i*m+b.m0 : i*m+b.m0+cols]
			for c, h := range hs[i*cols : (i+1)*cols] {
				tot[c] += qi[c] * h
			}
		}
		ib := float32(invB)
		var hsum []float32
		if pr.symmetric {
			hsum = tot[cols : 2*cols]
			copy(hsum, hs[:cols])
			for i := 1; i < k; i++ {
				blas.Saxpy(cols, 1, hs[i*cols:(i+1)*cols], 1, hsum, 1)
			}
		}
		for j := range k {
			dj := dl[j*cols : (j+1)*cols]
			if pr.symmetric {
				g := pr.keep - pr.flip
				for c, h := range hs[j*cols : (j+1)*cols] {
					dj[c] = pr.flip*hsum[c] + g*h
				}
			} else {
				clear(dj)
				for i := range k {
					if rv := pr.rf[i*k+j]; rv != 0 {
						blas.Saxpy(cols, rv, hs[i*cols:(i+1)*cols], 1, dj, 1)
					}
				}
			}
			pj := b.p[j*cols : (j+1)*cols]
			for c, u := range dj {
				dj[c] = pj[c] * (tot[c] - u) * ib
			}
		}
		return
	}
	u := make([]float64, k)
	for c := range cols {
		logp, p, a := b.logp64[c*k:(c+1)*k], b.p64[c*k:(c+1)*k], b.a64[c*k:(c+1)*k]
		clear(u)
		t := 0.0
		for i := range k {
			g := float64(hs[i*cols+c])
			if g == 0 {
				continue
			}
			t += g
			ri := pr.r[i*k : (i+1)*k]
			if a[i] > -690 { // Q = e^A ≥ 1e-300: ratios in probability space
				f := g * math.Exp(-a[i])
				for j, rv := range ri {
					u[j] += f * rv * p[j]
				}
			} else {
				for j, rv := range ri {
					if rv > 0 {
						u[j] += g * rv * math.Exp(logp[j]-a[i])
					}
				}
			}
		}
		for j := range k {
			dl[j*cols+c] = float32((p[j]*t - u[j]) * invB)
		}
	}
}
