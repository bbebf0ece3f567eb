package engine

import (
	"context"
	gosql "database/sql"
	"database/sql/driver"
	"sync/atomic"
	"time"
)

// Group commit of small autocommit INSERTs.
//
// A single-row INSERT in autocommit used to be its own DuckDB transaction: BEGIN, an appender opened,
// flushed and closed for one row, COMMIT with its WAL write and fsync. That fixed cost (about 0.8 ms of
// CPU on a 2-core machine, nine tenths of the statement's) and the commits serialised behind DuckDB's
// commit lock kept 8 writers near 1,100 rows/s. Now the editor of such a statement (no client
// transaction, no charges to commit with it, no upsert, at most maxGroupedRows rows, inserts only)
// holds its rows in memory, and at the statement's end hands them to the engine's insertQueue. The
// statements that end while a transaction of the queue commits (or during groupLinger after it) join
// the next one: one BEGIN, one appender per table for all their rows, one COMMIT, one WAL flush.
//
// Each statement stays all or nothing: when the shared transaction fails (one statement's duplicate key
// or NULL in a NOT NULL column, a conflict with another transaction, a full disk), it is rolled back
// whole and every statement of it is committed again alone, in its own transaction, so that each gets
// its own result and a bad row fails only its statement. A statement is acknowledged only once the
// transaction holding its rows has committed: a crash loses no acknowledged row.

// maxGroupedRows is the most rows a statement may insert and still go through the insert queue; a
// larger one writes in its own transaction as it goes (its rows are not held in memory).
const maxGroupedRows = 64

// groupLinger is the longest the queue waits for more statements before a transaction, when the one
// before held more than one (several writers); the wait ends as soon as as many statements are queued
// as the largest recent transaction held (groupCommit.linger). With 8 single-row writers on 2 cores the
// statements fell into two alternating groups of 4 (one committing while the other ran through GMS);
// waiting 0.5 ms joins most of them: 6.7 statements per transaction, 399–401 µs of CPU per INSERT
// against 515–518 (bench load --clients 8 --mix insert). Ending the wait when they are all there, not
// after a sleep of 0.5 ms (which took 0.95 ms on a loaded machine), took 8 writers from 3,070–3,165 to
// 4,373–4,625 INSERTs/s (3 interleaved rounds of 8 s). A lone writer never waits.
const groupLinger = 500 * time.Microsecond

// groupedInsert is one statement's rows, waiting in the insert queue.
type groupedInsert struct {
	ctx  context.Context
	t    *Table
	rows [][]driver.Value
	done chan error // receives the statement's result, once
}

// insertQueue commits the grouped inserts of one engine's tables, a transaction at a time. (Two
// transactions under way at once, on two connections, one appending while the other commits, halved the
// statements per transaction with 8 writers on the loaded 2-core machine, 3.5–4 against 6.8, and so
// cost 310–350 µs of CPU per INSERT against 220–227: bench load --clients 8 --mix insert.)
type insertQueue struct {
	db *gosql.DB

	conn insertConn // the connection the queue writes on; run's alone

	queue     groupCommit[*groupedInsert]
	batches   atomic.Int64
	appenders atomic.Int64 // appenders flushed: one per table of a transaction
}

// insertConn is the queue's connection, with its BEGIN and COMMIT prepared (DuckDB parses and plans a
// statement's text at every execution: 40 µs each of an 8-row transaction's 0.7 ms of CPU).
type insertConn struct {
	conn          *gosql.Conn
	begin, commit *gosql.Stmt
}

// commit hands a statement's rows to the queue and returns once they have committed (nil) or failed.
// It waits even when ctx is done once the rows are taken into a transaction: the statement must not
// report a failure for rows that committed.
func (q *insertQueue) commit(ctx context.Context, t *Table, rows [][]driver.Value) error {
	ins := &groupedInsert{ctx: ctx, t: t, rows: rows, done: make(chan error, 1)}
	q.queue.add(ins, q.run)
	return <-ins.done
}

// run commits the queued statements until the queue is empty; the statements that arrive while a
// transaction commits wait for the next one.
func (q *insertQueue) run() {
	for {
		q.queue.linger(groupLinger)
		batch := q.queue.take()
		if batch == nil {
			return
		}
		q.batches.Add(1)
		q.commitBatch(batch)
	}
}

