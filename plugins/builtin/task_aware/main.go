// Command task_aware is the built-in trained task-aware encoder plugin (Cheng, Tang and Chinchali,
// ICML 2022, Algorithm 1; package training/taskaware): an encoder trained, through a frozen task model,
// to keep what the task needs under the Laplace noise the host adds, and the decoder trained for that
// noise. The host trains it (CALL ldp_train_mechanism(…, 'task_aware', …)) and runs it; run by hand it
// only says that it is a plugin.
//
// Output: Z values in the ℓ1 ball of radius Δ1/2, Δ1 the encoder's data-independent ℓ1 sensitivity
// over the input box recorded at training time, so the host's Laplace noise has scale Δ1/ε.
package main

import (
	"github.com/ldpsql/ldpsql/plugins/sdk"
	"github.com/ldpsql/ldpsql/training/taskaware"
)

// Name and Version are what the plugin reports in Describe.
const (
	Name    = "task_aware"
	Version = "1.0.0"
)

// Plugin serves a taskaware.Network: Load installs it, Encode (deterministic) and Decode use it.
type Plugin struct {
	m sdk.ModelSlot[taskaware.Network]
}

var (
	_ sdk.Encoder = (*Plugin)(nil)
	_ sdk.Decoder = (*Plugin)(nil)
	_ sdk.Loader  = (*Plugin)(nil)
)

// Describe reports the loaded network: Z outputs in the ℓ1 ball of radius Δ1/2. Before Load the output
// set is sdk.NoSet, so the host refuses to encode.
func (p *Plugin) Describe() sdk.Description {
	d := sdk.Description{Name: Name, Version: Version, HasDecoder: true}
	if m := p.m.Peek(); m != nil {
		d.InputDim, d.OutputDim = m.InputDim, m.Z
		d.OutputSet = sdk.L1Ball(m.Radius)
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

// Decode implements sdk.Decoder: the decoder trained for the noise at the training ε.
func (p *Plugin) Decode(latents [][]float32) ([][]float32, error) {
	m, err := p.m.Get()
	if err != nil {
		return nil, err
	}
	return m.Decode(latents)
}

// Load implements sdk.Loader; the artifact's radius is checked against its weights.
func (p *Plugin) Load(artifact []byte) error {
	return p.m.Load(artifact, taskaware.LoadNetwork)
}

func main() { sdk.Serve(new(Plugin)) }
