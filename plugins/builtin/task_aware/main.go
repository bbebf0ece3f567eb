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

// Plugin serves a taskaware.Network: Load installs it (refusing an artifact whose radius or centre
// disagrees with its weights), Encode (deterministic) and Decode (the decoder trained for the noise at
// the training ε) use it; before Load the output set is sdk.NoSet, so the host refuses to encode.
type Plugin struct {
	sdk.ModelEncoder[taskaware.Network, *taskaware.Network]
}

var (
	_ sdk.Encoder = (*Plugin)(nil)
	_ sdk.Decoder = (*Plugin)(nil)
	_ sdk.Loader  = (*Plugin)(nil)
)

// newPlugin returns the plugin with no model loaded: Z outputs in the ℓ1 ball of radius Δ1/2 once one is.
func newPlugin() *Plugin {
	return &Plugin{sdk.ModelEncoder[taskaware.Network, *taskaware.Network]{
		Info:  sdk.Description{Name: Name, Version: Version},
		Parse: taskaware.LoadNetwork,
		Shape: func(m *taskaware.Network) (int, int, sdk.OutputSet) { return m.InputDim, m.Z, sdk.L1Ball(m.Radius) },
	}}
}

func main() { sdk.Serve(newPlugin()) }
