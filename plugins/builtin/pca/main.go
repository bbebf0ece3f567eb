// Command pca is the built-in PCA encoder plugin (see package pcaenc). The
// ldpsql host runs it; run by hand it only says that it is a plugin.
//
// Fit params: {"d": 8, "l": 10}. Output: d values in the L1 ball of radius l.
package main

import (
	"github.com/ldpsql/ldpsql/plugins/builtin/pca/pcaenc"
	"github.com/ldpsql/ldpsql/plugins/sdk"
)

func main() { sdk.Serve(pcaenc.NewPlugin()) }
