package udf

import (
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/analyzer"
	"github.com/dolthub/go-mysql-server/sql/expression"
	"github.com/dolthub/go-mysql-server/sql/plan"
	"github.com/dolthub/go-mysql-server/sql/planbuilder"
	"github.com/dolthub/go-mysql-server/sql/transform"
	"github.com/dolthub/go-mysql-server/sql/types"

	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/udf/boundary"
)

// RRFrequency is the aggregate RR_FREQUENCY(y_noisy, eps, K, class): the Warner-debiased share of rows
// whose true label is class, estimated from labels released by FLIP_LABEL(y, eps, K). With p the keep and
// q the per-label flip probability, E[share of class among y_noisy] = q + (p − q)·f, so
// f̂ = (share − q)/(p − q), clipped to [0, 1]. Rows with a NULL y_noisy are skipped; eps, K and class
// must be the same on every row of a group.
//
// On a protected table a column of it is not a release yet: there RR_FREQUENCY(y, eps, K, class
// [, unit_key]) releases each row's y by k-RR at (eps, K) — the release FLIP_LABEL(y, eps, K) makes,
// charged to the row's unit through the ledger and memoised with it — and returns the debiased share of
// class among those releases (package boundary). A NULL or invalid y is released as a uniform label.
type RRFrequency struct {
	scalar
	id     sql.ColumnId
	window *sql.WindowDefinition
	// recorded: y_noisy is the label column of a table that ldp_privatize wrote, released at these eps
	// and K (rrRecordedRule); nil otherwise.
	recorded *recordedLabels
}

var _ sql.Aggregation = (*RRFrequency)(nil)
var _ sql.FunctionExpression = (*RRFrequency)(nil)

// NewRRFrequency builds RR_FREQUENCY(y_noisy, eps, K, class [, unit_key]).
func NewRRFrequency(_ *sql.Context, args ...sql.Expression) (sql.Expression, error) {
	f := &RRFrequency{scalar: scalar{name: "rr_frequency", args: args}}
	if len(args) == 5 { // the unit key is for the ledger (package boundary)
		return f, nil
	}
	return f, f.checkArity(4)
}

// registerAggregates tells GMS's planner which of our functions are aggregates (its list is otherwise
// hard-coded). It wraps the previous predicate, once.
var registerAggregates = sync.OnceFunc(func() {
	prev := planbuilder.IsAggregateFunc
	planbuilder.IsAggregateFunc = func(name string) bool {
		return name == "rr_frequency" || name == "private_accuracy" || prev(name)
	}
})

// Description implements sql.FunctionExpression.
func (f *RRFrequency) Description() string {
	return "Warner-debiased frequency of class among labels privatised by FLIP_LABEL(y, eps, K)"
}

// Type implements sql.Expression.
func (f *RRFrequency) Type(*sql.Context) sql.Type { return types.Float64 }

// IsNonDeterministic: the aggregate itself is deterministic given its input.
func (f *RRFrequency) IsNonDeterministic() bool { return false }

// Eval implements sql.Expression; an aggregate is evaluated through its buffer.
func (f *RRFrequency) Eval(*sql.Context, sql.Row) (any, error) {
	return nil, sql.ErrAggregationUnsupported.New(f.String())
}

// WithChildren implements sql.Expression.
func (f *RRFrequency) WithChildren(ctx *sql.Context, children ...sql.Expression) (sql.Expression, error) {
	nf, err := NewRRFrequency(ctx, children...)
	if err != nil {
		return nil, err
	}
	nf.(*RRFrequency).id, nf.(*RRFrequency).window, nf.(*RRFrequency).recorded = f.id, f.window, f.recorded
	return nf, nil
}

// Id implements sql.IdExpression.
func (f *RRFrequency) Id() sql.ColumnId { return f.id }

// WithId implements sql.IdExpression.
func (f *RRFrequency) WithId(id sql.ColumnId) sql.IdExpression {
	nf := *f
	nf.id = id
	return &nf
}

// Window implements sql.WindowAdaptableExpression.
func (f *RRFrequency) Window() *sql.WindowDefinition { return f.window }

