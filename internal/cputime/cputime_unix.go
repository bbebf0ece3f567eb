//go:build unix

// Package cputime reads the process's CPU time, for benchmarks that report rows per CPU second
// beside rows per second (a machine shared with other work slows the first far less).
package cputime

import (
	"syscall"
	"time"
)

// Process is the process's user and system CPU time so far.
func Process() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
