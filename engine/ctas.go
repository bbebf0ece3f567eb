package engine

import (
	"errors"
	"io"

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
// table that existed before (CREATE TABLE IF NOT EXISTS … SELECT) is never dropped. Charges a failed
// statement's releases made are kept: the noisy values may have been seen (the ledger's rule).

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
	iter, err := b.Build(bctx, tc, r)
	if err != nil {
		undo()
		return nil, err
	}
	return &undoOnError{RowIter: iter, undo: undo, sc: sc, ledger: n.ledger(ctx)}, nil
}

// ledger is the ledger of the engine the statement runs in.
func (n *atomicCreateSelect) ledger(ctx *sql.Context) *Ledger {
	if s, ok := ctx.Session.(*Session); ok && s.p != nil {
		return s.p.ledger
	}
	return nil
}

// undoOnError passes its iterator's rows on and calls undo when it fails. Charges deferred to the
// statement's rows that no row took (a SELECT whose releases produced no row) are charged at its end.
type undoOnError struct {
	sql.RowIter
	undo   func()
	sc     *statementCharges
	ledger *Ledger
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
		u.undo()
		return nil, err
	}
	return row, err
}

var _ sql.MutableRowIter = (*undoOnError)(nil)

// GetChildIter and WithChildIter let GMS put its row-count accumulator under the wrapper
// (rowexec.AddAccumulatorIter), so the statement still answers with an OK packet.
func (u *undoOnError) GetChildIter() sql.RowIter { return u.RowIter }

func (u *undoOnError) WithChildIter(child sql.RowIter) sql.RowIter {
	return &undoOnError{RowIter: child, undo: u.undo, sc: u.sc, ledger: u.ledger}
}
