package clm

import (
	"math"
	"math/rand/v2"
)

// augmenter draws random views of rows (Config's image or tabular views). It reads the rows it was
// built on (the tabular views draw replacement values from them) and writes a view into dst.
type augmenter interface {
	view(r *rand.Rand, row, dst []float32)
}

// newAugmenter returns c's augmenter (c resolved) for the rows.
func newAugmenter(c Config, rows [][]float32) augmenter {
	lo, hi := rows[0][0], rows[0][0]
	for _, x := range rows {
		for _, v := range x {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	if c.Augment == AugmentImage {
		return imageViews{h: c.ImageShape[0], w: c.ImageShape[1], ch: c.ImageShape[2], pad: c.CropPad, flip: *c.Flip,
			jitter: float32(c.Jitter), lo: lo, hi: hi}
	}
	n := len(rows[0])
	std := make([]float32, n)
	mean := make([]float64, n)
	for _, x := range rows {
		for j, v := range x {
			mean[j] += float64(v)
		}
	}
	for j := range mean {
		mean[j] /= float64(len(rows))
	}
	for j := range n {
		s := 0.0
		for _, x := range rows {
			d := float64(x[j]) - mean[j]
			s += d * d
		}
		std[j] = float32(c.NoiseStd) * float32(math.Sqrt(s/float64(len(rows))))
	}
	return tabularViews{rows: rows, mask: c.MaskRate, noise: std}
}

// imageViews: a random crop of the image padded with its edge values (a shift of up to pad pixels each
// way), a horizontal flip, then brightness (a factor on every value) and contrast (a factor on the
// distance to the image's mean) jitter, each with probability 0.8, the result clipped to the rows'
// value range [lo, hi]. Images are row-major, channels last.
type imageViews struct {
	h, w, ch, pad int
	flip          bool
	jitter        float32
	lo, hi        float32
}

func (a imageViews) view(r *rand.Rand, row, dst []float32) {
	dy, dx := r.IntN(2*a.pad+1)-a.pad, r.IntN(2*a.pad+1)-a.pad
	flip := a.flip && r.IntN(2) == 1
	for y := range a.h {
		sy := min(a.h-1, max(0, y+dy))
		for x := range a.w {
			sx := x + dx
			if flip {
				sx = a.w - 1 - x + dx
			}
			sx = min(a.w-1, max(0, sx))
			copy(dst[(y*a.w+x)*a.ch:(y*a.w+x+1)*a.ch], row[(sy*a.w+sx)*a.ch:(sy*a.w+sx+1)*a.ch])
		}
	}
	if a.jitter > 0 && r.Float64() < 0.8 {
		f := 1 + a.jitter*(2*r.Float32()-1)
		for i := range dst {
			dst[i] *= f
		}
	}
	if a.jitter > 0 && r.Float64() < 0.8 {
		f := 1 + a.jitter*(2*r.Float32()-1)
		var m float32
		for _, v := range dst {
			m += v
		}
		m /= float32(len(dst))
		for i := range dst {
			dst[i] = m + f*(dst[i]-m)
		}
	}
	for i, v := range dst {
		dst[i] = min(a.hi, max(a.lo, v))
	}
}

// tabularViews (SCARF): each feature replaced with probability mask by the same feature of a random
// row, then Gaussian noise of standard deviation noise[j] added to feature j.
type tabularViews struct {
	rows  [][]float32
	mask  float64
	noise []float32
}

func (a tabularViews) view(r *rand.Rand, row, dst []float32) {
	for j, v := range row {
		if a.mask > 0 && r.Float64() < a.mask {
			v = a.rows[r.IntN(len(a.rows))][j]
		}
		if a.noise[j] > 0 {
			v += a.noise[j] * float32(r.NormFloat64())
		}
		dst[j] = v
	}
}
