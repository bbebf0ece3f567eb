package engine

import (
	"context"
	gosql "database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/analyzer"
	"github.com/dolthub/go-mysql-server/sql/plan"
	"github.com/dolthub/go-mysql-server/sql/transform"
	"github.com/dolthub/vitess/go/mysql"
	ast "github.com/dolthub/vitess/go/vt/sqlparser"
)

// Multi-statement transactions, backed by DuckDB's own.
//
// A session (Session, GMS's BaseSession plus what follows) is in an explicit transaction from BEGIN or
// START TRANSACTION to its COMMIT or ROLLBACK, and, with autocommit = 0, always. GMS tracks both: BEGIN
// sets the session's "ignore autocommit" flag, COMMIT and ROLLBACK clear it, and @@autocommit is a
// session variable (explicitTransaction reads them). Outside an explicit transaction nothing changes
// from the autocommit path: each statement reads through the shared pool and writes in its table
// editor's own DuckDB transaction, committed when the statement completes.
//
// Inside one, the first statement that reads or writes a table pins a DuckDB connection from the pool
// (Session.txConn) and runs BEGIN TRANSACTION on it. Every later read (scans, index lookups, row
// counts) and write (table editors, TRUNCATE) of the session's statements runs on that connection, so
// the session sees its own uncommitted writes and one snapshot (DuckDB's MVCC: snapshot isolation, for
// every isolation level a client asks for), and no other session sees them until COMMIT. Statements of
// ldpsql's procedures run under the caller's session and join its transaction, although GMS hides the
// transaction from them (it clears ctx's transaction during a CALL): the pinned connection belongs to
// the Session, not to GMS's Transaction value, which is only a token.
//
// The transaction ends with:
//   - COMMIT (or BEGIN, which commits what is pending, or SET autocommit = 1 at the end of the next
//     statement, as GMS commits then): COMMIT on the pinned connection, which goes back to the pool;
//   - ROLLBACK: ROLLBACK there. A ROLLBACK with nothing pending (autocommit, or nothing read or written
//     yet) succeeds, as in MySQL;
//   - DDL (CREATE, ALTER, DROP, RENAME, TRUNCATE, CREATE/DROP DATABASE, CREATE TABLE … AS SELECT) and
//     CALL ldp_privatize, which creates a table: an implicit COMMIT when the statement is parsed, before
//     it runs, as in MySQL; after it the session is out of its BEGIN (autocommit = 0 stays in force).
//     DDL itself runs on the pool and commits on its own;
//   - the client's disconnect, and KILL CONNECTION, which disconnects it: ROLLBACK (forgetSession);
//   - Engine.Close: ROLLBACK of every transaction still open, in-process sessions' included. In-process
//     sessions (Engine.NewContext, Engine.DB) have no end that ldpsql sees, so one left in a transaction
//     holds its DuckDB connection until its COMMIT or ROLLBACK or Engine.Close.
//
// DuckDB cannot undo a single statement of a transaction (it has no savepoints, and a failed write
// aborts its transaction). So a statement that fails after it began writing inside a transaction rolls
// the whole transaction back; every later read or write of the session fails, saying so, until COMMIT
// (which reports the failure and ends the transaction) or ROLLBACK. MySQL would undo only the statement;
// ldpsql never commits what is left of a transaction after part of it was lost.
//
// Conflicts: DuckDB allows one writer per row. A session that updates or deletes a row another open
// transaction changed fails at once; two transactions that insert the same key, or write a table
// another drops, fail at the later COMMIT (the first committer wins). Either is MySQL's ER_LOCK_DEADLOCK
// (1213, SQLSTATE 40001, "try restarting transaction"), naming the table, and the failing transaction
// is rolled back, as InnoDB rolls back a deadlock's victim; the other session's write stays. 1213 rather
// than 1205 (lock wait timeout) because nothing waited, and because ORMs and pools treat 1213 as
// retryable. DuckDB does not see a conflict between an UPDATE of a table without a primary key and a
// DELETE of the same row (an UPDATE of a keyed table is a delete and an insert for DuckDB, which it
// does see).
//
// SAVEPOINT: DuckDB has none. SAVEPOINT records the name; ROLLBACK TO SAVEPOINT succeeds when the
// transaction has written nothing since (there is nothing to undo, which is all mysqldump
// --single-transaction, a reader, needs), and fails otherwise, saying that only a whole ROLLBACK can
// undo it; RELEASE SAVEPOINT forgets it. An unknown name is MySQL's 1305.
//
// The privacy ledger (ledger.go) charges a release on its own connection, in its own transaction, when
// the release is made: ROLLBACK never refunds it, because the noisy values have been seen. (A CREATE
// TABLE … AS SELECT or INSERT … SELECT in autocommit, and ldp_privatize, commit their charges with what
// they write instead; inside a transaction an INSERT … SELECT charges at its first write: ledger_tx.go.)

