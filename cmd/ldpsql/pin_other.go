//go:build !linux

package main

import "os/exec"

// startOnCPUs starts cmd; only Linux gives it a CPU set here (its GOMAXPROCS still bounds Go's threads).
func startOnCPUs(cmd *exec.Cmd, n int) error { return cmd.Start() }

const pinsCPUs = false
