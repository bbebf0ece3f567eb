//go:build !unix

package beam

import "time"

// cpuTime is not measured here (0): the benchmark reports rows/s only.
func cpuTime() time.Duration { return 0 }
