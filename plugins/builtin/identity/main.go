// Command identity is the built-in identity encoder plugin (see package
// idenc): output = input clipped into a per-feature box fitted on auxiliary
// data. The ldpsql host runs it; run by hand it only says that it is a plugin.
package main

import (
	"github.com/ldpsql/ldpsql/plugins/builtin/identity/idenc"
	"github.com/ldpsql/ldpsql/plugins/sdk"
)

func main() { sdk.Serve(idenc.NewPlugin()) }
