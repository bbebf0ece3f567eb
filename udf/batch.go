package udf

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/analyzer"
	"github.com/dolthub/go-mysql-server/sql/expression"
	"github.com/dolthub/go-mysql-server/sql/plan"
	"github.com/dolthub/go-mysql-server/sql/transform"

	"github.com/ldpsql/ldpsql/udf/boundary"
)

// Batching. A function whose cost is dominated by a fixed per-call price (an RPC to an encoder plugin)
// cannot be evaluated one row at a time. A BatchExpression can also be evaluated on many rows at once;
// the analyzer rule BatchRule rewrites every SELECT projection that contains one into
//
//	Project(… GetField(k) …) over batchEval(child)
//
// where batchEval pulls up to BatchSize rows from its child, evaluates the batch expressions' arguments
// on each row, calls EvalBatch once per expression, and appends the results to the rows as extra
// columns that the rewritten projection reads. Anywhere the rule does not apply (a WHERE clause, a
// subquery), Eval evaluates the row as a batch of one.

// BatchSize is how many rows batchEval hands to EvalBatch at once.
const BatchSize = 4096

// BatchExpression is an expression that can be evaluated over a batch of rows in one call.
type BatchExpression interface {
	sql.Expression
	// BatchArgs are the argument expressions, evaluated per row by the batching node.
	BatchArgs() []sql.Expression
	// EvalBatch computes the results for a batch of rows given each row's evaluated arguments.
	EvalBatch(ctx *sql.Context, args [][]any) ([]any, error)
}

