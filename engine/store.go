package engine

import (
	"context"
	gosql "database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dolthub/vitess/go/mysql"
	duckdb "github.com/duckdb/duckdb-go/v2"
)

// Recovering from a full disk without a restart.
//
// When DuckDB cannot write its file during a checkpoint (the disk is full, or the process may not make
// the file larger), it invalidates the attached database: from then on every statement on it fails,
// reads included, until it is attached again ("Database … has been invalidated because checkpointing
// failed"). It cannot be detached and attached again inside the same DuckDB instance (each connection
// has it as its default catalog, and even USE fails), but a new DuckDB instance opens the file and
// replays its WAL, also while the disk is still full: everything committed is there, and reads work.
// A commit that cannot write its WAL fails alone ("Failed to commit: … No space left on device") and
// leaves the database valid.
//
// So the engine's DuckDB handle runs on storeConnector, whose DuckDB instance can be replaced, and a
// wire statement that fails on an invalidated database starts recoverStore: it waits for the statements
// still running to end (they fail on the invalidated database anyway; after recoverGrace they are
// cancelled) while it holds new ones back (gate), closes the
// ledger's connection and the pooled ones, opens a new DuckDB instance on the file, reloads what the
// ledger keeps in memory from its tables, and lets the statements go on. Connections of the old
// instance still held somewhere (a background job's) are refused by database/sql when they come back
// (storeConn.IsValid). A statement refused by the invalidated database before it did anything is run
// again once after the recovery, so a read that came at the wrong moment still gets its rows.
//
// Writes while the disk is full fail with MySQL's ER_DISK_FULL (1021) and a message saying what to do
// (diskFullError); once there is room again they succeed, with no restart.

// storeConnector is the engine's DuckDB connector: it opens connections on the current DuckDB instance,
// which reopen replaces.
type storeConnector struct {
	attach []string // the statements that attach the file, run on every new connection

	mu       sync.RWMutex
	inner    *duckdb.Connector
	gen      uint64   // how many times the instance was replaced
	settings []string // SET GLOBAL statements, run on every new connection (a new instance needs them)
}

func newStoreConnector(attach ...string) (*storeConnector, error) {
	c := &storeConnector{attach: attach}
	var err error
	c.inner, err = duckdb.NewConnector("", c.initConn)
	return c, err
}

// initConn runs on every new connection, with mu held for reading (Connect).
func (c *storeConnector) initConn(execer driver.ExecerContext) error {
	for _, stmt := range append(c.attach[:len(c.attach):len(c.attach)], c.settings...) {
		if _, err := execer.ExecContext(context.Background(), stmt, nil); err != nil {
			return err
		}
	}
	return nil
}

// set runs a SET GLOBAL statement through db and on every connection of a later instance.
func (c *storeConnector) set(db *gosql.DB, stmt string) error {
	if _, err := db.Exec(stmt); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.settings = append(c.settings, stmt)
	return nil
}

// Connect opens a connection on the current instance.
func (c *storeConnector) Connect(ctx context.Context) (driver.Conn, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	dc, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &storeConn{Conn: dc.(*duckdb.Conn), gen: c.gen, owner: c}, nil
}

func (c *storeConnector) Driver() driver.Driver { return c.inner.Driver() }

// Close closes the current instance (database/sql's DB.Close calls it).
func (c *storeConnector) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inner.Close()
}

// reopen replaces the DuckDB instance by a new one on the same file. The caller has closed every
// connection it could: connections of the old instance keep it alive until they close, but an
// invalidated database writes nothing more.
func (c *storeConnector) reopen() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.inner.Close()
	inner, err := duckdb.NewConnector("", c.initConn)
	if err != nil {
		return err
	}
	c.inner = inner
	c.gen++
	return nil
}

func (c *storeConnector) generation() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.gen
}

// rawConn runs f on a connection of the current instance whose driver connection is the *duckdb.Conn
// itself, for the duckdb-go functions that need one (RegisterScalarUDF).
func (c *storeConnector) rawConn(ctx context.Context, f func(*gosql.Conn) error) error {
	c.mu.RLock()
	inner := c.inner
	c.mu.RUnlock()
	db := gosql.OpenDB(plainConnector{inner})
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return f(conn)
}

// plainConnector opens connections of a DuckDB instance without closing it when its DB closes.
type plainConnector struct{ c *duckdb.Connector }

func (p plainConnector) Connect(ctx context.Context) (driver.Conn, error) { return p.c.Connect(ctx) }
func (p plainConnector) Driver() driver.Driver                            { return p.c.Driver() }

// storeConn is a DuckDB connection that knows which instance it belongs to; every DuckDB method is
// its embedded *duckdb.Conn's. Code that needs the *duckdb.Conn itself (appenders) takes it with
// duckConn.
type storeConn struct {
	*duckdb.Conn
	gen   uint64
	owner *storeConnector
}

// IsValid tells database/sql not to pool a connection of a replaced instance.
func (c *storeConn) IsValid() bool { return c.gen == c.owner.generation() }

// ResetSession refuses, before reuse, a connection of a replaced instance.
func (c *storeConn) ResetSession(context.Context) error {
	if !c.IsValid() {
		return driver.ErrBadConn
	}
	return nil
}

// duckConn is the DuckDB connection under a driver connection that database/sql's Conn.Raw hands out.
func duckConn(dc any) *duckdb.Conn {
	if c, ok := dc.(*storeConn); ok {
		return c.Conn
	}
	return dc.(*duckdb.Conn)
}

// storeInvalidated reports whether err says that DuckDB invalidated the database after a failed
// write, so that it must be opened again.
func storeInvalidated(err error) bool {
	return err != nil && strings.Contains(err.Error(), "has been invalidated")
}

