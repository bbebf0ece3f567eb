package boundary

import (
	"context"
	"errors"
	"io"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/analyzer"
	"github.com/dolthub/go-mysql-server/sql/plan"
	"github.com/dolthub/go-mysql-server/sql/transform"

	"github.com/ldpsql/ldpsql/engine"
)

// GateRule puts a ledgerGate above the part of the statement that releases protected data.
func GateRule(ctx *sql.Context, a *analyzer.Analyzer, n sql.Node, scope *plan.Scope, sel analyzer.RuleSelector, _ *sql.QueryFlags) (sql.Node, transform.TreeIdentity, error) {
	l := ledgerOf(a)
	if l == nil || scope.RecursionDepth() > 0 || !AssignsExecIndexes(sel) || !l.AnyProtected() || !containsRelease(ctx, n) {
		return n, transform.SameTree, nil
	}
	if containsGate(ctx, n) {
		if ins, ok := n.(*plan.InsertInto); ok {
			// An INSERT's source is analysed on its own first, and has its gate already: the rows
			// commit with their charges (engine.ChargeWithRows), which the gate checks and defers to
			// the destination's editor.
			return engine.ChargeWithRows(ins), transform.NewTree, nil
		}
		return n, transform.SameTree, nil
	}
	switch root := n.(type) {
	case *plan.CreateView:
		return n, transform.SameTree, nil // nothing runs: the view's query is planned again where it is used
	case *plan.InsertInto:
		// The rows commit with their charges (engine.ChargeWithRows): the gate checks them and defers
		// them to the destination's editor.
		return engine.ChargeWithRows(root.WithSource(&ledgerGate{UnaryNode: plan.UnaryNode{Child: root.Source}, ledger: l})), transform.NewTree, nil
	case *plan.Into:
		nn, err := root.WithChildren(ctx, &ledgerGate{UnaryNode: plan.UnaryNode{Child: root.Child}, ledger: l})
		return nn, transform.NewTree, err
	}
	if !n.IsReadOnly() {
		return nil, transform.SameTree, errors.New("releases of protected data are allowed in SELECT, INSERT … SELECT and CREATE TABLE … AS SELECT only; nothing was released")
	}
	return &ledgerGate{UnaryNode: plan.UnaryNode{Child: n}, ledger: l}, transform.NewTree, nil
}

func containsRelease(ctx *sql.Context, n sql.Node) bool {
	found := false
	_ = WalkPlan(ctx, n, false, func(n sql.Node, _ bool) error {
		if be, ok := n.(Batched); ok {
			for _, e := range be.BatchedExpressions() {
				if hasRelease(ctx, e) {
					found = true
				}
			}
		}
		if ex, ok := n.(sql.Expressioner); ok {
			for _, e := range ex.Expressions() {
				if hasRelease(ctx, e) {
					found = true
				}
			}
		}
		return nil
	})
	return found
}

func hasRelease(ctx *sql.Context, e sql.Expression) bool {
	return transform.InspectExpr(ctx, e, func(ctx *sql.Context, e sql.Expression) bool {
		switch e.(type) {
		case *ledgerRelease, *ledgerAggregate:
			return true
		}
		return false
	})
}

func containsGate(ctx *sql.Context, n sql.Node) bool {
	found := false
	_ = WalkPlan(ctx, n, false, func(n sql.Node, _ bool) error {
		if _, ok := n.(*ledgerGate); ok {
			found = true
		}
		return nil
	})
	return found
}

// ledgerGate runs its child to completion, charges every release the child made in one ledger
// transaction, and only then returns the child's rows; when the charge fails it returns the error and
// no row. The rows are held in memory meanwhile.
type ledgerGate struct {
	plan.UnaryNode
	ledger *engine.Ledger
}

var _ sql.ExecBuilderNode = (*ledgerGate)(nil)

func (g *ledgerGate) IsReadOnly() bool { return g.Child.IsReadOnly() }

func (g *ledgerGate) String() string {
	tp := sql.NewTreePrinter()
	_ = tp.WriteNode("LedgerGate(charge every release, then return the rows)")
	_ = tp.WriteChildren(g.Child.String())
	return tp.String()
}

func (g *ledgerGate) WithChildren(_ *sql.Context, children ...sql.Node) (sql.Node, error) {
	if len(children) != 1 {
		return nil, sql.ErrInvalidChildrenNumber.New(g, len(children), 1)
	}
	ng := *g
	ng.Child = children[0]
	return &ng, nil
}

// BuildRowIter implements sql.ExecBuilderNode: the child runs with the statement's collector in its
// context, where the ledgerRelease expressions find it.
func (g *ledgerGate) BuildRowIter(ctx *sql.Context, builder sql.NodeExecBuilder, r sql.Row) (sql.RowIter, error) {
	if collectorFrom(ctx) != nil {
		return builder.Build(ctx, g.Child, r) // inside another gate: that one charges
	}
	c := NewCollector(g.ledger, engine.SessionUser(ctx))
	cctx := ctx.WithContext(context.WithValue(ctx.Context, collectorKey{}, c))
	child, err := builder.Build(cctx, g.Child, r)
	if err != nil {
		return nil, err
	}
	return &gateIter{child: child, cctx: cctx, c: c}, nil
}

type gateIter struct {
	child  sql.RowIter
	cctx   *sql.Context
	c      *Collector
	closed bool

	drained bool
	err     error
	rows    []sql.Row
	pos     int
}

func (it *gateIter) Next(ctx *sql.Context) (sql.Row, error) {
	if !it.drained {
		it.drained = true
		it.err = it.drain(ctx)
		if it.err != nil {
			it.rows = nil
		}
	}
	if it.err != nil {
		return nil, it.err
	}
	if it.pos >= len(it.rows) {
		return nil, io.EOF
	}
	r := it.rows[it.pos]
	it.rows[it.pos] = nil
	it.pos++
	return r, nil
}

// drain reads every row of the child, closes it (so no release is still being made), then charges.
func (it *gateIter) drain(ctx *sql.Context) error {
	for {
		r, err := it.child.Next(it.cctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		it.rows = append(it.rows, r)
	}
	it.closed = true
	if err := it.child.Close(it.cctx); err != nil {
		return err
	}
	return it.c.commitOrDefer(ctx, it.cctx)
}

func (it *gateIter) Close(*sql.Context) error {
	it.rows = nil
	if it.closed {
		return nil
	}
	it.closed = true
	return it.child.Close(it.cctx)
}
