package graph

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	G "gorgonia.org/gorgonia"

	"github.com/ldpsql/ldpsql/training/nn"
)

// AddClipped is DP-SGD's clipped gradient sum for a stack of dense layers, after a run of their graph:
// layerIn[l] is layer l's input X (gbs rows) and zGrad[l] the loss's gradient Δ at its pre-activation (a
// DenseProbed probe's), row r's own when the rows are independent in the loss. Row r's gradient has norm²
// Σ_l (‖x_r‖² + 1)·‖δ_r‖²; with c_r = min(1, clip/‖g_r‖) it adds Xᵀ·diag(c)·Δ to grads[2l] (W, in×out)
// and Σ_r c_r δ_r to grads[2l+1] (b), over the first k rows. norms (gbs) and scaled are scratch.
func AddClipped(layerIn, zGrad []*G.Node, gbs, k int, clip float64, norms []float64, scaled *[]float32, grads [][]float32) error {
	xs, ds := make([][]float32, len(layerIn)), make([][]float32, len(layerIn))
	clear(norms)
	for l := range layerIn {
		var err error
		if xs[l], err = F32s(layerIn[l].Value()); err != nil {
			return fmt.Errorf("layer %d input: %w", l, err)
		}
		if ds[l], err = F32s(zGrad[l].Value()); err != nil {
			return fmt.Errorf("layer %d gradient: %w", l, err)
		}
		din, dout := len(xs[l])/gbs, len(ds[l])/gbs
		for r := range k {
			xx, gg := 1.0, 0.0
			for _, v := range xs[l][r*din : (r+1)*din] {
				xx += float64(v) * float64(v)
			}
			for _, v := range ds[l][r*dout : (r+1)*dout] {
				gg += float64(v) * float64(v)
			}
			norms[r] += xx * gg
		}
	}
	c := make([]float32, k)
	for r := range k {
		c[r] = 1
		if nr := math.Sqrt(norms[r]); nr > clip {
			c[r] = float32(clip / nr)
		}
	}
	for l := range layerIn {
		din, dout := len(xs[l])/gbs, len(ds[l])/gbs
		*scaled = append((*scaled)[:0], ds[l][:k*dout]...)
		sc := *scaled
		gb := grads[2*l+1]
		for r := range k {
			row := sc[r*dout : (r+1)*dout]
			for j := range row {
				row[j] *= c[r]
				gb[j] += row[j]
			}
		}
		if k == 0 {
			continue
		}
		// W's gradient (din × dout) += Xᵀ·(c∘Δ), over the k rows.
		blas32.Gemm(blas.Trans, blas.NoTrans, 1,
			blas32.General{Rows: k, Cols: din, Stride: din, Data: xs[l][:k*din]},
			blas32.General{Rows: k, Cols: dout, Stride: dout, Data: sc},
			1, blas32.General{Rows: din, Cols: dout, Stride: dout, Data: grads[2*l]})
	}
	return nil
}

// DPGradient forms the privatised gradient of one DP-SGD step through a graph of dense layers, the part
// of the step every model trained under CDP shares.
type DPGradient struct {
	D    *nn.DPSGD
	Rows int // the graph's rows per run (D.ChunkRows())
	VM   G.VM
	// Loss is the graph's loss (a float32 scalar summed over the run's rows); LayerIn and ZGrad are
	// AddClipped's.
	Loss           *G.Node
	LayerIn, ZGrad []*G.Node

	norms   []float64
	scaled  []float32
	sampled []int
}

// Step draws the step's Poisson sample (D.Sample) and runs it through the graph in chunks of Rows rows
// (one empty chunk when no row was sampled): load fills the graph's inputs for a chunk, padding the rows
// after it with weight 0, before each run; each chunk's per-example gradients, clipped to D.Clip, are
// added to grads (cleared first; AddClipped), and D.Privatise adds the noise and averages. It returns
// the mean loss per sampled row. An error of load or of the graph is returned (the VM reset).
func (g *DPGradient) Step(grads [][]float32, load func(chunk []int) error) (float64, error) {
	if g.norms == nil {
		g.norms = make([]float64, g.Rows)
	}
	g.sampled = g.D.Sample(g.sampled[:0])
	for _, gr := range grads {
		clear(gr)
	}
	lossSum := 0.0
	for lo := 0; lo == 0 || lo < len(g.sampled); lo += g.Rows {
		chunk := g.sampled[lo:min(len(g.sampled), lo+g.Rows)]
		if err := load(chunk); err != nil {
			return 0, err
		}
		if err := g.VM.RunAll(); err != nil {
			g.VM.Reset()
			return 0, err
		}
		lossSum += float64(g.Loss.Value().Data().(float32))
		err := AddClipped(g.LayerIn, g.ZGrad, g.Rows, len(chunk), g.D.Clip, g.norms, &g.scaled, grads)
		g.VM.Reset()
		if err != nil {
			return 0, err
		}
	}
	g.D.Privatise(grads)
	return lossSum / max(1, float64(len(g.sampled))), nil
}