// refusedByInvalidStore reports whether err is the refusal of a statement by an already invalidated
// database, which did nothing (as against the error of the write that invalidated it).
func refusedByInvalidStore(err error) bool {
	return err != nil && strings.Contains(err.Error(), "has been invalidated because")
}

// diskFullCauses are how the operating system's "no room" errors read in DuckDB's messages: a full
// file system (ENOSPC), a quota (EDQUOT), or a file size limit (EFBIG, RLIMIT_FSIZE).
var diskFullCauses = []string{"No space left on device", "Disk quota exceeded", "File too large"}

// erDiskFull is MySQL's ER_DISK_FULL.
const erDiskFull = 1021

// diskFullError turns a DuckDB error caused by a full disk into MySQL's ER_DISK_FULL with what to do;
// other errors are returned as they are.
func (e *Engine) diskFullError(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, cause := range diskFullCauses {
		if strings.Contains(msg, cause) {
			return mysql.NewSQLError(erDiskFull, "HY000",
				"Disk full (%s) writing the database file %s: this statement failed. Free space on the volume that holds it; "+
					"reads go on meanwhile, and writes succeed again once there is room, with no restart", cause, e.path)
		}
	}
	return err
}

// recoverGrace is how long recoverStore waits for the running statements to end before it cancels them.
const recoverGrace = 2 * time.Second

// errStoreRecovering is the cause given to the statements recoverStore cancels.
var errStoreRecovering = errors.New("the database is being reopened after a failed write (disk full?)")

// recoverStore opens the DuckDB file again in a new instance when the current one is invalidated, with
// no statement running; it returns at once when the store is valid (another statement recovered it).
func (e *Engine) recoverStore() error {
	e.recoverMu.Lock()
	defer e.recoverMu.Unlock()
	if !storeInvalidated(e.probeStore()) {
		return nil
	}
	start := time.Now()
	// The statements running on the invalidated database fail at their next DuckDB call; one that
	// makes none for recoverGrace (a long computation) is cancelled rather than waited for.
	var cancelled atomic.Int64
	timer := time.AfterFunc(recoverGrace, func() { cancelled.Store(int64(e.stmts.cancelAll(errStoreRecovering))) })
	e.gate.Lock()
	timer.Stop()
	defer e.gate.Unlock()
	err := e.Ledger.reopenStore(func() error {
		_ = e.Provider.rollbackAll()
		_ = e.Provider.inserts.close() // its connection is the old instance's
		e.DuckDB.SetMaxIdleConns(0)    // closes the pooled connections of the old instance
		e.DuckDB.SetMaxIdleConns(maxIdleDuckConns)
		return e.store.reopen()
	})
	if err == nil {
		err = e.probeStore()
	}
	if err != nil {
		e.logf("ldpsql: reopening %s after a failed write: %v", e.path, err)
		return err
	}
	e.registerUnpackAtOpen()
	e.recoveries.Add(1)
	e.logf("ldpsql: reopened %s after DuckDB invalidated it (a write failed: disk full?) in %v; %d running statements were cancelled",
		e.path, time.Since(start).Round(time.Millisecond), cancelled.Load())
	return nil
}

// probeStore reads from the attached file on a new or pooled connection.
func (e *Engine) probeStore() error {
	var n int
	return e.DuckDB.QueryRow(`SELECT count(*) FROM ` + CatalogSchema + `.settings`).Scan(&n)
}

// StoreRecoveries is how many times the engine reopened its DuckDB file after DuckDB invalidated it.
func (e *Engine) StoreRecoveries() int64 { return e.recoveries.Load() }

func (e *Engine) logf(format string, args ...any) {
	if e.log != nil {
		e.log(fmt.Sprintf(format, args...))
	}
}

// WithLog gives the engine a function to report what it did on its own (reopening the file after a
// failed write).
func WithLog(log func(string)) Option {
	return func(e *Engine) error {
		e.log = log
		return nil
	}
}

// WithWALAutocheckpoint sets DuckDB's wal_autocheckpoint: the WAL size (e.g. "16MB", DuckDB's default)
// at which a commit checkpoints the file.
func WithWALAutocheckpoint(size string) Option {
	return func(e *Engine) error {
		if err := e.store.set(e.DuckDB, "SET GLOBAL wal_autocheckpoint = "+quoteString(size)); err != nil {
			return fmt.Errorf("wal_autocheckpoint %q: %w", size, err)
		}
		return nil
	}
}

// DefaultServerDuckDBThreads is the DuckDB threads a server runs with unless told otherwise (serve
// --duckdb-threads, bench load): one. With more, a statement's own thread busy-waits (DuckDB's
// PendingQueryResult polls under a mutex) while a worker thread runs its one small task: in bench load
// on 2 cores that spinning was a fifth of all CPU; with 2 threads a charged statement took 2.1 ms of
// CPU (16 clients) against 1.6 ms with 1, a grouped single-row INSERT 1.3–1.4 ms (8 writers) against
// 0.52. Concurrent clients keep the cores busy anyway; a few large analytical queries are what more
// threads would speed up.
const DefaultServerDuckDBThreads = 1

// WithDuckDBThreads sets DuckDB's threads (every query's parallelism, and its worker pool); n ≤ 0
// leaves DuckDB's default, one per core.
func WithDuckDBThreads(n int) Option {
	return func(e *Engine) error {
		if n <= 0 {
			return nil
		}
		if err := e.store.set(e.DuckDB, fmt.Sprintf("SET GLOBAL threads = %d", n)); err != nil {
			return fmt.Errorf("DuckDB threads %d: %w", n, err)
		}
		return nil
	}
}