// Session is ldpsql's sql.Session: GMS's BaseSession with the DuckDB transaction it has open.
type Session struct {
	*sql.BaseSession
	p *Provider

	mu         sync.Mutex
	conn       *gosql.Conn          // pinned, BEGIN TRANSACTION run on it; nil when none is open
	failed     error                // the transaction was rolled back after this failure
	written    map[*tableDef]string // tables written in the transaction, by quoted name
	writes     int                  // statements that wrote in the transaction
	savepoints []savepoint          // oldest first
}

type savepoint struct {
	name   string
	writes int // Session.writes when it was made
}

var _ sql.TransactionSession = (*Session)(nil)

// newSession is a Session over base for the provider p.
func (p *Provider) newSession(base *sql.BaseSession) *Session {
	return &Session{BaseSession: base, p: p}
}

// transactionToken is GMS's handle on a session's transaction. It holds nothing: the DuckDB
// transaction is the Session's, opened when a statement first needs it.
type transactionToken struct{ readOnly bool }

func (t transactionToken) String() string   { return "ldpsql transaction" }
func (t transactionToken) IsReadOnly() bool { return t.readOnly }

// StartTransaction implements sql.TransactionSession. GMS calls it before every statement that has no
// transaction; nothing is opened until a statement in an explicit transaction reads or writes.
func (s *Session) StartTransaction(_ *sql.Context, tc sql.TransactionCharacteristic) (sql.Transaction, error) {
	return transactionToken{readOnly: tc == sql.ReadOnly}, nil
}

// CommitTransaction implements sql.TransactionSession.
func (s *Session) CommitTransaction(ctx *sql.Context, _ sql.Transaction) error {
	if err := s.commit(ctx); err != nil {
		// GMS leaves the session in its BEGIN when COMMIT fails; the transaction is over (rolled back).
		ctx.SetIgnoreAutoCommit(false)
		return err
	}
	return nil
}

// Rollback implements sql.TransactionSession.
func (s *Session) Rollback(ctx *sql.Context, _ sql.Transaction) error {
	return s.rollback(ctx)
}

// CreateSavepoint implements sql.TransactionSession: the name and how much the transaction had written.
func (s *Session) CreateSavepoint(_ *sql.Context, _ sql.Transaction, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropSavepointLocked(name) // MySQL: a savepoint of the same name is replaced
	s.savepoints = append(s.savepoints, savepoint{name: name, writes: s.writes})
	return nil
}

// RollbackToSavepoint implements sql.TransactionSession: it succeeds only when there is nothing to undo.
func (s *Session) RollbackToSavepoint(_ *sql.Context, _ sql.Transaction, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.savepointLocked(name)
	if i < 0 {
		return errNoSavepoint(name)
	}
	if s.writes > s.savepoints[i].writes {
		return fmt.Errorf("ROLLBACK TO SAVEPOINT %s is not supported after a write: DuckDB has no savepoints, and this transaction has written since SAVEPOINT %s; only ROLLBACK of the whole transaction can undo it", name, name)
	}
	s.savepoints = s.savepoints[:i+1] // later savepoints go, this one stays (MySQL)
	return nil
}

// ReleaseSavepoint implements sql.TransactionSession.
func (s *Session) ReleaseSavepoint(_ *sql.Context, _ sql.Transaction, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.savepointLocked(name)
	if i < 0 {
		return errNoSavepoint(name)
	}
	s.savepoints = s.savepoints[:i] // it and every later one (MySQL)
	return nil
}

func (s *Session) savepointLocked(name string) int {
	for i := len(s.savepoints) - 1; i >= 0; i-- {
		if strings.EqualFold(s.savepoints[i].name, name) {
			return i
		}
	}
	return -1
}

func (s *Session) dropSavepointLocked(name string) {
	if i := s.savepointLocked(name); i >= 0 {
		s.savepoints = append(s.savepoints[:i], s.savepoints[i+1:]...)
	}
}

