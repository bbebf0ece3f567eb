//go:build !unix

// Package cputime reads the process's CPU time, for benchmarks that report rows per CPU second
// beside rows per second (a machine shared with other work slows the first far less).
package cputime

import "time"

// Process is not measured here (0): a benchmark then reports rows/s only.
func Process() time.Duration { return 0 }
