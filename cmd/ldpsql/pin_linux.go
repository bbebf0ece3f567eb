package main

import (
	"fmt"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// startOnCPUs starts cmd on the last n CPUs this process may run on. GOMAXPROCS alone bounds only Go's
// own threads: DuckDB's and OpenBLAS's run beside them, and an ldpsql-etl job with GOMAXPROCS=1 used
// 1.1–1.3 cores (1.22–1.28 CPU s in 0.97–1.10 s of wall time). The child inherits the CPU set of the thread that forks it, so the set is given to a
// thread of its own, which ends with the goroutine that locked it.
func startOnCPUs(cmd *exec.Cmd, n int) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		var all, set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &all); err != nil {
			errc <- err
			return
		}
		// The last n: on CPU 0 two rounds of five here ran the one-CPU job at 41,000 rows/s against
		// 52,000–56,000 (CPU 0 often takes a machine's interrupts; not measured apart).
		for cpu := 1023; cpu >= 0 && set.Count() < n; cpu-- {
			if all.IsSet(cpu) {
				set.Set(cpu)
			}
		}
		if set.Count() < n {
			errc <- fmt.Errorf("%d CPUs asked for, %d available", n, all.Count())
			return
		}
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			errc <- err
			return
		}
		errc <- cmd.Start()
	}()
	return <-errc
}

const pinsCPUs = true
