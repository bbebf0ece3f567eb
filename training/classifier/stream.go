package classifier

import "math"

// Streamed kernel of the marginal objective.
//
// Without the N×M table, every step recomputes the E (or e) values of its
// rows twice: once over all M auxiliary points for S_n, once per block of
// auxiliary points to add E/S_n to the accumulator. The functions below do
// either for one privatised row z against the auxiliary points [m0, m0+n)
// in one pass: distances, exponential and the sum or axpy, with nothing
// stored but the result. The assembly versions (stream_amd64.s) take eight
// auxiliary points per vector (never features: each pair's distance is the
// same chain of float32 roundings as dist's) and match these bit for bit.
//
// Sums over m go into eight float64 lanes, lane m mod 8, reduced by
// lanes8: the one order in which both the table and the streamed path add,
// so the two give identical results (TestTableAndRecomputeAgree).

// auxT is the auxiliary latents feature-major (d × M, row j holds every
// point's feature j), so eight consecutive points' feature j is one load.
type auxT struct {
	d, m int
	x    []float32
}

// newAuxT transposes the rows (M rows of d values).
func newAuxT(rows [][]float32) auxT {
	m, d := len(rows), len(rows[0])
	t := auxT{d: d, m: m, x: make([]float32, d*m)}
	for i, row := range rows {
		for j, v := range row {
			t.x[j*m+i] = v
		}
	}
	return t
}

// distAt is ‖z − ẑ_i‖₁ with the features summed in order, as dist computes it.
func (a auxT) distAt(z []float32, i int) float32 {
	s := abs32(z[0] - a.x[i])
	for j := 1; j < len(z); j++ {
		s += abs32(z[j] - a.x[j*a.m+i])
	}
	return s
}

// distances writes ‖z − ẑ_i‖₁ for i in [m0, m0+n) into dst[:n] (m0 a
// multiple of 8) and returns their minimum.
func (a auxT) distances(z []float32, m0, n int, dst []float32) float32 {
	a.checkBlock(z, m0, n)
	dst = dst[:n]
	mn := float32(math.Inf(1))
	i := 0
	if useAVX2 && n >= 8 {
		i = n &^ 7
		mn = distMinAVX2(&a.x[m0], a.m, &z[0], a.d, &dst[0], i)
	}
	for ; i < n; i++ {
		v := a.distAt(z, m0+i)
		dst[i] = v
		mn = min(mn, v)
	}
	return mn
}

// probE is E = exp(−(‖z − ẑ_i‖₁ − c)/b), 0 below 2^-90, as fromDist computes it.
func (a auxT) probE(z []float32, c, invb float32, i int) float32 {
	x := (c - a.distAt(z, i)) * invb
	if x < probCut {
		return 0
	}
	return fexp(x)
}

// logE is e = exp(w' + A − shift), w' = −(‖z − ẑ_i‖₁ − c)/b, as rowLoss
// computes it from a table row (the explicit conversion rounds w' to
// float32 as the table does, and forbids fusing it with the addition).
func (a auxT) logE(z []float32, c, invb float32, ai, shift float32, i int) float32 {
	w := float32((c - a.distAt(z, i)) * invb)
	return fexpFlush(w + ai - shift)
}

// lanes8 reduces the eight lanes in a fixed order.
func lanes8(acc *[8]float64) float64 {
	return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]))
}

// checkBlock panics unless [m0, m0+n) is a block the kernels may read
// (the assembly reads memory unchecked).
func (a auxT) checkBlock(z []float32, m0, n int, vecs ...[]float32) {
	if len(z) != a.d || a.d == 0 || m0 < 0 || m0%8 != 0 || n < 0 || m0+n > a.m || len(a.x) != a.d*a.m {
		panic("classifier: bad kernel block")
	}
	for _, v := range vecs {
		if len(v) < m0+n {
			panic("classifier: kernel vector too short")
		}
	}
}

