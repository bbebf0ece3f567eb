package nn

import "math"

// Standardiser maps a row x to (x − Mean)/Std per feature: what a model whose inputs have arbitrary
// units (tabular data, latents) trains on.
type Standardiser struct {
	Mean, Std []float32
}

// FitStandardiser fits each of the d features' mean and population standard deviation over rows,
// accumulated in float64. A feature whose deviation is 0, too small to divide by, or infinite gets
// Std 1.
func FitStandardiser(rows [][]float32, d int) Standardiser {
	s := Standardiser{Mean: make([]float32, d), Std: make([]float32, d)}
	mean, sq := make([]float64, d), make([]float64, d)
	for _, r := range rows {
		for j, v := range r[:d] {
			mean[j] += float64(v)
		}
	}
	n := float64(len(rows))
	for j := range mean {
		mean[j] /= n
	}
	for _, r := range rows {
		for j, v := range r[:d] {
			dv := float64(v) - mean[j]
			sq[j] += dv * dv
		}
	}
	for j := range mean {
		sd := math.Sqrt(sq[j] / n)
		if !(sd > 1e-12*max(1, math.Abs(mean[j]))) || math.IsInf(sd, 0) {
			sd = 1
		}
		s.Mean[j], s.Std[j] = float32(mean[j]), float32(sd)
	}
	return s
}

// Apply standardises flat, rows of len(s.Mean) values end to end, in place.
func (s Standardiser) Apply(flat []float32) {
	d := len(s.Mean)
	for i := range flat {
		j := i % d
		flat[i] = (flat[i] - s.Mean[j]) / s.Std[j]
	}
}
