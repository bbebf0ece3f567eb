package engine

import (
	"context"
	gosql "database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/analyzer"
	"github.com/dolthub/go-mysql-server/sql/plan"
	"github.com/dolthub/go-mysql-server/sql/transform"
)

// CREATE TABLE … AS SELECT, all or nothing.
//
// GMS creates the table, then inserts the SELECT's rows; a statement that fails on the way (a bad label
// in FLIP_LABEL, a budget the ledger refuses, a duplicate key) left the new, empty or partly filled table
// behind, against "a statement that fails writes nothing", and a retry then failed with "table already
// exists". atomicCreateSelect wraps the copy: if it fails, the table it created is dropped again. A
// table that existed before (CREATE TABLE IF NOT EXISTS … SELECT) is never dropped. The rows commit
// with the charges of the releases they hold, or neither does (ledger_tx.go).
//
// GMS creates the table in a transaction of its own, before the rows. So that a crash in between leaves
// no empty table either, the CREATE also records the table as unfinished (a key of the catalog's
// settings, unfinishedCreateStatement), and the transaction that commits the rows deletes that key
// (finishCreate); the next start drops every table still unfinished (dropUnfinishedCreates). A statement
// that writes no row, or runs inside a client's transaction (autocommit off), finishes its table when
// it ends instead.

// ruleAtomicCreateSelect is the analyzer rule id of atomicCreateSelectRule, far from GMS's own ids.
const ruleAtomicCreateSelect analyzer.RuleId = 100_004

func init() {
	analyzer.OnceAfterAll = append(analyzer.OnceAfterAll, analyzer.Rule{Id: ruleAtomicCreateSelect, Apply: atomicCreateSelectRule})
}

func atomicCreateSelectRule(ctx *sql.Context, _ *analyzer.Analyzer, n sql.Node, _ *plan.Scope, _ analyzer.RuleSelector, _ *sql.QueryFlags) (sql.Node, transform.TreeIdentity, error) {
	return transform.Node(ctx, n, func(ctx *sql.Context, n sql.Node) (sql.Node, transform.TreeIdentity, error) {
		tc, ok := n.(*plan.TableCopier)
		if !ok {
			return n, transform.SameTree, nil
		}
		if _, ok := tc.Destination.(*plan.CreateTable); !ok {
			return n, transform.SameTree, nil
		}
		return &atomicCreateSelect{UnaryNode: plan.UnaryNode{Child: tc}}, transform.NewTree, nil
	})
}

// atomicCreateSelect runs its child, a CREATE TABLE … SELECT, and drops the table it created if the
// statement fails.
type atomicCreateSelect struct {
	plan.UnaryNode
}

var _ sql.ExecBuilderNode = (*atomicCreateSelect)(nil)

func (n *atomicCreateSelect) IsReadOnly() bool { return false }

func (n *atomicCreateSelect) String() string {
	tp := sql.NewTreePrinter()
	_ = tp.WriteNode("AtomicCreateSelect")
	_ = tp.WriteChildren(n.Child.String())
	return tp.String()
}

func (n *atomicCreateSelect) WithChildren(_ *sql.Context, children ...sql.Node) (sql.Node, error) {
	if len(children) != 1 {
		return nil, sql.ErrInvalidChildrenNumber.New(n, len(children), 1)
	}
	nn := *n
	nn.Child = children[0]
	return &nn, nil
}

// BuildRowIter implements sql.ExecBuilderNode.
func (n *atomicCreateSelect) BuildRowIter(ctx *sql.Context, b sql.NodeExecBuilder, r sql.Row) (sql.RowIter, error) {
	tc, ok := n.Child.(*plan.TableCopier)
	if !ok {
		return b.Build(ctx, n.Child, r)
	}
	ct := tc.Destination.(*plan.CreateTable)
	db := ct.Database()
	_, existed, err := db.GetTableInsensitive(ctx, ct.Name())
	if err != nil {
		return nil, err
	}
	undo := func() {
		if existed {
			return
		}
		if d, ok := db.(sql.TableDropper); ok {
			_ = d.DropTable(ctx, ct.Name())
		}
	}
	// The rows commit with the charges of the releases they hold (ledger_tx.go).
	bctx, sc := withStatementCharges(ctx)
	sc.ctas = true
	var p *Provider
	if s, ok := ctx.Session.(*Session); ok {
		p = s.p
	}
	finish := func() {
		sc.mu.Lock()
		t := sc.created
		sc.created = nil
		sc.mu.Unlock()
		if t != nil && p != nil {
			_, _ = p.db.ExecContext(context.WithoutCancel(ctx), `DELETE FROM `+CatalogSchema+`.settings WHERE key = ?`, unfinishedCreateKey(*t))
		}
	}
	drop := undo
	undo = func() {
		drop()
		finish()
	}
	iter, err := b.Build(bctx, tc, r)
	if err != nil {
		undo()
		return nil, err
	}
	return &undoOnError{RowIter: iter, undo: undo, finish: finish, sc: sc, ledger: statementLedger(ctx)}, nil
}

