package engine

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Drain waits for a running statement that ends within the grace period, cancels one that does not,
// and refuses statements that start while it drains.
func TestDrainWaitsThenCancels(t *testing.T) {
	e := &Engine{}
	ctx, end, err := e.stmts.start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(50 * time.Millisecond); end() }()
	if rep := e.Drain(10*time.Second, time.Second); rep.Running != 1 || rep.Cancelled != 0 {
		t.Fatalf("a statement ending within the grace period: %+v", rep)
	}
	if _, _, err := e.stmts.start(context.Background()); !errors.Is(err, errShuttingDown) {
		t.Fatalf("a statement started while draining: %v, want the shutdown error", err)
	}

	e = &Engine{}
	ctx, end, _ = e.stmts.start(context.Background())
	go func() { <-ctx.Done(); end() }() // a statement that ends only when cancelled
	start := time.Now()
	rep := e.Drain(20*time.Millisecond, 5*time.Second)
	if rep.Running != 1 || rep.Cancelled != 1 || rep.Unfinished != 0 {
		t.Fatalf("a statement outliving the grace period: %+v", rep)
	}
	if !errors.Is(context.Cause(ctx), errShuttingDown) {
		t.Fatalf("the cancelled statement's cause: %v", context.Cause(ctx))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Drain took %v", d)
	}

	e = &Engine{}
	_, _, _ = e.stmts.start(context.Background()) // never ends
	if rep := e.Drain(10*time.Millisecond, 10*time.Millisecond); rep.Unfinished != 1 {
		t.Fatalf("a statement that never ends: %+v", rep)
	}
}
