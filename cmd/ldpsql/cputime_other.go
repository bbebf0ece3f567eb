//go:build !unix

package main

import "time"

// processCPU is the CPU time this process has used so far; not known here.
func processCPU() (time.Duration, bool) { return 0, false }