// unfinishedCreateKey is the settings key that marks table t as created by a CREATE TABLE … AS SELECT
// whose rows have not committed.
func unfinishedCreateKey(t TableRef) string {
	names, _ := json.Marshal([]string{t.Database, t.Table})
	return unfinishedCreatePrefix + string(names)
}

const unfinishedCreatePrefix = "unfinished_create:"

// unfinishedCreateStatement records t as unfinished, in the transaction that creates it.
func unfinishedCreateStatement(t TableRef) string {
	return `INSERT OR REPLACE INTO ` + CatalogSchema + `.settings VALUES (` + quoteString(unfinishedCreateKey(t)) + `, NULL)`
}

// finishCreate deletes the unfinished mark of the table a CREATE TABLE … AS SELECT (stmt) created, on
// conn, in the transaction that commits its rows into t.
func finishCreate(ctx context.Context, conn *gosql.Conn, stmt context.Context, t *Table) error {
	sc := statementChargesFrom(stmt)
	if sc == nil {
		return nil
	}
	sc.mu.Lock()
	created := sc.created
	sc.mu.Unlock()
	if created == nil || !strings.EqualFold(created.Database, t.db.name) || !strings.EqualFold(created.Table, t.def.name) {
		return nil
	}
	_, err := conn.ExecContext(ctx, `DELETE FROM `+CatalogSchema+`.settings WHERE key = ?`, unfinishedCreateKey(*created))
	return err
}

// dropUnfinishedCreates drops the tables of CREATE TABLE … AS SELECT statements that a crash cut off
// before their rows committed: they are empty, and no charge was made for them.
func dropUnfinishedCreates(db *gosql.DB) ([]TableRef, error) {
	rows, err := db.Query(`SELECT key FROM ` + CatalogSchema + `.settings WHERE starts_with(key, '` + unfinishedCreatePrefix + `')`)
	if err != nil {
		return nil, err
	}
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return nil, err
		}
		keys = append(keys, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var dropped []TableRef
	for _, k := range keys {
		var names []string
		if err := json.Unmarshal([]byte(strings.TrimPrefix(k, unfinishedCreatePrefix)), &names); err != nil || len(names) != 2 {
			continue
		}
		t := TableRef{Database: names[0], Table: names[1]}
		tx, err := db.Begin()
		if err != nil {
			return dropped, err
		}
		if _, err := tx.Exec(`DROP TABLE IF EXISTS ` + quoteIdent(t.Database) + `.` + quoteIdent(t.Table)); err != nil {
			_ = tx.Rollback()
			return dropped, fmt.Errorf("dropping %s, left empty by a CREATE TABLE … AS SELECT that a crash cut off: %w", t, err)
		}
		if _, err := tx.Exec(`DELETE FROM `+CatalogSchema+`.settings WHERE key = ?`, k); err != nil {
			_ = tx.Rollback()
			return dropped, err
		}
		if err := tx.Commit(); err != nil {
			return dropped, err
		}
		dropped = append(dropped, t)
	}
	return dropped, nil
}

// statementLedger is the ledger of the engine the statement runs in.
func statementLedger(ctx *sql.Context) *Ledger {
	if s, ok := ctx.Session.(*Session); ok && s.p != nil {
		return s.p.ledger
	}
	return nil
}

// undoOnError passes its iterator's rows on and calls undo (if any) when it fails, finish (if any) when
// it ends. Charges deferred to the statement's rows that no row took (a SELECT whose releases produced
// no row) are charged at its end.
type undoOnError struct {
	sql.RowIter
	undo, finish func()
	sc           *statementCharges
	ledger       *Ledger
}

func (u *undoOnError) Next(ctx *sql.Context) (sql.Row, error) {
	row, err := u.RowIter.Next(ctx)
	if err == nil || err == io.EOF {
		if by, charges := u.sc.take(); len(charges) > 0 {
			if u.ledger == nil {
				err = errors.New("ldp ledger: no ledger to charge; nothing was released")
			} else if cerr := u.ledger.Charge(ctx, by, charges); cerr != nil {
				err = cerr
			}
		}
	}
	if err != nil && err != io.EOF {
		if u.undo != nil {
			u.undo()
		}
		return nil, err
	}
	if u.finish != nil {
		u.finish() // its rows have committed, or it wrote none
	}
	return row, err
}

var _ sql.MutableRowIter = (*undoOnError)(nil)

// GetChildIter and WithChildIter let GMS put its row-count accumulator under the wrapper
// (rowexec.AddAccumulatorIter), so the statement still answers with an OK packet.
func (u *undoOnError) GetChildIter() sql.RowIter { return u.RowIter }

func (u *undoOnError) WithChildIter(child sql.RowIter) sql.RowIter {
	return &undoOnError{RowIter: child, undo: u.undo, finish: u.finish, sc: u.sc, ledger: u.ledger}
}

// DroppedUnfinished names the tables Open dropped because a crash had cut off the CREATE TABLE … AS
// SELECT that created them before their rows committed.
func (e *Engine) DroppedUnfinished() []TableRef { return e.droppedUnfinished }
