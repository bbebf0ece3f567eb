package engine

import (
	"io"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/expression/function/aggregation"
	"github.com/dolthub/go-mysql-server/sql/hash"
	"github.com/dolthub/go-mysql-server/sql/plan"
	"github.com/dolthub/go-mysql-server/sql/rowexec"
)

// GROUP BY with grouping expressions runs on groupingIter, in the statement's own goroutine.
//
// GMS's iterator for it (rowexec's groupByGroupingIter) reads its child on a second goroutine into a
// channel of 512 rows and sends without watching the context. When a grouping key or an aggregate
// fails on some row (an unknown model in PREDICT, a released value over budget, malformed JSON) while
// the reader is 512 rows ahead, nobody receives again: the reader blocks for ever, the statement never
// returns its error, and KILL QUERY cannot end it (a server shutting down waits for it in vain). That
// is still so in GMS's newest code (sql/rowexec/agg.go, compute). groupingBuilder builds this one in its
// place; the groups come out in the order of their first row, as GMS's do. A report for GMS, with a
// reproduction on its memory engine, is docs/upstream/go-mysql-server-groupby-hang.md.

// groupingBuilder is the analyzer's priority exec builder: it builds a GROUP BY with grouping
// expressions and leaves every other node to GMS (a nil iterator).
type groupingBuilder struct{ base *rowexec.BaseBuilder }

var _ sql.NodeExecBuilder = groupingBuilder{}

// installGroupingBuilder makes the engine's analyzer build grouped GROUP BYs with groupingIter.
func (e *Engine) installGroupingBuilder() {
	b := e.GMS.Analyzer.ExecBuilder
	b.PriorityBuilder = groupingBuilder{base: b}
}

// Build implements sql.NodeExecBuilder.
func (g groupingBuilder) Build(ctx *sql.Context, n sql.Node, r sql.Row) (sql.RowIter, error) {
	gb, ok := n.(*plan.GroupBy)
	if !ok || len(gb.GroupByExprs) == 0 {
		return nil, nil
	}
	child, err := g.base.Build(ctx, gb.Child, r)
	if err != nil {
		return nil, err
	}
	keySch := make(sql.Schema, len(gb.GroupByExprs))
	for i, e := range gb.GroupByExprs {
		keySch[i] = &sql.Column{Type: e.Type(ctx)}
	}
	return &groupingIter{child: child, selected: gb.SelectDeps, grouping: gb.GroupByExprs,
		keySch: keySch, keyRow: make(sql.Row, len(gb.GroupByExprs))}, nil
}

// groupingIter reads all of its child's rows at the first Next, folds each into its group's
// aggregation buffers (a selected expression that is no aggregate keeps its first value, as in MySQL
// without ONLY_FULL_GROUP_BY), then returns one row per group.
type groupingIter struct {
	child              sql.RowIter
	selected, grouping []sql.Expression
	keySch             sql.Schema
	keyRow             sql.Row

	read   bool
	groups map[uint64][]sql.AggregationBuffer
	keys   []uint64 // in the order of each group's first row
	pos    int
}

// Next implements sql.RowIter.
func (i *groupingIter) Next(ctx *sql.Context) (sql.Row, error) {
	if !i.read {
		i.read = true
		if err := i.fold(ctx); err != nil {
			return nil, err
		}
	}
	if i.pos >= len(i.keys) {
		return nil, io.EOF
	}
	bufs := i.groups[i.keys[i.pos]]
	i.pos++
	row := make(sql.Row, len(bufs))
	for j, b := range bufs {
		v, err := b.Eval(ctx)
		if err != nil {
			return nil, err
		}
		row[j] = v
	}
	return row, nil
}

func (i *groupingIter) fold(ctx *sql.Context) error {
	i.groups = map[uint64][]sql.AggregationBuffer{}
	for {
		row, err := i.child.Next(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		key, err := i.key(ctx, row)
		if err != nil {
			return err
		}
		bufs, ok := i.groups[key]
		if !ok {
			bufs = make([]sql.AggregationBuffer, len(i.selected))
			for j, e := range i.selected {
				if bufs[j], err = newBuffer(ctx, e); err != nil {
					return err
				}
			}
			i.groups[key] = bufs
			i.keys = append(i.keys, key)
		}
		for _, b := range bufs {
			if err := b.Update(ctx, row); err != nil {
				return err
			}
		}
	}
}

// key hashes the row's grouping values as GMS does (an extended type by its serialised value).
func (i *groupingIter) key(ctx *sql.Context, row sql.Row) (uint64, error) {
	for k, e := range i.grouping {
		v, err := e.Eval(ctx, row)
		if err != nil {
			return 0, err
		}
		if ext, ok := e.Type(ctx).(sql.ExtendedType); ok {
			b, err := ext.SerializeValue(ctx, v)
			if err != nil {
				return 0, err
			}
			v = string(b)
		}
		i.keyRow[k] = v
	}
	return hash.HashOf(ctx, i.keySch, i.keyRow)
}

func newBuffer(ctx *sql.Context, e sql.Expression) (sql.AggregationBuffer, error) {
	if agg, ok := e.(sql.Aggregation); ok {
		return agg.NewBuffer(ctx)
	}
	return aggregation.NewFirst(e).NewBuffer(ctx)
}

// Close implements sql.RowIter.
func (i *groupingIter) Close(ctx *sql.Context) error {
	for _, bufs := range i.groups {
		for _, b := range bufs {
			if b != nil {
				b.Dispose(ctx)
			}
		}
	}
	i.groups = nil
	return i.child.Close(ctx)
}