// transactions is how many shared transactions the queue has run (each holds one or more statements).
func (q *insertQueue) transactions() int64 { return q.batches.Load() }

// commitBatch commits batch's statements in one transaction, or, when that fails, each alone.
func (q *insertQueue) commitBatch(batch []*groupedInsert) {
	live := make([]*groupedInsert, 0, len(batch))
	for _, ins := range batch {
		if err := ins.ctx.Err(); err != nil {
			ins.done <- err // cancelled before its rows were written: nothing was
			continue
		}
		live = append(live, ins)
	}
	if len(live) > 1 {
		if err := q.write(live); err == nil {
			for _, ins := range live {
				ins.done <- nil
			}
			return
		}
	}
	for _, ins := range live {
		ins.done <- q.write([]*groupedInsert{ins})
	}
}

// write inserts the statements' rows in one DuckDB transaction on the queue's connection, through one
// appender per table, and commits it; on any error it rolls back and writes nothing. (An appender plans
// an INSERT at its flush, about 0.15 ms of CPU whatever the rows; a prepared INSERT is rebound at every
// execution and costs as much per row, so the appender is cheaper from two rows on.)
func (q *insertQueue) write(batch []*groupedInsert) error {
	ctx := context.Background() // no one statement's cancellation may undo the others' rows
	err := q.writeRows(ctx, batch)
	if err == nil {
		return nil
	}
	// The connection may be in a failed transaction, or belong to a DuckDB instance since replaced
	// (store.go): start afresh next time.
	if q.conn.conn != nil {
		_, _ = q.conn.conn.ExecContext(ctx, "ROLLBACK")
	}
	q.conn.close()
	return err
}

func (q *insertQueue) writeRows(ctx context.Context, batch []*groupedInsert) error {
	c := &q.conn
	if err := c.open(ctx, q.db); err != nil {
		return err
	}
	if _, err := c.begin.ExecContext(ctx); err != nil {
		return err
	}
	// By the table's definition, not by *Table: every statement resolves a Table value of its own, and
	// keyed by those the batch had an appender per statement (bench load --clients 8 --mix insert: 6.2
	// flushes per transaction, half the server's CPU).
	var tables []*Table
	byTable := map[*tableDef][][]driver.Value{}
	for _, ins := range batch {
		if _, ok := byTable[ins.t.def]; !ok {
			tables = append(tables, ins.t)
		}
		byTable[ins.t.def] = append(byTable[ins.t.def], ins.rows...)
	}
	for _, t := range tables {
		rows := byTable[t.def]
		q.appenders.Add(1)
		if err := appendRows(c.conn, t.db.name, t.def.name, len(rows), func(i int) []driver.Value { return rows[i] }); err != nil {
			return err
		}
	}
	_, err := c.commit.ExecContext(ctx)
	return err
}

// open connects and prepares the statements, unless connected.
func (l *insertConn) open(ctx context.Context, db *gosql.DB) error {
	if l.conn != nil {
		return nil
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	l.conn = conn
	if l.begin, err = conn.PrepareContext(ctx, "BEGIN TRANSACTION"); err == nil {
		l.commit, err = conn.PrepareContext(ctx, "COMMIT")
	}
	if err != nil {
		l.close()
	}
	return err
}

// close closes the statements and the connection.
func (l *insertConn) close() {
	for _, stmt := range []*gosql.Stmt{l.begin, l.commit} {
		if stmt != nil {
			_ = stmt.Close()
		}
	}
	if l.conn != nil {
		_ = l.conn.Close()
	}
	l.conn, l.begin, l.commit = nil, nil, nil
}

// close closes the queue's connection, once no statement is left to commit (the engine is closing, or
// its DuckDB instance is being replaced).
func (q *insertQueue) close() error {
	for !q.queue.idle() {
		time.Sleep(time.Millisecond)
	}
	q.conn.close()
	return nil
}

// InsertTransactions is how many DuckDB transactions the insert queue has committed since the engine
// opened (each holds the rows of one or more small autocommit INSERTs).
func (e *Engine) InsertTransactions() int64 { return e.Provider.inserts.transactions() }
