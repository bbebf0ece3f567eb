package graph

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	G "gorgonia.org/gorgonia"
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
