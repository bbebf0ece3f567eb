package engine

import (
	"sync"
	"time"
)

// groupCommit is the queue of a group commit (the ledger's charges, the insert queue's statements): the
// items that arrive while a transaction commits wait together, to be written in the next one. At most
// one committer runs at a time; add starts it when none runs, and it takes batches until none is left.
type groupCommit[T any] struct {
	mu      sync.Mutex
	queue   []T
	running bool
	last    int // how many items the committer's last batch held; 0 before its first
}

// add queues item and, when no committer runs, starts run, which must call take until it returns nil.
func (g *groupCommit[T]) add(item T, run func()) {
	g.mu.Lock()
	g.queue = append(g.queue, item)
	start := !g.running
	g.running = true
	g.mu.Unlock()
	if start {
		go run()
	}
}

// take takes every queued item; nil when none is left, and then the committer has stopped (it must
// return), so the next add starts another.
func (g *groupCommit[T]) take() []T {
	g.mu.Lock()
	defer g.mu.Unlock()
	batch := g.queue
	g.queue = nil
	g.last = len(batch)
	if len(batch) == 0 {
		g.running = false
		return nil
	}
	return batch
}

// linger waits d before the committer's next take when its last batch held more than one item: with
// several clients, those still on their way then join the next transaction, whose cost hardly depends
// on how many it holds. A lone client (batches of one) never waits.
func (g *groupCommit[T]) linger(d time.Duration) {
	g.mu.Lock()
	several := g.last > 1
	g.mu.Unlock()
	if several {
		time.Sleep(d)
	}
}

// queued is how many items wait for the next transaction.
func (g *groupCommit[T]) queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}

// idle says whether no committer runs.
func (g *groupCommit[T]) idle() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.running
}
