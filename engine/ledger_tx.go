package engine

import (
	"context"
	gosql "database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/plan"
	"github.com/dolthub/go-mysql-server/sql/transform"
	"github.com/dolthub/go-mysql-server/sql/types"
)

// Charges that commit with the write they paid for.
//
// A statement that writes its releases into a table — CREATE TABLE … AS SELECT, INSERT … SELECT (with
// REPLACE, IGNORE or ON DUPLICATE KEY UPDATE too), and ldp_privatize's destination — must not leave a charge without its rows, nor rows without their charge: the charge
// and the write commit in one DuckDB transaction, or neither does. Such a statement runs with a
// statementCharges in its context (withStatementCharges). The ledger gate hands the statement's charges
// to it (Ledger.Defer) instead of charging them at once, after checking them against the budgets
// (Ledger.Check, so that a statement over its budget still fails before anything is written). The
// write that publishes the rows then takes them (takeCharges) and commits them in its own transaction
// on the ledger's connection (chargedTx), under the ledger's lock:
//   - the table editor of a CREATE TABLE … AS SELECT (atomicCreateSelect, ctas.go) or of an INSERT …
//     SELECT whose source releases protected data (chargedInsert, below): its rows and their charges
//     (table_editor.go);
//   - the RENAME TABLE with which ldp_privatize names its destination: the rename and the charges for
//     every row of it (database.go); the rows were committed before into the temporary table, which
//     nothing can read (stagingTable).
//
// The transaction begins while the ledger's lock is held, so no other charge (nor fold) commits between
// its snapshot and its commit: the budgets it checks are the ones it writes against. A crash or a failure before its COMMIT leaves neither the rows nor the
// charges; after it, both.

// Inside a client's transaction (autocommit off) the editor writes on the session's connection, whose
// rows commit with the client's COMMIT: it charges the statement's releases at its first write instead
// (Ledger.Charge, its own transaction, as a SELECT's releases in the transaction are charged), and
// they stay charged whatever becomes of the transaction.

// statementCharges is what a statement's releases charge, held until the write that commits them.
type statementCharges struct {
	mu      sync.Mutex
	by      string
	charges []Charge

	// ctas marks a CREATE TABLE … AS SELECT; created is the table it created, whose rows have not
	// committed yet (its marker is in the catalog's settings: ctas.go).
	ctas    bool
	created *TableRef
}

type statementChargesKey struct{}

// withStatementCharges marks ctx as a statement whose writes commit with its charges.
func withStatementCharges(ctx *sql.Context) (*sql.Context, *statementCharges) {
	sc := &statementCharges{}
	return ctx.WithContext(context.WithValue(ctx.Context, statementChargesKey{}, sc)), sc
}

// WithChargesOnWrite returns ctx marked so that the charges handed to Ledger.Defer under it commit with
// the next RENAME TABLE run under it (ldp_privatize naming its destination).
func WithChargesOnWrite(ctx *sql.Context) *sql.Context {
	c, _ := withStatementCharges(ctx)
	return c
}

func statementChargesFrom(ctx context.Context) *statementCharges {
	sc, _ := ctx.Value(statementChargesKey{}).(*statementCharges)
	return sc
}

