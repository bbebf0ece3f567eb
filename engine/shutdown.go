package engine

import (
	"context"
	"sync"
	"time"

	"github.com/dolthub/vitess/go/mysql"
)

// A clean shutdown (SIGTERM, SIGINT: cmd/ldpsql serve) must not end the process under a running
// statement: a statement cut off half way leaves its DuckDB transaction open, so the checkpoint that
// follows fails ("there are other write transactions active") and the write is lost, although the
// client may have paid for it. Drain lets the running statements end first: new statements are refused
// (MySQL's ER_SERVER_SHUTDOWN), the running ones get a grace period to finish, and those still running
// after it are cancelled (as KILL QUERY cancels: a write rolls back, ldp_privatize drops its temporary
// table and charges nothing, since its charges commit only with its destination) and waited for.

// statements tracks the statements running over the wire, for Drain.
type statements struct {
	mu       sync.Mutex
	running  map[*runningStatement]struct{}
	draining bool
	idle     chan struct{} // closed when draining and none runs
}

type runningStatement struct{ cancel context.CancelCauseFunc }

// errShuttingDown is the error of a statement sent while the server drains, and the cause given to the
// statements it cancels.
var errShuttingDown = mysql.NewSQLError(mysql.ERServerShutdown, mysql.SSUnknownSQLState, "the server is shutting down")

// start registers a statement about to run and returns its context, cancelled if the drain's grace
// period ends first, and the function that ends it; while the server drains it refuses.
func (s *statements) start(ctx context.Context) (context.Context, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return nil, nil, errShuttingDown
	}
	if s.running == nil {
		s.running = map[*runningStatement]struct{}{}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	r := &runningStatement{cancel: cancel}
	s.running[r] = struct{}{}
	return ctx, func() {
		cancel(nil)
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.running, r)
		if s.draining && len(s.running) == 0 && s.idle != nil {
			close(s.idle)
			s.idle = nil
		}
	}, nil
}

// DrainReport says what Drain found.
type DrainReport struct {
	// Running is how many statements ran when the drain began; Cancelled how many of them were still
	// running after the grace period and were cancelled; Unfinished how many had not ended after that.
	Running, Cancelled, Unfinished int
}

// Drain refuses new statements over the wire, waits up to grace for the running ones to end, cancels
// those still running and waits up to cancelWait for them to end. Call it after the server stopped
// accepting connections (Server.Close) and before Close.
func (e *Engine) Drain(grace, cancelWait time.Duration) DrainReport {
	s := &e.stmts
	s.mu.Lock()
	s.draining = true
	rep := DrainReport{Running: len(s.running)}
	if len(s.running) == 0 {
		s.mu.Unlock()
		return rep
	}
	idle := make(chan struct{})
	s.idle = idle
	s.mu.Unlock()
	select {
	case <-idle:
		return rep
	case <-time.After(grace):
	}
	rep.Cancelled = e.CancelRunning()
	select {
	case <-idle:
	case <-time.After(cancelWait):
		s.mu.Lock()
		rep.Unfinished = len(s.running)
		s.mu.Unlock()
	}
	return rep
}

// CancelRunning cancels every statement running over the wire (a second SIGTERM during Drain) and
// returns how many it cancelled.
func (e *Engine) CancelRunning() int { return e.stmts.cancelAll(errShuttingDown) }

// cancelAll cancels every running statement with cause and returns how many it cancelled.
func (s *statements) cancelAll(cause error) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for r := range s.running {
		r.cancel(cause)
	}
	return len(s.running)
}