// WithWindow implements sql.WindowAdaptableExpression.
func (f *RRFrequency) WithWindow(_ *sql.Context, w *sql.WindowDefinition) sql.WindowAdaptableExpression {
	nf := *f
	nf.window = w
	return &nf
}

// NewWindowFunction implements sql.WindowAdaptableExpression: RR_FREQUENCY is not a window function.
func (f *RRFrequency) NewWindowFunction(*sql.Context) (sql.WindowFunction, error) {
	return nil, fmt.Errorf("RR_FREQUENCY cannot be used as a window function (OVER ...)")
}

// NewBuffer implements sql.Aggregation.
func (f *RRFrequency) NewBuffer(*sql.Context) (sql.AggregationBuffer, error) {
	return &rrFrequencyBuffer{args: f.args, recorded: f.recorded}, nil
}

type rrFrequencyBuffer struct {
	args       []sql.Expression
	n, matches int64
	params     []any // eps, K, class of the first row, to check the rest against
	eps        float64
	k          int
	recorded   *recordedLabels
}

// Update implements sql.AggregationBuffer.
func (b *rrFrequencyBuffer) Update(ctx *sql.Context, row sql.Row) error {
	vals, err := evalArgs(ctx, row, b.args)
	if err != nil {
		return err
	}
	const fn = "RR_FREQUENCY"
	if b.params == nil {
		if vals[1] == nil || vals[2] == nil || vals[3] == nil {
			return fmt.Errorf("%s: eps, K and class must not be NULL", fn)
		}
		if b.eps, err = toEpsilon(ctx, fn, vals[1]); err != nil {
			return err
		}
		if b.k, err = toK(ctx, fn, vals[2]); err != nil {
			return err
		}
		// The estimate needs the k-RR that released the labels; an eps no k-RR accepts (outside
		// [MinEpsilon, MaxEpsilon]) is refused here, naming the argument, not by Eval after the scan.
		if _, err := mechanisms.NewKRR(b.eps, b.k); err != nil {
			return argError(fn, "eps", vals[1], err.Error())
		}
		class, err := toInt(ctx, fn, "class", vals[3])
		if err != nil {
			return err
		}
		if class < 0 || class >= int64(b.k) {
			return argError(fn, "class", vals[3], fmt.Sprintf("the class must be in 0..K-1 (K = %d)", b.k))
		}
		if err := b.recorded.check(b.eps, b.k); err != nil {
			return err
		}
		b.params = []any{b.eps, int64(b.k), class}
	} else {
		for i, name := range []string{"eps", "K", "class"} {
			var same bool
			switch i {
			case 0:
				e, err := toFloat(ctx, fn, name, vals[1])
				same = err == nil && e == b.eps
			default:
				v, err := toInt(ctx, fn, name, vals[i+1])
				same = err == nil && v == b.params[i].(int64)
			}
			if !same {
				return argError(fn, name, vals[i+1], fmt.Sprintf("must be the same on every row (first row had %v)", b.params[i]))
			}
		}
	}
	if vals[0] == nil {
		return nil
	}
	y, err := toInt(ctx, fn, "y_noisy", vals[0])
	if err != nil {
		return err
	}
	if y < 0 || y >= int64(b.k) {
		return argError(fn, "y_noisy", vals[0], fmt.Sprintf("a released label must be in 0..K-1 (K = %d)", b.k))
	}
	b.n++
	if y == b.params[2].(int64) {
		b.matches++
	}
	return nil
}

// Eval implements sql.AggregationBuffer. An empty group gives NULL.
func (b *rrFrequencyBuffer) Eval(*sql.Context) (any, error) {
	if b.n == 0 {
		return nil, nil
	}
	return mechanisms.WarnerEstimate(b.matches, b.n, b.eps, b.k)
}

// Dispose implements sql.Disposable.
func (b *rrFrequencyBuffer) Dispose(*sql.Context) {}

// recordedLabels is what ldp_privatize recorded of the labels of the table RR_FREQUENCY reads: they
// were released by k-RR at eps_y with K classes.
type recordedLabels struct {
	table string // db.table
	epsY  float64
	k     int
}