// Defer hands charges to the write that will commit them with its rows, when ctx's statement has one
// (see the top of this file), and reports whether it did; when it reports false the caller charges them
// itself (Charge). It checks them against the budgets first (Check): a *BudgetError means nothing may be
// released, as from Charge. A deferred charge is checked again, and written, when the write commits.
func (l *Ledger) Defer(ctx context.Context, by string, charges []Charge) (bool, error) {
	sc := statementChargesFrom(ctx)
	if sc == nil {
		return false, nil
	}
	if err := l.Check(charges); err != nil {
		return true, err
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.by = by
	sc.charges = append(sc.charges, charges...)
	return true, nil
}

// takeCharges takes the charges deferred in ctx's statement, leaving none.
func takeCharges(ctx context.Context) (by string, charges []Charge) {
	return statementChargesFrom(ctx).take()
}

func (sc *statementCharges) take() (by string, charges []Charge) {
	if sc == nil {
		return "", nil
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	by, charges = sc.by, sc.charges
	sc.charges = nil
	return by, charges
}

// Check checks charges against their units' budgets as Charge would, without recording anything: a
// *BudgetError when any unit would go over. Charges deferred to a write are checked here first, so a
// statement over its budget fails as early as one charged at once; the write checks them again.
//
// It checks against what committed transactions have charged, and waits for none in flight (they may
// only lower what is left, and the charge checks again), unless a table's units are yet to be read.
func (l *Ledger) Check(charges []Charge) error {
	if len(charges) == 0 {
		return nil
	}
	req, err := l.request(context.Background(), "", charges)
	if err != nil {
		return err
	}
	l.spentMu.RLock()
	_, err = l.checkBudgets(req, map[unitRef]float64{}, l.committedSpent)
	l.spentMu.RUnlock()
	if !errors.Is(err, errSpentNotRead) {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errLedgerClosed
	}
	if err := l.openConn(); err != nil {
		return fmt.Errorf("ldp ledger: %w; nothing was released", err)
	}
	_, err = l.checkBudgets(req, map[unitRef]float64{}, l.spentOf)
	return err
}

var errLedgerClosed = errors.New("ldp ledger: the engine is closing; nothing was released")

// request validates charges into a chargeRequest.
func (l *Ledger) request(ctx context.Context, releasedBy string, charges []Charge) (*chargeRequest, error) {
	req := &chargeRequest{ctx: ctx, releasedBy: releasedBy, charges: charges, tables: make([]TableRef, len(charges)), done: make(chan error, 1)}
	for i := range charges {
		c := &charges[i]
		if math.IsNaN(c.Eps) || math.IsInf(c.Eps, 0) || c.Eps <= 0 {
			return nil, fmt.Errorf("ldp ledger: charge of ε = %v to unit %q of %s: ε must be finite and > 0", c.Eps, c.Unit, c.Table)
		}
		b, ok := l.Budget(c.Table)
		if !ok {
			return nil, fmt.Errorf("ldp ledger: %w: %s", ErrNotProtected, c.Table)
		}
		req.tables[i] = b.TableRef // the recorded spelling of the table
	}
	return req, nil
}

// chargedTx is a DuckDB transaction on the ledger's connection, begun and ended under the ledger's
// lock, in which a write and the charges it paid for commit together.
type chargedTx struct {
	l    *Ledger
	conn *gosql.Conn
	done bool
}

// beginCharged takes the ledger's lock and begins a transaction on its connection. End it with commit
// or rollback, which release the lock; nothing that charges may run in between on this goroutine.
func (l *Ledger) beginCharged() (*chargedTx, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, errLedgerClosed
	}
	if err := l.openConn(); err != nil {
		l.mu.Unlock()
		return nil, fmt.Errorf("ldp ledger: %w; nothing was released", err)
	}
	if _, err := l.conn.ExecContext(context.Background(), "BEGIN TRANSACTION"); err != nil {
		l.resetConnLocked()
		l.mu.Unlock()
		return nil, fmt.Errorf("ldp ledger: %w; nothing was released", err)
	}
	return &chargedTx{l: l, conn: l.conn}, nil
}

// commit checks charges against their units' budgets, writes them in the transaction and commits it
// with everything else written in it; when a unit would go over its budget, or anything fails, it rolls
// the whole transaction back and returns the error (a *BudgetError for the budget).
func (tx *chargedTx) commit(releasedBy string, charges []Charge) (err error) {
	if tx.done {
		return errors.New("ldp ledger: the transaction has ended")
	}
	tx.done = true
	l := tx.l
	defer l.mu.Unlock()
	ctx := context.Background()
	fail := func(err error) error {
		if _, rbErr := tx.conn.ExecContext(ctx, "ROLLBACK"); rbErr != nil && !strings.Contains(rbErr.Error(), "no transaction is active") {
			l.resetConnLocked()
		}
		return err
	}
	var req *chargeRequest
	var order []unitRef
	var sums map[unitRef]float64
	n := 0
	if len(charges) > 0 {
		if req, err = l.request(ctx, releasedBy, charges); err != nil {
			return fail(err)
		}
		if sums, err = l.checkBudgets(req, map[unitRef]float64{}, l.spentOf); err != nil {
			return fail(err)
		}
		seen := map[unitRef]bool{}
		for i, c := range charges {
			u := unitRef{req.tables[i].key(), c.Unit}
			if !seen[u] {
				order = append(order, u)
				seen[u] = true
			}
		}
		if n, err = l.writeCharges(tx.conn, []*chargeRequest{req}); err != nil {
			return fail(fmt.Errorf("ldp ledger: charging %d releases: %w; nothing was released", len(charges), err))
		}
	}
	if _, err := tx.conn.ExecContext(ctx, "COMMIT"); err != nil {
		l.forgetSpent() // what committed is for DuckDB's record to say
		return fail(fmt.Errorf("ldp ledger: committing %d releases with their write: %w; nothing was released", len(charges), err))
	}
	if req != nil {
		l.committed([]*chargeRequest{req}, order, sums, n)
	}
	return nil
}

// rollback rolls the transaction back, charges and writes alike.
func (tx *chargedTx) rollback() error {
	if tx.done {
		return nil
	}
	tx.done = true
	defer tx.l.mu.Unlock()
	if _, err := tx.conn.ExecContext(context.Background(), "ROLLBACK"); err != nil && !strings.Contains(err.Error(), "no transaction is active") {
		tx.l.resetConnLocked()
		return err
	}
	return nil
}

// resetConnLocked drops the ledger's connection after it was left in an unknown state; the next charge
// opens another. mu is held.
func (l *Ledger) resetConnLocked() {
	if l.conn != nil {
		_ = l.conn.Close()
		l.conn = nil
	}
}

// TakeCharges takes the charges handed to Ledger.Defer under ctx that no write took (none, normally).
func TakeCharges(ctx context.Context) []Charge {
	_, charges := takeCharges(ctx)
	return charges
}

// StagingPrefix starts the name of ldp_privatize's temporary destination. Nothing reads such a table:
// its rows are releases whose charges commit only when it is renamed to the destination.
const StagingPrefix = "_ldp_tmp_"

// stagingTable says whether name is a temporary destination (StagingPrefix).
func stagingTable(name string) bool {
	return strings.HasPrefix(strings.ToLower(name), StagingPrefix)
}

func errStaging(name string) error {
	return fmt.Errorf("table %s is the temporary destination of an ldp_privatize: it cannot be read (its releases are charged when it is named)", name)
}

// ChargeWithRows wraps an INSERT … SELECT (REPLACE, INSERT IGNORE, ON DUPLICATE KEY UPDATE) whose source
// releases protected data, below the ledger's gate, so that the statement's rows commit with their
// charges (the top of this file): the gate checks the charges and defers them to the table editor.
// Where the destination is not one of the engine's tables, it charges them at once, as before.
func ChargeWithRows(ins *plan.InsertInto) sql.Node {
	return &chargedInsert{UnaryNode: plan.UnaryNode{Child: ins}}
}

// chargedInsert runs its child, an INSERT … SELECT, as a statement whose writes commit with its charges.
type chargedInsert struct {
	plan.UnaryNode
}

var _ sql.ExecBuilderNode = (*chargedInsert)(nil)

func (n *chargedInsert) IsReadOnly() bool { return false }

// Schema implements sql.Node: the INSERT's, which GMS's server reads from the node itself only for a
// bare InsertInto (an OK packet, not a result set).
func (n *chargedInsert) Schema(ctx *sql.Context) sql.Schema {
	if ins, ok := n.Child.(*plan.InsertInto); ok && ins.Returning == nil {
		return types.OkResultSchema
	}
	return n.Child.Schema(ctx)
}

func (n *chargedInsert) String() string {
	tp := sql.NewTreePrinter()
	_ = tp.WriteNode("ChargeWithRows")
	_ = tp.WriteChildren(n.Child.String())
	return tp.String()
}

func (n *chargedInsert) WithChildren(_ *sql.Context, children ...sql.Node) (sql.Node, error) {
	if len(children) != 1 {
		return nil, sql.ErrInvalidChildrenNumber.New(n, len(children), 1)
	}
	nn := *n
	nn.Child = children[0]
	return &nn, nil
}

// BuildRowIter implements sql.ExecBuilderNode.
func (n *chargedInsert) BuildRowIter(ctx *sql.Context, b sql.NodeExecBuilder, r sql.Row) (sql.RowIter, error) {
	ins, ok := n.Child.(*plan.InsertInto)
	if !ok || !writesEngineTable(ctx, ins.Destination) {
		return b.Build(ctx, n.Child, r)
	}
	bctx, sc := withStatementCharges(ctx)
	iter, err := b.Build(bctx, ins, r)
	if err != nil {
		return nil, err
	}
	return &undoOnError{RowIter: iter, sc: sc, ledger: statementLedger(ctx)}, nil
}

// writesEngineTable says whether dst, an INSERT's destination, is one of the engine's tables, whose
// editor commits the statement's charges with its rows.
func writesEngineTable(ctx *sql.Context, dst sql.Node) bool {
	var t sql.Table
	transform.Inspect(dst, func(n sql.Node) bool {
		if rt, ok := n.(*plan.ResolvedTable); ok && t == nil {
			t = rt.Table
		}
		return t == nil
	})
	for t != nil {
		switch tt := t.(type) {
		case *Table, *upsertTable:
			return true
		case sql.TableWrapper:
			t = tt.Underlying()
		default:
			return false
		}
	}
	return false
}
