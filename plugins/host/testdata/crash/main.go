// Command crash is a test plugin (see ../../host_test.go): a 2 → 2 encoder
// whose process exits mid-batch when it meets a row whose first value is -1.
package main

import (
	"fmt"
	"os"
	"syscall"

	"github.com/ldpsql/ldpsql/plugins/sdk"
)

type crash struct{}

func (crash) Describe() sdk.Description {
	return sdk.Description{Name: "crash", Version: "test", InputDim: 2, OutputDim: 2, OutputSet: sdk.L1Ball(100)}
}

func (crash) Encode(rows [][]float32) ([][]float32, error) {
	out := make([][]float32, len(rows))
	for i, r := range rows {
		if r[0] == -1 {
			// fd 2 is the process's real stderr, which the host reads
			// directly; os.Stderr is a pipe go-plugin forwards over gRPC,
			// which may lose the last lines of a process that exits at once.
			syscall.Write(2, fmt.Appendf(nil, "crashing on purpose at row %d\n", i))
			os.Exit(3)
		}
		out[i] = []float32{r[0], r[1]}
	}
	return out, nil
}

func main() { sdk.Serve(crash{}) }
