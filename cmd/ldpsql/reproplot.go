package main

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// reproPlot draws test accuracy against ε, one line per mechanism with ± 1 std error bars (none for one
// trial, which has no error estimate: the title says so); ε = ∞ is drawn as a separate point at the
// right, past a gap.
func reproPlot(cfg reproConfig, res reproResults) ([]byte, error) {
	p := plot.New()
	p.Title.Text = cfg.exp.title
	p.X.Label.Text = "total ε (λ = 0.7)"
	if cfg.trials == 1 {
		p.Title.Text += " (1 trial: no error bars)"
	} else {
		p.Title.Text += fmt.Sprintf(" (mean ± std of %d trials)", cfg.trials)
	}
	p.Y.Label.Text = "test accuracy (%)"
	p.Y.Min, p.Y.Max = 0, 100
	p.Add(plotter.NewGrid())

	var finite []float64
	for _, e := range cfg.eps {
		if !math.IsInf(e, 1) {
			finite = append(finite, e)
		}
	}
	maxFinite := 1.0
	if len(finite) > 0 {
		maxFinite = finite[len(finite)-1]
	}
	infX := maxFinite + math.Max(2, maxFinite/5)
	xOf := func(e float64) float64 {
		if math.IsInf(e, 1) {
			return infX
		}
		return e
	}
	colours := []color.Color{
		color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
		color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
		color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
		color.RGBA{R: 0xe3, G: 0x77, B: 0xc2, A: 0xff}, color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff},
	}
	for i, m := range cfg.mechs {
		var line plotter.XYs
		var errs plotter.YErrors
		var inf plotter.XYs
		for _, e := range cfg.eps {
			xs := res[m][epsName(e)]
			if len(xs) == 0 {
				continue
			}
			mean, std := meanStd(xs)
			pt := plotter.XY{X: xOf(e), Y: 100 * mean}
			if math.IsInf(e, 1) {
				inf = append(inf, pt)
				continue
			}
			line = append(line, pt)
			errs = append(errs, struct{ Low, High float64 }{100 * std, 100 * std})
		}
		col := colours[i%len(colours)]
		if cfg.trials == 1 {
			errs = nil
		}
		if len(line) > 0 {
			l, s, err := plotter.NewLinePoints(line)
			if err != nil {
				return nil, err
			}
			l.Color, s.Color = col, col
			s.Shape = draw.CircleGlyph{}
			p.Add(l, s)
			p.Legend.Add(mechTitles[m], l, s)
			if errs != nil {
				eb, err := plotter.NewYErrorBars(struct {
					plotter.XYer
					plotter.YErrorer
				}{line, errs})
				if err != nil {
					return nil, err
				}
				eb.Color = col
				p.Add(eb)
			}
		}
		if len(inf) > 0 {
			s, err := plotter.NewScatter(inf)
			if err != nil {
				return nil, err
			}
			s.Color, s.Shape = col, draw.SquareGlyph{}
			p.Add(s)
		}
	}
	var ticks []plot.Tick
	for _, e := range cfg.eps {
		label := strconv.FormatFloat(e, 'g', -1, 64)
		if math.IsInf(e, 1) {
			label = "∞"
		}
		ticks = append(ticks, plot.Tick{Value: xOf(e), Label: label})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = 0, infX+1
	p.Legend.Top, p.Legend.Left = true, true
	w, err := p.WriterTo(8*vg.Inch, 5*vg.Inch, "png")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