func errNoSavepoint(name string) error {
	return mysql.NewSQLError(mysql.ERSPDoesNotExist, "42000", "SAVEPOINT %s does not exist", name)
}

// explicitTransaction says whether ctx's session is inside BEGIN … COMMIT or has autocommit off.
func explicitTransaction(ctx *sql.Context) bool {
	if ctx.GetIgnoreAutoCommit() {
		return true
	}
	autocommit, err := plan.IsSessionAutocommit(ctx)
	return err == nil && !autocommit
}

// txConn is the session's pinned connection, pinned now if the session is in an explicit transaction
// and has none; nil when its statements run in autocommit. It fails while the transaction is rolled
// back after a failure (see the top of this file).
func (s *Session) txConn(ctx *sql.Context) (*gosql.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil {
		return nil, s.failed
	}
	if s.conn != nil {
		return s.conn, nil
	}
	if !explicitTransaction(ctx) {
		return nil, nil
	}
	conn, err := s.p.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("opening a transaction: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN TRANSACTION"); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("opening a transaction: %w", err)
	}
	s.conn = conn
	s.p.open.Store(s, struct{}{})
	return conn, nil
}

// sessionConn is txConn of ctx's session; nil, nil for sessions that are not ldpsql's (background jobs).
func sessionConn(ctx *sql.Context) (*Session, *gosql.Conn, error) {
	s, ok := ctx.Session.(*Session)
	if !ok {
		return nil, nil, nil
	}
	conn, err := s.txConn(ctx)
	if conn == nil {
		s = nil
	}
	return s, conn, err
}

// duckQuerier is what reads need of a *gosql.DB or a pinned *gosql.Conn.
type duckQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*gosql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *gosql.Row
	ExecContext(ctx context.Context, query string, args ...any) (gosql.Result, error)
}

// querier is where ctx's statement reads: its session's transaction, or the pool. inTx says which.
func (p *Provider) querier(ctx *sql.Context) (q duckQuerier, inTx bool, err error) {
	_, conn, err := sessionConn(ctx)
	if err != nil {
		return nil, false, err
	}
	if conn != nil {
		return conn, true, nil
	}
	return p.db, false, nil
}

// noteWrite records that a statement of the transaction writes def (named qualified).
func (s *Session) noteWrite(def *tableDef, qualified string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written == nil {
		s.written = map[*tableDef]string{}
	}
	s.written[def] = qualified
	s.writes++
}

// abort rolls the transaction back after a statement failed while writing in it, and makes the
// session's later reads and writes fail until COMMIT or ROLLBACK. The connection stays pinned until
// then: the failed statement may still have rows open on it, and closing it would wait for them.
func (s *Session) abort(ctx *sql.Context, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil || s.failed != nil {
		return
	}
	_, _ = s.conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	s.failed = fmt.Errorf("this transaction was rolled back when a statement failed while writing (%v): DuckDB cannot undo one statement of a transaction; send ROLLBACK to start again", cause)
}

// commit commits the pinned transaction, if any.
func (s *Session) commit(ctx *sql.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	failed, conn := s.failed, s.conn
	tables := s.writtenNamesLocked()
	s.failed = nil
	defer s.releaseLocked()
	if failed != nil {
		return fmt.Errorf("COMMIT failed: %w", failed)
	}
	if conn == nil {
		return nil
	}
	bg := context.WithoutCancel(ctx) // a KILL QUERY must not leave the transaction half ended
	// DuckDB's COMMIT of a transaction an error aborted succeeds, rolling back: ask first.
	if _, err := conn.ExecContext(bg, "SELECT 1"); err != nil {
		_, _ = conn.ExecContext(bg, "ROLLBACK")
		return fmt.Errorf("COMMIT failed, the transaction was rolled back: an earlier statement of it failed (%w)", err)
	}
	if _, err := conn.ExecContext(bg, "COMMIT"); err != nil {
		_, _ = conn.ExecContext(bg, "ROLLBACK") // in case DuckDB left it open
		if isWriteConflict(err) {
			return errWriteConflict(tables, err)
		}
		return fmt.Errorf("COMMIT failed, the transaction was rolled back: %w", err)
	}
	return nil
}

