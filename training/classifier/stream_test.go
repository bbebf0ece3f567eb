package classifier

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// streamCase is random auxiliary points around z, some at distance 0
// (E = 1), some far (E = 0) and the rest spread so that the arguments of the
// exponential cross both cut-offs (probCut, expMin).
func streamCase(r *rand.Rand, m, d int, spread float64) (auxT, []float32) {
	z := make([]float32, d)
	for j := range z {
		z[j] = float32(r.NormFloat64())
	}
	aux := make([][]float32, m)
	for i := range aux {
		aux[i] = make([]float32, d)
		for j := range d {
			switch {
			case i%7 == 3:
				aux[i][j] = z[j]
			case i%11 == 5:
				aux[i][j] = z[j] + 1e6
			default:
				aux[i][j] = z[j] + float32(spread*r.NormFloat64())
			}
		}
	}
	return newAuxT(aux), z
}

func randVec(r *rand.Rand, n int, lo, hi float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(lo + (hi-lo)*r.Float64())
	}
	return v
}

func sameLanes(a, b *[8]float64) bool {
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// TestStreamKernelsMatchReference: the kernels (assembly where the CPU has
// AVX2) give bit for bit the pure-Go reference, whatever d, block start and
// length (tails of fewer than 8 points run in Go), across both cut-offs.
func TestStreamKernelsMatchReference(t *testing.T) {
	t.Logf("AVX2 kernels: %v", useAVX2)
	r := rand.New(rand.NewPCG(7, 11))
	for _, d := range []int{1, 2, 3, 8, 13} {
		for _, m := range []int{8, 37, 1029} {
			for _, invb := range []float32{0.3, 4, 60} {
				at, z := streamCase(r, m, d, 2)
				c := float32(math.Inf(1))
				for i := range m {
					c = min(c, at.distAt(z, i))
				}
				q := randVec(r, m, 1e-3, 1)
				av := randVec(r, m, -60, 0)
				av[m/2] = float32(math.Inf(-1)) // a class of zero probability
				shift := av[0]
				f := float32(r.Float64() + 0.5)
				for _, blk := range [][2]int{{0, m}, {0, m &^ 7}, {8, m - 8}, {0, 5}, {m &^ 7, m - m&^7}} {
					m0, n := blk[0], blk[1]
					if n < 0 || m0+n > m {
						continue
					}
					dst := make([]float32, n)
					mn := at.distances(z, m0, n, dst)
					wantMin := float32(math.Inf(1))
					for i := range n {
						v := at.distAt(z, m0+i)
						if math.Float32bits(dst[i]) != math.Float32bits(v) {
							t.Fatalf("d=%d m=%d [%d,+%d): distance %d = %v, reference %v", d, m, m0, n, i, dst[i], v)
						}
						wantMin = min(wantMin, v)
					}
					if mn != wantMin {
						t.Fatalf("d=%d m=%d [%d,+%d): minimum distance %v, reference %v", d, m, m0, n, mn, wantMin)
					}
					var got, want [8]float64
					got[1], want[1] = 0.25, 0.25 // the kernels add to what is there
					at.probSum(z, c, invb, q, m0, n, &got)
					for i := m0; i < m0+n; i++ {
						want[i&7] += float64(at.probE(z, c, invb, i)) * float64(q[i])
					}
					if !sameLanes(&got, &want) {
						t.Fatalf("d=%d m=%d 1/b=%v [%d,+%d): probSum %v, reference %v", d, m, invb, m0, n, got, want)
					}
					got, want = [8]float64{}, [8]float64{}
					at.logSum(z, c, invb, av, shift, m0, n, &got)
					for i := m0; i < m0+n; i++ {
						want[i&7] += float64(at.logE(z, c, invb, av[i], shift, i))
					}
					if !sameLanes(&got, &want) {
						t.Fatalf("d=%d m=%d 1/b=%v [%d,+%d): logSum %v, reference %v", d, m, invb, m0, n, got, want)
					}
					// The log-space kernel on a table row of the same points.
					w := make([]float32, n)
					for i := range w {
						w[i] = float32((c - at.distAt(z, m0+i)) * invb)
					}
					e := make([]float32, n)
					got, want = [8]float64{}, [8]float64{}
					logTableRow(w, av[m0:m0+n], shift, e, &got)
					for i := range n {
						v := fexpFlush(w[i] + av[m0+i] - shift)
						if math.Float32bits(e[i]) != math.Float32bits(v) {
							t.Fatalf("d=%d m=%d [%d,+%d): logTableRow e[%d] = %v, reference %v", d, m, m0, n, i, e[i], v)
						}
						want[i&7] += float64(v)
					}
					if !sameLanes(&got, &want) {
						t.Fatalf("d=%d m=%d [%d,+%d): logTableRow sums %v, reference %v", d, m, m0, n, got, want)
					}
					h := randVec(r, m, 0, 1)
					hw := append([]float32(nil), h...)
					at.probAxpy(z, c, invb, f, h, m0, n)
					for i := m0; i < m0+n; i++ {
						hw[i] += f * at.probE(z, c, invb, i)
					}
					for i := range h {
						if math.Float32bits(h[i]) != math.Float32bits(hw[i]) {
							t.Fatalf("d=%d m=%d 1/b=%v [%d,+%d): probAxpy[%d] = %v, reference %v", d, m, invb, m0, n, i, h[i], hw[i])
						}
					}
					at.logAxpy(z, c, invb, av, shift, f, h, m0, n)
					for i := m0; i < m0+n; i++ {
						hw[i] += f * at.logE(z, c, invb, av[i], shift, i)
					}
					for i := range h {
						if math.Float32bits(h[i]) != math.Float32bits(hw[i]) {
							t.Fatalf("d=%d m=%d 1/b=%v [%d,+%d): logAxpy[%d] = %v, reference %v", d, m, invb, m0, n, i, h[i], hw[i])
						}
					}
				}
			}
		}
	}
}

// TestStreamKernelsCutOffs: E is exactly 0 below probCut and e exactly 0
// below expMin, 1 at distance c, and fexp's value just above both; the
// kernels see every argument through the same float32 operations as the
// table (fromDist), checked here on arguments placed at the cut-offs.
func TestStreamKernelsCutOffs(t *testing.T) {
	const m = 8 // one vector: every lane holds one term
	for _, x := range []float32{0, -1e-30, probCut, nextDown(probCut), nextUp(probCut), expMin, nextDown(expMin), nextUp(expMin), -200, -1e30} {
		// d = 1, z = 0, c = 0, 1/b = 1: the argument is −|ẑ|, exactly.
		aux := make([][]float32, m)
		for i := range aux {
			aux[i] = []float32{-x}
		}
		at := newAuxT(aux)
		z := []float32{0}
		var acc [8]float64
		q := make([]float32, m)
		for i := range q {
			q[i] = 1
		}
		at.probSum(z, 0, 1, q, 0, m, &acc)
		want := 0.0
		if x >= probCut {
			want = float64(fexp(x))
		}
		if acc[0] != want || acc[7] != want {
			t.Errorf("E at argument %v: %v, want %v", x, acc[0], want)
		}
		dst := []float32{at.distAt(z, 0)}
		newPriorForCut().fromDist(dst, 0, 1)
		if float64(dst[0]) != want {
			t.Errorf("table E at argument %v: %v, want %v", x, dst[0], want)
		}
		acc = [8]float64{}
		at.logSum(z, 0, 1, q, 1, 0, m, &acc) // argument x + 1 − 1
		want = 0
		if x+1-1 >= expMin {
			want = float64(fexp(x + 1 - 1))
		}
		if acc[3] != want {
			t.Errorf("e at argument %v: %v, want %v", x, acc[3], want)
		}
	}
}

func newPriorForCut() *prior { return &prior{probSpace: true} }

func nextUp(x float32) float32   { return math.Nextafter32(x, float32(math.Inf(1))) }
func nextDown(x float32) float32 { return math.Nextafter32(x, float32(math.Inf(-1))) }

// TestDot8: the table path's lane sum matches the reference order.
func TestDot8(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 7, 8, 9, 64, 1001} {
		x, y := randVec(r, n, -1, 1), randVec(r, n, 0, 1)
		var got, want [8]float64
		dot8(x, y, &got)
		for i := range n {
			want[i&7] += float64(x[i]) * float64(y[i])
		}
		if !sameLanes(&got, &want) {
			t.Fatalf("n=%d: dot8 %v, reference %v", n, got, want)
		}
	}
}

// TestStreamedMemoryBounded: without a table, preparing the split and a
// training step allocate memory of the order of the auxiliary points
// (K×M accumulators, the MLP's activations, d×M latents) and the rows, not
// N×M: here under a tenth of the 4·N·M = 320 MB a table would take.
func TestStreamedMemoryBounded(t *testing.T) {
	const n, m, d, k = 4000, 20000, 8, 10
	aux, noisy, labels := tinyMarginal(3, m, n, d, k, 1)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	tr, nt, _ := newTestMarginal(t, aux, noisy, labels, 1, KRRMatrix(2, k), []int{50}, -1)
	grad := make([]float64, len(nt.params))
	tr.lossGrad(nt, allRows(128), grad)
	runtime.ReadMemStats(&after)
	if tr.train.tab != nil {
		t.Fatal("a table was built with a negative budget")
	}
	got, table := after.TotalAlloc-before.TotalAlloc, uint64(4*n*m)
	t.Logf("allocated %.1f MB for the streamed split and one step (a table: %.0f MB)", float64(got)/1e6, float64(table)/1e6)
	if got > table/10 {
		t.Errorf("allocated %d bytes, more than a tenth of the %d-byte table", got, table)
	}
}
