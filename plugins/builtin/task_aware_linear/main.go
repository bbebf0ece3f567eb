// Command task_aware_linear is the built-in linear task-aware encoder plugin
// (Cheng, Tang and Chinchali, ICML 2022, §4.1; package training/taskaware):
// for a linear task y = Kx with squared-error loss, it encodes a row to
// φ = A(clip(x) − mid), the few scaled directions the task needs, and decodes
// a noisy φ with the LMMSE decoder for the Laplace noise the host adds at the
// fit's ε. The ldpsql host runs it; run by hand it only says that it is a
// plugin.
//
// Fit params: {"weights": [...] | "task_matrix": [[...]], "eps": 5, "z": 3}.
// Output: Z ≤ z values in the ℓ1 ball of radius Δ1/2, Δ1 the encoder's exact
// ℓ1 sensitivity over the input box recorded at fit time, so the host's
// Laplace noise has scale Δ1/ε.
package main

import (
	"encoding/json"

	"github.com/ldpsql/ldpsql/plugins/sdk"
	"github.com/ldpsql/ldpsql/training/taskaware"
)

// Name and Version are what the plugin reports in Describe.
const (
	Name    = "task_aware_linear"
	Version = "1.0.0"
)

// Plugin serves a taskaware.Model through plugins/sdk: Fit returns an
// artifact, Load installs it, Encode (deterministic) and Decode (the LMMSE
// decoder for the fit's ε) use it. Before Load the output set is sdk.NoSet,
// so the host refuses to encode.
type Plugin struct {
	sdk.ModelEncoder[taskaware.Model, *taskaware.Model]
}

var (
	_ sdk.Encoder = (*Plugin)(nil)
	_ sdk.Decoder = (*Plugin)(nil)
	_ sdk.Fitter  = (*Plugin)(nil)
	_ sdk.Loader  = (*Plugin)(nil)
)

// newPlugin returns the plugin with no model loaded: Z outputs in the ℓ1
// ball of radius Δ1/2 once one is.
func newPlugin() *Plugin {
	return &Plugin{sdk.ModelEncoder[taskaware.Model, *taskaware.Model]{
		Info:  sdk.Description{Name: Name, Version: Version, CanFit: true},
		Parse: taskaware.Load,
		Shape: func(m *taskaware.Model) (int, int, sdk.OutputSet) { return m.InputDim, m.Z, sdk.L1Ball(m.Radius) },
	}}
}

// Fit implements sdk.Fitter (params: see taskaware.Params).
func (p *Plugin) Fit(params json.RawMessage, inputDim int, rows sdk.RowStream) ([]byte, error) {
	pp, err := taskaware.ParseParams(params)
	if err != nil {
		return nil, err
	}
	m, err := taskaware.Fit(pp, inputDim, rows.Next)
	if err != nil {
		return nil, err
	}
	return m.Artifact()
}

func main() { sdk.Serve(newPlugin()) }
