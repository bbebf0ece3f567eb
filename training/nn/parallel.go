package nn

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Workers is the number of goroutines a parallel section uses: GOMAXPROCS.
func Workers() int { return max(1, runtime.GOMAXPROCS(0)) }

// Parallel runs f(w) for w = 0..p−1 concurrently and waits.
func Parallel(p int, f func(w int)) {
	if p <= 1 {
		f(0)
		return
	}
	var wg sync.WaitGroup
	wg.Add(p)
	for w := range p {
		go func() {
			defer wg.Done()
			f(w)
		}()
	}
	wg.Wait()
}

// ParallelTasks runs f(w, t) for every task t in 0..n−1 on at most p goroutines w, handing tasks out
// dynamically. f must write only task-owned outputs (or worker-owned scratch, indexed by w) so that the
// result does not depend on the schedule.
func ParallelTasks(p, n int, f func(w, t int)) {
	p = min(p, n)
	if p <= 1 {
		for t := range n {
			f(0, t)
		}
		return
	}
	var next atomic.Int64
	Parallel(p, func(w int) {
		for {
			t := int(next.Add(1)) - 1
			if t >= n {
				return
			}
			f(w, t)
		}
	})
}
