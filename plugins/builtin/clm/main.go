// Command clm is the built-in contrastive Laplace mechanism plugin (thesis ch. 5; package
// training/clm): an encoder trained with NT-Xent on augmented views of the auxiliary rows, its output
// scaled into an ℓ1 ball and trained under Laplace noise. The host trains it (CALL
// ldp_train_mechanism(…, 'clm', …)) and runs it; run by hand it only says that it is a plugin.
//
// Output: d values in the ℓ1 ball of radius l, so the host's Laplace noise has scale 2l/ε. It has no
// decoder: LDP_DECODE on a CLM is an error.
package main

import (
	"github.com/ldpsql/ldpsql/plugins/sdk"
	"github.com/ldpsql/ldpsql/training/clm"
)

// Name and Version are what the plugin reports in Describe.
const (
	Name    = "clm"
	Version = "1.0.0"
)

// Plugin serves a clm.Model: Load installs it, Encode (deterministic) uses it; before Load the output
// set is sdk.NoSet, so the host refuses to encode.
type Plugin struct {
	sdk.ModelEncoder[clm.Model, *clm.Model]
}

var (
	_ sdk.Encoder = (*Plugin)(nil)
	_ sdk.Loader  = (*Plugin)(nil)
)

func newPlugin() *Plugin {
	return &Plugin{sdk.ModelEncoder[clm.Model, *clm.Model]{
		Info:  sdk.Description{Name: Name, Version: Version},
		Parse: clm.Load,
		Shape: func(m *clm.Model) (int, int, sdk.OutputSet) {
			return m.InputDim(), m.Config().D, sdk.L1Ball(m.Config().L)
		},
	}}
}

func main() { sdk.Serve(newPlugin()) }
