// Command vlm is the built-in Variational Laplace Mechanism encoder plugin: it
// serves a model trained by training/vlm (the server trains it as a job and
// loads the artifact), encoding each row to the deterministic clipped
// encoder mean ν(h(x)), which lies in the ℓ1 ball of radius L, and decoding
// (noisy) latents to the decoder mean. It has no Fit: training is not a
// plugin call. The ldpsql host runs it; run by hand it only says that it is a
// plugin.
package main

import (
	"github.com/ldpsql/ldpsql/plugins/sdk"
	"github.com/ldpsql/ldpsql/training/vlm"
)

// Name and Version are what the plugin reports in Describe.
const (
	Name    = "vlm"
	Version = "1.0.0"
)

// Plugin serves a vlm.Model through plugins/sdk: Load installs an artifact
// (vlm.Model.MarshalBinary), Encode and Decode use it. Before Load the output
// set is sdk.NoSet, so the host refuses to encode.
type Plugin struct {
	sdk.ModelEncoder[vlm.Model, *vlm.Model]
}

var (
	_ sdk.Encoder = (*Plugin)(nil)
	_ sdk.Decoder = (*Plugin)(nil)
	_ sdk.Loader  = (*Plugin)(nil)
)

// newPlugin returns the plugin with no model loaded: D outputs in the ℓ1 ball
// of radius L once one is.
func newPlugin() *Plugin {
	return &Plugin{sdk.ModelEncoder[vlm.Model, *vlm.Model]{
		Info:  sdk.Description{Name: Name, Version: Version},
		Parse: vlm.UnmarshalModel,
		Shape: func(m *vlm.Model) (int, int, sdk.OutputSet) {
			c := m.Config()
			return m.InputDim(), c.D, sdk.L1Ball(c.L)
		},
	}}
}

func main() { sdk.Serve(newPlugin()) }
