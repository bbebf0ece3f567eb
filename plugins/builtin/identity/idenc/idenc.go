// Package idenc is the identity encoder: output = input clipped into a
// per-feature box [lo_i, hi_i] whose ranges are fitted on an auxiliary table.
// With the Laplace randomiser (scale Δ_i·d/ε per feature, Δ_i = hi_i − lo_i)
// it is the thesis's "noise the features directly" baseline (Mansbridge,
// App. A.3; digest §7.1): Δf_i is the range of feature i over the mechanism's
// training data, and values outside it are clipped at privatisation time.
//
// Fit takes no parameters (null or {}) and returns a JSON artifact with the
// per-feature minimum and maximum. Plugin adapts it to plugins/sdk; ../main.go
// serves it.
package idenc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/ldpsql/ldpsql/plugins/sdk"
)

// Format is the artifact format tag.
const Format = "ldpsql-identity/1"

// Name and Version are what the plugin reports in Describe.
const (
	Name    = "identity"
	Version = "1.0.0"
)

// Model is the fitted box. Its JSON form is the artifact.
type Model struct {
	Format string    `json:"format"`
	N      int       `json:"n"` // rows it was fitted on
	Lo     []float32 `json:"lo"`
	Hi     []float32 `json:"hi"`
}

// Fit computes the per-feature minimum and maximum of the rows next yields
// (batches of inputDim finite values, then io.EOF); it needs one row.
func Fit(inputDim int, next func() ([][]float32, error)) (*Model, error) {
	if inputDim < 1 {
		return nil, fmt.Errorf("identity: input dimension %d", inputDim)
	}
	m := &Model{Format: Format, Lo: make([]float32, inputDim), Hi: make([]float32, inputDim)}
	for {
		batch, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		for _, r := range batch {
			if len(r) != inputDim {
				return nil, fmt.Errorf("identity: a row has %d values, want %d", len(r), inputDim)
			}
			for i, v := range r {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					return nil, fmt.Errorf("identity: row %d of the auxiliary data has a non-finite value", m.N)
				}
				if m.N == 0 || v < m.Lo[i] {
					m.Lo[i] = v
				}
				if m.N == 0 || v > m.Hi[i] {
					m.Hi[i] = v
				}
			}
			m.N++
		}
	}
	if m.N == 0 {
		return nil, errors.New("identity: no rows to fit on")
	}
	// A feature constant over the auxiliary data (a corner pixel that is always 0) would give an empty
	// box side, which no randomiser accepts. It gets the narrowest side float32 can hold at its value:
	// every release of it is then (almost) the constant, which is what the auxiliary data say it is.
	for i := range m.Lo {
		if m.Lo[i] == m.Hi[i] {
			m.Hi[i] = math.Nextafter32(m.Lo[i], float32(math.Inf(1)))
			if d := m.Hi[i] - m.Lo[i]; d < constantWidth {
				m.Hi[i] = m.Lo[i] + constantWidth
			}
		}
	}
	return m, nil
}

// constantWidth is the side given to a feature that is constant over the auxiliary data: small enough
// that its noise (width·d/ε per coordinate) is negligible, large enough to be exact in float32 near 0..1.
const constantWidth = 1e-4

// Load decodes and checks an artifact.
func Load(artifact []byte) (*Model, error) {
	m := new(Model)
	if err := json.Unmarshal(artifact, m); err != nil {
		return nil, fmt.Errorf("identity artifact: %v", err)
	}
	if m.Format != Format {
		return nil, fmt.Errorf("identity artifact: format %q, want %q", m.Format, Format)
	}
	if len(m.Lo) == 0 || len(m.Lo) != len(m.Hi) {
		return nil, fmt.Errorf("identity artifact: %d lower and %d upper bounds", len(m.Lo), len(m.Hi))
	}
	for i := range m.Lo {
		if !(m.Lo[i] <= m.Hi[i]) || math.IsInf(float64(m.Lo[i]), 0) || math.IsInf(float64(m.Hi[i]), 0) {
			return nil, fmt.Errorf("identity artifact: feature %d: [%v, %v] is not a finite interval", i, m.Lo[i], m.Hi[i])
		}
	}
	return m, nil
}

// Artifact encodes the model.
func (m *Model) Artifact() ([]byte, error) { return json.Marshal(m) }

// Dim is the number of features.
func (m *Model) Dim() int { return len(m.Lo) }

// Encode clips every value into its feature's range. NaN is an error.
func (m *Model) Encode(rows [][]float32) ([][]float32, error) {
	d := m.Dim()
	flat := make([]float32, len(rows)*d)
	out := make([][]float32, len(rows))
	for i, r := range rows {
		if len(r) != d {
			return nil, fmt.Errorf("identity: row %d has %d values, want %d", i, len(r), d)
		}
		z := flat[i*d : (i+1)*d : (i+1)*d]
		for k, v := range r {
			if v != v {
				return nil, fmt.Errorf("identity: row %d, feature %d is NaN", i, k)
			}
			z[k] = min(max(v, m.Lo[k]), m.Hi[k])
		}
		out[i] = z
	}
	return out, nil
}

// Plugin serves a Model through plugins/sdk.
type Plugin struct {
	m sdk.ModelSlot[Model]
}

var (
	_ sdk.Encoder = (*Plugin)(nil)
	_ sdk.Decoder = (*Plugin)(nil)
	_ sdk.Fitter  = (*Plugin)(nil)
	_ sdk.Loader  = (*Plugin)(nil)
)

// NewPlugin returns a plugin with no model loaded.
func NewPlugin() *Plugin { return new(Plugin) }

// Describe reports the fitted box as the output set.
func (p *Plugin) Describe() sdk.Description {
	d := sdk.Description{Name: Name, Version: Version, HasDecoder: true, CanFit: true}
	if m := p.m.Peek(); m != nil {
		d.InputDim, d.OutputDim = m.Dim(), m.Dim()
		lo, hi := make([]float64, m.Dim()), make([]float64, m.Dim())
		for i := range lo {
			lo[i], hi[i] = float64(m.Lo[i]), float64(m.Hi[i])
		}
		d.OutputSet = sdk.Box(lo, hi)
	}
	return d
}

// Encode implements sdk.Encoder.
func (p *Plugin) Encode(rows [][]float32) ([][]float32, error) {
	m, err := p.m.Get()
	if err != nil {
		return nil, err
	}
	return m.Encode(rows)
}

// Decode implements sdk.Decoder: latent space is input space, so it copies.
func (p *Plugin) Decode(latents [][]float32) ([][]float32, error) {
	out := make([][]float32, len(latents))
	for i, z := range latents {
		out[i] = append([]float32(nil), z...)
	}
	return out, nil
}

// Fit implements sdk.Fitter; the only params accepted are null and {}.
func (p *Plugin) Fit(params json.RawMessage, inputDim int, rows sdk.RowStream) ([]byte, error) {
	if len(params) > 0 && string(params) != "null" {
		var v struct{}
		dec := json.NewDecoder(bytes.NewReader(params))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("identity params: %v (it takes none: pass {})", err)
		}
	}
	m, err := Fit(inputDim, rows.Next)
	if err != nil {
		return nil, err
	}
	return m.Artifact()
}

// Load implements sdk.Loader.
func (p *Plugin) Load(artifact []byte) error {
	return p.m.Load(artifact, Load)
}