// rollback rolls the pinned transaction back, if any. The failure that aborted one is forgotten.
func (s *Session) rollback(ctx *sql.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	failed := s.failed
	s.failed = nil
	defer s.releaseLocked()
	if s.conn == nil || failed != nil { // none open, or abort rolled it back
		return nil
	}
	if _, err := s.conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
		return fmt.Errorf("ROLLBACK: %w", err)
	}
	return nil
}

// releaseLocked returns the pinned connection to the pool and forgets the transaction. The cached row
// counts of the tables it wrote go: they may have changed (commit) or been counted on it.
func (s *Session) releaseLocked() {
	if s.conn != nil {
		_ = s.conn.Close()
		s.conn = nil
		s.p.open.Delete(s)
	}
	s.resetLocked()
}

func (s *Session) resetLocked() {
	for def := range s.written {
		def.wrote()
	}
	s.written, s.writes, s.savepoints = nil, 0, nil
}

// writtenNamesLocked names the tables the transaction wrote, for conflict errors.
func (s *Session) writtenNamesLocked() string {
	names := make([]string, 0, len(s.written))
	for _, n := range s.written {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// isWriteConflict says whether a DuckDB error is a write–write conflict with another transaction.
func isWriteConflict(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Conflict on") || strings.Contains(msg, "write-write conflict") ||
		strings.Contains(msg, "Transaction conflict") || strings.Contains(msg, "Failed to commit")
}

// errWriteConflict is MySQL's ER_LOCK_DEADLOCK for a write–write conflict on tables.
func errWriteConflict(tables string, err error) error {
	if tables == "" {
		tables = "(unknown)"
	}
	return mysql.NewSQLError(mysql.ERLockDeadlock, mysql.SSLockDeadlock,
		"Deadlock found when trying to get lock; try restarting transaction: write conflict on %s with another session's transaction (%v); this transaction was rolled back", tables, err)
}

// implicitCommit commits ctx's session's transaction before DDL, as MySQL does, when the statement is
// parsed (GMS's own commit for DDL comes after the statement has run). It mirrors GMS's QFlagDDL,
// QFlagDBDDL and QFlagAlterTable, and adds CALL ldp_privatize, which creates a table.
func implicitCommit(ctx any, stmt ast.Statement) error {
	sctx, ok := ctx.(*sql.Context)
	if !ok || sctx.Session == nil {
		return nil
	}
	s, ok := sctx.Session.(*Session)
	if !ok {
		return nil
	}
	switch x := stmt.(type) {
	case *ast.DDL:
		if x.Temporary {
			return nil
		}
	case *ast.AlterTable, *ast.DBDDL:
	case *ast.Call:
		if !strings.EqualFold(x.ProcName.Name.String(), "ldp_privatize") {
			return nil
		}
	default:
		return nil
	}
	if err := s.commit(sctx); err != nil {
		return err
	}
	sctx.SetIgnoreAutoCommit(false) // out of BEGIN, as after COMMIT
	return nil
}

// rollbackAll rolls back every transaction still open (Engine.Close).
func (p *Provider) rollbackAll() error {
	var errs []error
	p.open.Range(func(k, _ any) bool {
		errs = append(errs, k.(*Session).rollback(sql.NewEmptyContext()))
		return true
	})
	return errors.Join(errs...)
}

// forgetSession rolls back a closed connection's open transaction.
func (e *Engine) forgetSession(id uint32) {
	if s, ok := e.Provider.sessions.LoadAndDelete(id); ok {
		_ = s.(*Session).rollback(sql.NewEmptyContext())
	}
}

// ruleTransactions is the analyzer rule id of transactions, far from GMS's own ids.
const ruleTransactions analyzer.RuleId = 100_000

func init() {
	analyzer.AlwaysBeforeDefault = append(analyzer.AlwaysBeforeDefault, analyzer.Rule{Id: ruleTransactions, Apply: transactions})
}

// transactions accepts ALTER TABLE … DISABLE/ENABLE KEYS, which mysqldump writes, as the no-op it is
// in MySQL for tables without non-unique indexes.
func transactions(_ *sql.Context, _ *analyzer.Analyzer, n sql.Node, _ *plan.Scope, _ analyzer.RuleSelector, _ *sql.QueryFlags) (sql.Node, transform.TreeIdentity, error) {
	if x, ok := n.(*plan.AlterIndex); ok && x.Action == plan.IndexAction_DisableEnableKeys {
		return plan.NothingImpl, transform.NewTree, nil
	}
	return n, transform.SameTree, nil
}
