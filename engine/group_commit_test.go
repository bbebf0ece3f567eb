package engine

import (
	"testing"
	"time"
)

// takeBatch queues n items and takes them as one batch, as a committer does after a transaction of n.
func takeBatch(g *groupCommit[int], n int) {
	for i := range n {
		g.add(i, func() {})
	}
	g.take()
}

// The committer's wait ends when as many items are queued as the largest recent batch held, not after
// its full length; with fewer it lasts the full length; a lone client's committer never waits.
func TestGroupCommitLinger(t *testing.T) {
	const long = 10 * time.Second // far longer than any of these waits may take
	lingers := func(g *groupCommit[int], d time.Duration, arrive int) time.Duration {
		t.Helper()
		done := make(chan time.Duration, 1)
		start := time.Now()
		go func() {
			g.linger(d)
			done <- time.Since(start)
		}()
		for i := range arrive {
			time.Sleep(time.Millisecond)
			g.add(i, func() {})
		}
		select {
		case took := <-done:
			return took
		case <-time.After(long / 2):
			t.Fatalf("linger(%v) with %d arrivals still waits after %v", d, arrive, long/2)
			return 0
		}
	}

	var g groupCommit[int]
	takeBatch(&g, 3)
	takeBatch(&g, 5) // the largest recent batch
	takeBatch(&g, 2) // the last: a straggler was late, which must not lower the goal
	lingers(&g, long, 5)
	if n := len(g.take()); n != 5 {
		t.Fatalf("took %d after the wait, want the 5 that ended it", n)
	}

	// Fewer than the goal: the full wait, then what came.
	if took := lingers(&g, 50*time.Millisecond, 4); took < 50*time.Millisecond {
		t.Fatalf("4 of 5 arrived and the wait ended after %v, before its 50ms", took)
	}
	if n := len(g.take()); n != 4 {
		t.Fatalf("took %d, want 4", n)
	}

	// A signal left from an earlier wait does not end the next one.
	g.full <- struct{}{}
	if took := lingers(&g, 50*time.Millisecond, 1); took < 50*time.Millisecond {
		t.Fatalf("a stale signal ended the wait after %v", took)
	}
	g.take()

	// A lone client: batches of one, no wait at all.
	var lone groupCommit[int]
	takeBatch(&lone, 1)
	if took := lingers(&lone, long, 0); took > long/4 {
		t.Fatalf("a lone client's committer waited %v", took)
	}
}