// check refuses an eps or K that contradicts the recorded ones: the estimate would silently be wrong.
func (r *recordedLabels) check(eps float64, k int) error {
	if r == nil {
		return nil
	}
	if math.Abs(eps-r.epsY) > 1e-9*math.Max(1, r.epsY) || k != r.k {
		return fmt.Errorf("RR_FREQUENCY: eps = %v and K = %d, but the labels of %s were released by ldp_privatize at eps_y = %v with K = %d "+
			"(its table comment); pass those, or the estimate is wrong", eps, k, r.table, r.epsY, r.k)
	}
	return nil
}

// rrRecordedRuleID is the analyzer rule id of rrRecordedRule.
const rrRecordedRuleID analyzer.RuleId = 100_012

func init() {
	analyzer.AlwaysBeforeDefault = append(analyzer.AlwaysBeforeDefault, analyzer.Rule{Id: rrRecordedRuleID, Apply: rrRecordedRule})
}

// rrRecordedRule binds each RR_FREQUENCY whose y_noisy is the label column of a table written by
// ldp_privatize (read directly, not through a derived table or view) to the eps_y and K recorded in that
// table's comment: literal eps and K that contradict them are an error here, others on the first row.
// Tables without that metadata are unaffected.
func rrRecordedRule(ctx *sql.Context, _ *analyzer.Analyzer, n sql.Node, _ *plan.Scope, _ analyzer.RuleSelector, _ *sql.QueryFlags) (sql.Node, transform.TreeIdentity, error) {
	if !containsRRFrequency(ctx, n) {
		return n, transform.SameTree, nil
	}
	labels := map[sql.ColumnId]*recordedLabels{}
	_ = boundary.WalkPlan(ctx, n, false, func(n sql.Node, _ bool) error {
		rt, ok := n.(*plan.ResolvedTable)
		if !ok || rt.Database() == nil {
			return nil
		}
		meta := privatizeMetadataOf(rt.UnderlyingTable())
		if meta == nil || meta.LabelCol == "" {
			return nil
		}
		schema, ids := rt.Schema(ctx), rt.Columns()
		if ids.Len() != len(schema) {
			return nil
		}
		i := 0
		ids.ForEach(func(id sql.ColumnId) {
			if strings.EqualFold(schema[i].Name, meta.LabelCol) {
				labels[id] = &recordedLabels{table: rt.Database().Name() + "." + rt.Name(), epsY: meta.EpsY, k: meta.K}
			}
			i++
		})
		return nil
	})
	if len(labels) == 0 {
		return n, transform.SameTree, nil
	}
	return transform.NodeExprsWithOpaque(ctx, n, func(ctx *sql.Context, e sql.Expression) (sql.Expression, transform.TreeIdentity, error) {
		f, ok := e.(*RRFrequency)
		if !ok || f.recorded != nil || len(f.args) < 4 {
			return e, transform.SameTree, nil
		}
		gf, ok := f.args[0].(*expression.GetField)
		if !ok || labels[gf.Id()] == nil {
			return e, transform.SameTree, nil
		}
		rec := labels[gf.Id()]
		if vals, ok := literalArgs(f.args[1], f.args[2]); ok {
			eps, err := toEpsilon(ctx, "RR_FREQUENCY", vals[0])
			if err != nil {
				return nil, transform.SameTree, err
			}
			k, err := toK(ctx, "RR_FREQUENCY", vals[1])
			if err != nil {
				return nil, transform.SameTree, err
			}
			if err := rec.check(eps, k); err != nil {
				return nil, transform.SameTree, err
			}
		}
		nf := *f
		nf.recorded = rec
		return &nf, transform.NewTree, nil
	})
}

// containsRRFrequency reports whether n (its subqueries and views included) calls RR_FREQUENCY.
func containsRRFrequency(ctx *sql.Context, n sql.Node) bool {
	found := false
	transform.InspectWithOpaque(ctx, n, func(ctx *sql.Context, n sql.Node) bool {
		if ex, ok := n.(sql.Expressioner); ok && !found {
			for _, e := range ex.Expressions() {
				if transform.InspectExpr(ctx, e, func(ctx *sql.Context, e sql.Expression) bool {
					_, ok := e.(*RRFrequency)
					return ok
				}) {
					found = true
				}
			}
		}
		return !found
	})
	return found
}
