package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/ldpsql/ldpsql/training/taskaware"
)

// synthSetting is one of the task-aware paper's Fig. 3 settings: n = 4, L = I, Assumption 1, the
// eigenvalues λ of PᵀP; the privacy-agnostic baseline keeps Z = 2 equal scales.
type synthSetting struct {
	Name   string    `json:"name"`
	Lambda []float64 `json:"lambda"`
}

var synthSettings = []synthSetting{
	{"setting 1", []float64{4, 0, 0, 0}},
	{"setting 2", []float64{4, 1, 1, 1}},
	{"setting 3", []float64{4, 2, 2, 2}},
}

// synthRow is one (setting, r/ε) cell: the losses of eqs. 13, 58 and 59 with c = 8(r/ε)².
type synthRow struct {
	Setting         string  `json:"setting"`
	ROverEps        float64 `json:"r_over_eps"`
	C               float64 `json:"c"`
	TaskAware       float64 `json:"task_aware"`
	ZPrime          int     `json:"z_prime"`
	TaskAgnostic    float64 `json:"task_agnostic"`
	PrivacyAgnostic float64 `json:"privacy_agnostic"`
}

// reproSynthetic writes the closed-form Fig. 3 values (the package's formulas, which its tests check
// against hand-derived closed forms to 1e-12) as results.md and results.json.
func reproSynthetic(out string, stdout io.Writer) error {
	var rows []synthRow
	for _, s := range synthSettings {
		for _, r := range []float64{0.05, 0.1, 0.25, 0.5, 1} {
			c := 8 * r * r
			ta, z := taskaware.LossTaskAware(s.Lambda, c)
			rows = append(rows, synthRow{s.Name, r, c, ta, z, taskaware.LossTaskAgnostic(s.Lambda, c), taskaware.LossPrivacyAgnostic(s.Lambda, c, 2)})
		}
	}
	var b strings.Builder
	b.WriteString("# Task-aware closed forms: the paper's Fig. 3 settings\n\n")
	b.WriteString("n = 4, L = I, Assumption 1 with c = 8(r/ε)²; task-aware eq. 13 (Z′ from eq. 12), task-agnostic eq. 58, privacy-agnostic eq. 59 with Z = 2. " +
		"Exact values of the formulas, which match the spec's reference table to its 4 decimals.\n\n")
	b.WriteString("| setting | λ | r/ε | c | task-aware | Z′ | task-agnostic | privacy-agnostic |\n|---|---|---|---|---|---|---|---|\n")
	for i, r := range rows {
		fmt.Fprintf(&b, "| %s | %v | %g | %.4g | %.4f | %d | %.4f | %.4f |\n", r.Setting, synthSettings[i/5].Lambda, r.ROverEps, r.C, r.TaskAware, r.ZPrime, r.TaskAgnostic, r.PrivacyAgnostic)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(map[string]any{"settings": synthSettings, "rows": rows}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "results.json"), raw, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "results.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	png, err := synthPlot()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "loss.png"), png, 0o644); err != nil {
		return err
	}
	fmt.Fprint(stdout, b.String())
	fmt.Fprintf(stdout, "\nwrote %s, %s and %s\n", filepath.Join(out, "results.md"), filepath.Join(out, "results.json"), filepath.Join(out, "loss.png"))
	return nil
}

// synthPlot draws the three settings' losses against r/ε ∈ (0, 1], as the paper's Fig. 3 does in three
// panels: here one plot, a colour per setting, solid task-aware, dashed task- and privacy-agnostic.
func synthPlot() ([]byte, error) {
	p := plot.New()
	p.Title.Text = "Fig. 3 closed forms: task loss vs r/ε"
	p.X.Label.Text = "r/ε"
	p.Y.Label.Text = "task loss"
	p.Add(plotter.NewGrid())
	colours := []color.Color{color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}}
	for si, st := range synthSettings {
		for di, design := range []string{"task-aware", "task-agnostic", "privacy-agnostic"} {
			var pts plotter.XYs
			for i := 1; i <= 100; i++ {
				r := float64(i) / 100
				c := 8 * r * r
				var v float64
				switch di {
				case 0:
					v, _ = taskaware.LossTaskAware(st.Lambda, c)
				case 1:
					v = taskaware.LossTaskAgnostic(st.Lambda, c)
				default:
					v = taskaware.LossPrivacyAgnostic(st.Lambda, c, 2)
				}
				pts = append(pts, plotter.XY{X: r, Y: v})
			}
			l, err := plotter.NewLine(pts)
			if err != nil {
				return nil, err
			}
			l.Color = colours[si]
			l.Width = vg.Points(1.2)
			if di > 0 {
				l.Dashes = []vg.Length{vg.Points(2 + 3*float64(di)), vg.Points(2)}
			}
			p.Add(l)
			p.Legend.Add(st.Name+" "+design, l)
		}
	}
	p.Legend.Top, p.Legend.Left = false, false // bottom right, below the curves
	w, err := p.WriterTo(7*vg.Inch, 5*vg.Inch, "png")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
