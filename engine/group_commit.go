package engine

import (
	"slices"
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

	recent [16]int // the sizes of the last batches: a ring, next the slot of the next one
	next   int
	want   int           // while the committer lingers: the queue's length that ends its wait; else 0
	full   chan struct{} // signalled by add when the queue reaches want
}

// add queues item and, when no committer runs, starts run, which must call take until it returns nil.
func (g *groupCommit[T]) add(item T, run func()) {
	g.mu.Lock()
	g.queue = append(g.queue, item)
	start := !g.running
	g.running = true
	if g.want > 0 && len(g.queue) >= g.want {
		g.want = 0
		select {
		case g.full <- struct{}{}:
		default:
		}
	}
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
	g.recent[g.next] = len(batch)
	g.next = (g.next + 1) % len(g.recent)
	if len(batch) == 0 {
		g.running = false
		return nil
	}
	return batch
}

// linger waits before the committer's next take when its last batch held more than one item: with
// several clients, those still on their way then join the next transaction, whose cost hardly depends
// on how many it holds. The wait ends after d, or as soon as as many items are queued as the largest of
// the last 16 batches held (all the clients, as far as the queue can tell; the largest, not the last,
// so that batches cannot shrink one straggler at a time). A lone client (batches of one) never waits.
func (g *groupCommit[T]) linger(d time.Duration) {
	g.mu.Lock()
	want := slices.Max(g.recent[:])
	if g.last <= 1 || len(g.queue) >= want {
		g.mu.Unlock()
		return
	}
	if g.full == nil {
		g.full = make(chan struct{}, 1)
	}
	select { // a signal for an earlier wait
	case <-g.full:
	default:
	}
	g.want = want
	g.mu.Unlock()
	timer := time.NewTimer(d)
	select {
	case <-g.full:
	case <-timer.C:
	}
	timer.Stop()
	g.mu.Lock()
	g.want = 0
	g.mu.Unlock()
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