// evalOne evaluates a BatchExpression on one row, as a batch of one.
func evalOne(ctx *sql.Context, e BatchExpression, row sql.Row) (any, error) {
	args, err := evalArgs(ctx, row, e.BatchArgs())
	if err != nil {
		return nil, err
	}
	out, err := e.EvalBatch(ctx, [][]any{args})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// BatchRuleID is the analyzer rule id of BatchRule, far from GMS's own ids.
const BatchRuleID analyzer.RuleId = 100_001

// The rule joins GMS's "once after all" rules, after execution indexes are assigned (it computes the
// indexes of the columns it adds). GMS runs that list both in its full analysis and in the short paths it
// takes for simple statements, which skip any batch an integrator appends; the list is package state
// that each analyzer copies when it is built, so the rule is added when this package is initialised.
//
// GMS also has a short path for simple SELECTs that skips OnceAfterAll; it is disabled (by GMS's own
// convention) whenever AlwaysBeforeDefault holds a rule, so a no-op rule is registered there.
func init() {
	analyzer.OnceAfterAll = append(analyzer.OnceAfterAll, analyzer.Rule{Id: BatchRuleID, Apply: BatchRule})
	analyzer.AlwaysBeforeDefault = append(analyzer.AlwaysBeforeDefault, analyzer.Rule{Id: fullAnalysisRuleID, Apply: fullAnalysis})
}

// fullAnalysisRuleID identifies fullAnalysis.
const fullAnalysisRuleID analyzer.RuleId = 100_002

// fullAnalysis changes nothing; its presence makes GMS analyse simple SELECTs fully (see init).
func fullAnalysis(_ *sql.Context, _ *analyzer.Analyzer, n sql.Node, _ *plan.Scope, _ analyzer.RuleSelector, _ *sql.QueryFlags) (sql.Node, transform.TreeIdentity, error) {
	return n, transform.SameTree, nil
}

// BatchRule is the analyzer rule that introduces batching.
//
// GMS analyzes a subquery on its own (with a non-empty scope) and then fixes its execution indexes
// again as part of the outer query; the arguments held by a batchEval node would miss that second
// fix-up, so the rule runs only on the outermost query, where it rewrites subqueries in FROM as well.
func BatchRule(ctx *sql.Context, _ *analyzer.Analyzer, n sql.Node, scope *plan.Scope, sel analyzer.RuleSelector, _ *sql.QueryFlags) (sql.Node, transform.TreeIdentity, error) {
	// The same holds for an analysis that leaves exec indexes to an enclosing one (a UNION's branches).
	if scope.RecursionDepth() > 0 || !boundary.AssignsExecIndexes(sel) {
		return n, transform.SameTree, nil
	}
	return transform.NodeWithOpaque(ctx, n, func(ctx *sql.Context, n sql.Node) (sql.Node, transform.TreeIdentity, error) {
		if ins, ok := n.(*plan.InsertInto); ok && ins.Source != nil {
			// INSERT keeps its source out of Children(): rewrite it separately.
			src, same, err := BatchRule(ctx, nil, ins.Source, nil, nil, nil)
			if err != nil || same == transform.SameTree {
				return n, transform.SameTree, err
			}
			return ins.WithSource(src), transform.NewTree, nil
		}
		proj, ok := n.(*plan.Project)
		if !ok {
			return n, transform.SameTree, nil
		}
		width := len(proj.Child.Schema(ctx))
		var batched []BatchExpression
		newProjections := make([]sql.Expression, len(proj.Projections))
		changed := false
		for i, p := range proj.Projections {
			np, same, err := transform.Expr(ctx, p, func(ctx *sql.Context, e sql.Expression) (sql.Expression, transform.TreeIdentity, error) {
				be, ok := e.(BatchExpression)
				if !ok {
					return e, transform.SameTree, nil
				}
				batched = append(batched, be)
				idx := width + len(batched) - 1
				// Column id 0: a later exec-index pass must not take it for a table column of id idx.
				gf := expression.NewGetField(idx, be.Type(ctx), fmt.Sprintf("__batch_%d", idx), be.IsNullable(ctx)).WithId(0)
				return gf.(sql.Expression), transform.NewTree, nil
			})
			if err != nil {
				return nil, transform.SameTree, err
			}
			newProjections[i] = np
			changed = changed || same == transform.NewTree
		}
		if !changed {
			return n, transform.SameTree, nil
		}
		child := &batchEval{UnaryNode: plan.UnaryNode{Child: proj.Child}, exprs: batched}
		np := plan.NewProject(newProjections, child)
		return np, transform.NewTree, nil
	})
}

// batchEval appends one column per batch expression to its child's rows, computing them a batch at a
// time.
type batchEval struct {
	plan.UnaryNode
	exprs []BatchExpression
}

var _ sql.ExecBuilderNode = (*batchEval)(nil)

func (b *batchEval) Schema(ctx *sql.Context) sql.Schema {
	s := append(sql.Schema{}, b.Child.Schema(ctx)...)
	for i, e := range b.exprs {
		s = append(s, &sql.Column{Name: fmt.Sprintf("__batch_%d", i), Type: e.Type(ctx), Nullable: true})
	}
	return s
}

func (b *batchEval) Resolved() bool {
	for _, e := range b.exprs {
		if !e.Resolved() {
			return false
		}
	}
	return b.Child.Resolved()
}

func (b *batchEval) IsReadOnly() bool { return b.Child.IsReadOnly() }

func (b *batchEval) String() string {
	names := make([]string, len(b.exprs))
	for i, e := range b.exprs {
		names[i] = e.String()
	}
	tp := sql.NewTreePrinter()
	_ = tp.WriteNode("BatchEval(%s, batch of %d rows)", strings.Join(names, ", "), BatchSize)
	_ = tp.WriteChildren(b.Child.String())
	return tp.String()
}

func (b *batchEval) WithChildren(_ *sql.Context, children ...sql.Node) (sql.Node, error) {
	if len(children) != 1 {
		return nil, sql.ErrInvalidChildrenNumber.New(b, len(children), 1)
	}
	nb := *b
	nb.Child = children[0]
	return &nb, nil
}

// BuildRowIter implements sql.ExecBuilderNode.
func (b *batchEval) BuildRowIter(ctx *sql.Context, builder sql.NodeExecBuilder, r sql.Row) (sql.RowIter, error) {
	child, err := builder.Build(ctx, b.Child, r)
	if err != nil {
		return nil, err
	}
	return &batchIter{node: b, child: child}, nil
}

// batchIter runs a two-stage pipeline so that reading the next batch from the child (DuckDB and GMS)
// overlaps with evaluating the current one (an RPC to a plugin process) and with the consumer taking
// its rows: a reader goroutine fills batches, an evaluator goroutine computes the batch columns, and
// Next hands out the finished rows in order. Only the reader touches the child iterator; Close stops
// both goroutines before closing it.
type batchIter struct {
	node  *batchEval
	child sql.RowIter

	once    sync.Once
	done    chan struct{}
	results chan batchResult
	wg      sync.WaitGroup

	cur []sql.Row
	pos int
	err error
}

type batchResult struct {
	rows []sql.Row
	err  error
}

func (it *batchIter) start(ctx *sql.Context) {
	it.done = make(chan struct{})
	reads := make(chan batchResult, 1)
	it.results = make(chan batchResult, 1)
	it.wg.Add(2)
	go func() { // reader
		defer it.wg.Done()
		defer close(reads)
		for {
			rows, err := it.read(ctx)
			if len(rows) > 0 || err != nil {
				select {
				case reads <- batchResult{rows, err}:
				case <-it.done:
					return
				}
			}
			if err != nil || len(rows) < BatchSize {
				return
			}
		}
	}()
	// Evaluation: up to evalParallelism batches at once, handed out in order. A plugin call then
	// overlaps with the host's work on another batch (randomising, packing). Statements that charge
	// the ledger evaluate one batch at a time: their memoised releases must be looked up and recorded
	// in order.
	parallel := evalParallelism
	if boundary.InGate(ctx) {
		parallel = 1
	}
	futures := make(chan chan batchResult, parallel-1)
	go func() { // evaluator: starts each batch's evaluation, in order
		defer it.wg.Done()
		defer close(futures)
		for b := range reads {
			f := make(chan batchResult, 1)
			select {
			case futures <- f:
			case <-it.done:
				return
			}
			if b.err != nil {
				f <- b
				return
			}
			if parallel == 1 {
				b.rows, b.err = it.eval(ctx, b.rows)
				f <- b
				continue
			}
			it.wg.Add(1)
			go func(b batchResult) {
				defer it.wg.Done()
				b.rows, b.err = it.eval(ctx, b.rows)
				f <- b
			}(b)
		}
	}()
	it.wg.Add(1)
	go func() { // collector: passes the results on in the order of the batches
		defer it.wg.Done()
		defer close(it.results)
		for f := range futures {
			var b batchResult
			select {
			case b = <-f:
			case <-it.done:
				return
			}
			select {
			case it.results <- b:
			case <-it.done:
				return
			}
			if b.err != nil {
				return
			}
		}
	}()
}

// evalParallelism is how many batches are evaluated at once outside the ledger.
const evalParallelism = 2

func (it *batchIter) Next(ctx *sql.Context) (sql.Row, error) {
	it.once.Do(func() { it.start(ctx) })
	if it.results == nil {
		return nil, io.EOF // closed before it started
	}
	for it.pos >= len(it.cur) {
		if it.err != nil {
			return nil, it.err
		}
		b, ok := <-it.results
		if !ok {
			it.err = io.EOF
			return nil, io.EOF
		}
		if b.err != nil {
			it.err = b.err
			return nil, b.err
		}
		it.cur, it.pos = b.rows, 0
	}
	r := it.cur[it.pos]
	it.cur[it.pos] = nil
	it.pos++
	return r, nil
}

// read takes up to BatchSize rows from the child; fewer means the child is exhausted.
func (it *batchIter) read(ctx *sql.Context) ([]sql.Row, error) {
	batch := make([]sql.Row, 0, BatchSize)
	for len(batch) < BatchSize {
		r, err := it.child.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		batch = append(batch, r)
	}
	return batch, nil
}

// eval computes the batch columns for rows and returns the extended rows. Columns are computed in
// order and appended before the next is evaluated, because a nested batch expression
// (LDP_DECODE(LDP_ENCODE(...))) reads the column of the inner one.
func (it *batchIter) eval(ctx *sql.Context, rows []sql.Row) ([]sql.Row, error) {
	width := 0
	if len(rows) > 0 {
		width = len(rows[0])
	}
	for i, r := range rows {
		ext := make(sql.Row, len(r), width+len(it.node.exprs))
		copy(ext, r)
		rows[i] = ext
	}
	for _, e := range it.node.exprs {
		args := make([][]any, len(rows))
		for i, r := range rows {
			a, err := evalArgs(ctx, r, e.BatchArgs())
			if err != nil {
				return nil, err
			}
			args[i] = a
		}
		out, err := e.EvalBatch(ctx, args)
		if err != nil {
			return nil, err
		}
		if len(out) != len(rows) {
			return nil, fmt.Errorf("%s returned %d results for %d rows", e, len(out), len(rows))
		}
		for i := range rows {
			rows[i] = append(rows[i], out[i])
		}
	}
	return rows, nil
}

// Close stops the pipeline, then closes the child.
func (it *batchIter) Close(ctx *sql.Context) error {
	it.once.Do(func() {}) // never start after Close
	if it.done != nil {
		close(it.done)
		it.wg.Wait()
	}
	return it.child.Close(ctx)
}
