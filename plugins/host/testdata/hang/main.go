// Command hang is a test plugin (see ../../host_test.go): a 2 → 2 encoder that
// never returns from Encode when the first value of the first row is -1.
package main

import "github.com/ldpsql/ldpsql/plugins/sdk"

type hang struct{}

func (hang) Describe() sdk.Description {
	return sdk.Description{Name: "hang", Version: "test", InputDim: 2, OutputDim: 2, OutputSet: sdk.L1Ball(100)}
}

func (hang) Encode(rows [][]float32) ([][]float32, error) {
	if len(rows) > 0 && rows[0][0] == -1 {
		select {} // hang (other goroutines keep the process alive)
	}
	return rows, nil
}

func main() { sdk.Serve(hang{}) }
