package pcaenc

import (
	"encoding/json"

	"github.com/ldpsql/ldpsql/plugins/sdk"
)

// Name and Version are what the plugin reports in Describe.
const (
	Name    = "pca"
	Version = "1.0.0"
)

// Plugin serves a Model through plugins/sdk: Fit returns an artifact, Load
// installs it, Encode and Decode use it.
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

// Describe reports the loaded model: D outputs in the L1 ball of radius L.
func (p *Plugin) Describe() sdk.Description {
	d := sdk.Description{Name: Name, Version: Version, HasDecoder: true, CanFit: true}
	if m := p.m.Peek(); m != nil {
		d.InputDim, d.OutputDim = m.InputDim, m.D
		d.OutputSet = sdk.L1Ball(m.L)
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

// Decode implements sdk.Decoder.
func (p *Plugin) Decode(latents [][]float32) ([][]float32, error) {
	m, err := p.m.Get()
	if err != nil {
		return nil, err
	}
	return m.Decode(latents)
}

// Fit implements sdk.Fitter; params are {"d": 8, "l": 10}.
func (p *Plugin) Fit(params json.RawMessage, inputDim int, rows sdk.RowStream) ([]byte, error) {
	pp, err := ParseParams(params)
	if err != nil {
		return nil, err
	}
	m, err := Fit(pp, inputDim, rows.Next)
	if err != nil {
		return nil, err
	}
	return m.Artifact()
}

// Load implements sdk.Loader.
func (p *Plugin) Load(artifact []byte) error {
	return p.m.Load(artifact, Load)
}
