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
	sdk.ModelEncoder[Model, *Model]
}

var (
	_ sdk.Encoder = (*Plugin)(nil)
	_ sdk.Decoder = (*Plugin)(nil)
	_ sdk.Fitter  = (*Plugin)(nil)
	_ sdk.Loader  = (*Plugin)(nil)
)

// NewPlugin returns a plugin with no model loaded: D outputs in the L1 ball of
// radius L once one is.
func NewPlugin() *Plugin {
	return &Plugin{sdk.ModelEncoder[Model, *Model]{
		Info:  sdk.Description{Name: Name, Version: Version, CanFit: true},
		Parse: Load,
		Shape: func(m *Model) (int, int, sdk.OutputSet) { return m.InputDim, m.D, sdk.L1Ball(m.L) },
	}}
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