// probSum adds E_i·q[i] to lane i mod 8 of acc for i in [m0, m0+n) (m0 a
// multiple of 8).
func (a auxT) probSum(z []float32, c, invb float32, q []float32, m0, n int, acc *[8]float64) {
	a.checkBlock(z, m0, n, q)
	i := m0
	if useAVX2 && n >= 8 {
		v := n &^ 7
		probSumAVX2(&a.x[m0], a.m, &z[0], a.d, c, invb, &q[m0], v, acc)
		i += v
	}
	for ; i < m0+n; i++ {
		acc[i&7] += float64(a.probE(z, c, invb, i)) * float64(q[i])
	}
}

// probAxpy adds f·E_i to h[i] for i in [m0, m0+n).
func (a auxT) probAxpy(z []float32, c, invb, f float32, h []float32, m0, n int) {
	a.checkBlock(z, m0, n, h)
	i := m0
	if useAVX2 && n >= 8 {
		v := n &^ 7
		probAxpyAVX2(&a.x[m0], a.m, &z[0], a.d, c, invb, f, &h[m0], v)
		i += v
	}
	for ; i < m0+n; i++ {
		h[i] += f * a.probE(z, c, invb, i)
	}
}

// logSum adds e_i to lane i mod 8 of acc for i in [m0, m0+n), with the
// label's A in av.
func (a auxT) logSum(z []float32, c, invb float32, av []float32, shift float32, m0, n int, acc *[8]float64) {
	a.checkBlock(z, m0, n, av)
	i := m0
	if useAVX2 && n >= 8 {
		v := n &^ 7
		logSumAVX2(&a.x[m0], a.m, &z[0], a.d, c, invb, &av[m0], shift, v, acc)
		i += v
	}
	for ; i < m0+n; i++ {
		acc[i&7] += float64(a.logE(z, c, invb, av[i], shift, i))
	}
}

// logAxpy adds f·e_i to h[i] for i in [m0, m0+n).
func (a auxT) logAxpy(z []float32, c, invb float32, av []float32, shift, f float32, h []float32, m0, n int) {
	a.checkBlock(z, m0, n, av, h)
	i := m0
	if useAVX2 && n >= 8 {
		v := n &^ 7
		logAxpyAVX2(&a.x[m0], a.m, &z[0], a.d, c, invb, &av[m0], shift, f, &h[m0], v)
		i += v
	}
	for ; i < m0+n; i++ {
		h[i] += f * a.logE(z, c, invb, av[i], shift, i)
	}
}

// logMax is max_i (w'_i + A_i) over all points: the log-space shift when
// the one-pass bound does not hold (rare; not vectorised).
func (a auxT) logMax(z []float32, c, invb float32, av []float32) float32 {
	mx := float32(math.Inf(-1))
	for i := range a.m {
		mx = max(mx, float32((c-a.distAt(z, i))*invb)+av[i])
	}
	return mx
}

// logTableRow is the log-space kernel on a table row w (w' of every
// auxiliary point): it writes e_i = exp(w'_i + A_i − shift), 0 below expMin,
// into dst and adds each to lane i mod 8 of acc.
func logTableRow(w, av []float32, shift float32, dst []float32, acc *[8]float64) {
	n := len(w)
	av, dst = av[:n], dst[:n]
	i := 0
	if useAVX2 && n >= 8 {
		i = n &^ 7
		logTableAVX2(&w[0], &av[0], shift, &dst[0], i, acc)
	}
	for ; i < n; i++ {
		dst[i] = fexpFlush(w[i] + av[i] - shift)
		acc[i&7] += float64(dst[i])
	}
}

// dot8 adds x[i]·y[i] to lane i mod 8 of acc: the table path's S_n (and,
// with y all ones, its log-space sum), in the streamed path's order.
func dot8(x, y []float32, acc *[8]float64) {
	n := len(x)
	y = y[:n]
	i := 0
	if useAVX2 && n >= 8 {
		i = n &^ 7
		dot8AVX2(&x[0], &y[0], i, acc)
	}
	for ; i < n; i++ {
		acc[i&7] += float64(x[i]) * float64(y[i])
	}
}
