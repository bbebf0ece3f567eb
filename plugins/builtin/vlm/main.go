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
// (vlm.Model.MarshalBinary), Encode and Decode use it.
type Plugin struct {
	m sdk.ModelSlot[vlm.Model]
}

var (
	_ sdk.Encoder = (*Plugin)(nil)
	_ sdk.Decoder = (*Plugin)(nil)
	_ sdk.Loader  = (*Plugin)(nil)
)

// Describe reports the loaded model: InputDim inputs, D outputs in the ℓ1 ball
// of radius L, with a decoder. Before Load the output set is sdk.NoSet, so the
// host refuses to encode.
func (p *Plugin) Describe() sdk.Description {
	d := sdk.Description{Name: Name, Version: Version, HasDecoder: true}
	if m := p.m.Peek(); m != nil {
		c := m.Config()
		d.InputDim, d.OutputDim = m.InputDim(), c.D
		d.OutputSet = sdk.L1Ball(c.L)
	}
	return d
}

// Encode implements sdk.Encoder: the deterministic clipped encoder mean.
func (p *Plugin) Encode(rows [][]float32) ([][]float32, error) {
	m, err := p.m.Get()
	if err != nil {
		return nil, err
	}
	return m.Encode(rows)
}

// Decode implements sdk.Decoder: the decoder mean of each latent.
func (p *Plugin) Decode(latents [][]float32) ([][]float32, error) {
	m, err := p.m.Get()
	if err != nil {
		return nil, err
	}
	return m.Decode(latents)
}

// Load implements sdk.Loader: artifact is a vlm.Model.MarshalBinary output.
func (p *Plugin) Load(artifact []byte) error {
	return p.m.Load(artifact, vlm.UnmarshalModel)
}

func main() { sdk.Serve(new(Plugin)) }
