// Package benchdata makes the inputs that `ldpsql bench` and the integration benchmarks share, so that
// both measure the same thing.
package benchdata

import (
	"bytes"
	"fmt"
	"strconv"
)

// TenColumnCSV is n rows of a 10-column numeric CSV without a header: an id, 4 integers, 5 doubles.
func TenColumnCSV(n int) []byte {
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		b.WriteString(strconv.Itoa(i))
		for c := 1; c <= 4; c++ {
			fmt.Fprintf(&b, ",%d", (i*c)%1000)
		}
		for c := 1; c <= 5; c++ {
			b.WriteByte(',')
			b.WriteString(strconv.FormatFloat(float64(i)/float64(c+1), 'f', 4, 64))
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}
