package boundary

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/expression"
	"github.com/dolthub/go-mysql-server/sql/expression/function"
	"github.com/dolthub/go-mysql-server/sql/types"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/mechanisms"
)

// The aggregates in the ledger: PRIVATE_ACCURACY(correct, eps [, unit_key]) and
// RR_FREQUENCY(y, eps, K, class [, unit_key]) on a protected table.
//
// Each releases one value per row by k-RR — PRIVATE_ACCURACY the row's correctness bit (K = 2),
// RR_FREQUENCY its label — and returns the Warner-debiased share computed from the releases alone. On a
// protected table BindRule replaces the aggregate by a ledgerAggregate that carries the row's unit
// key (hidden arguments, as for FLIP_LABEL), and its buffers release through the statement's collector:
// every release is charged to its unit by the ledgerGate above, after the aggregation has run and before
// its result leaves the engine, and a statement that would over-spend a unit returns nothing.
//
// RR_FREQUENCY on an unprotected table takes labels already released (FLIP_LABEL's output) and
// releases nothing. On a protected table its argument is the true label, released at (eps, K) — the
// same release as FLIP_LABEL(y, eps, K), memoised together with it — so RR_FREQUENCY(y, eps, K, c)
// estimates the share of class c from y's releases; RR_FREQUENCY(FLIP_LABEL(y, …), …) is refused there
// (a release inside an aggregate), release in a derived table instead.
//
// An analyst's released argument is evaluated neither as the rows stream past nor before the budget
// is checked: Update collects the rows, and flush checks the statement's fresh releases against their
// units' budgets and then evaluates the argument in fixed time slots (evalDeferred; slots.go), so that
// neither a refusal nor the statement's running time depends on the values.
//
// Differences from the unprotected aggregates, because a protected table's value must not show through:
// a NULL (or, for an analyst, invalid) value is not skipped but released as the default input (a
// uniformly drawn bit or label), so the count of rows is not a function of the data.
//
// Memoisation (memoise mode) is keyed by the unit, the row and what is released, never by its value
// (engine.ReleaseDigest; see bind.go):
//
//   - the released argument is a plain column: the column, ε and K, exactly as FLIP_LABEL keys its
//     releases, so PRIVATE_ACCURACY(y, ε), RR_FREQUENCY(y, ε, 2, …) and FLIP_LABEL(y, ε, 2) share them;
//   - it is an expression (PREDICT('m', f) = y): a digest of the expression itself (expressionTag: its
//     canonical text, the identity — checksum and mechanism — of each model it applies, and the session
//     settings that evaluation depends on), ε and K. Validating the same model on the same rows again
//     costs nothing; another model, or any other expression, is a fresh release.
//
// Why not the value (the evaluated bit): an expression's bit is a function of the row that the analyst
// chooses. Keyed by value a unit would have just two memoised releases, r0 and r1, paid for once (2ε);
// every later expression e — `z > 50`, `z > 25`, … on one unit (WHERE id = 5) — would return r_{e(row)}
// for free, and whenever r0 ≠ r1 (probability ≥ 1/2) that reveals e(row) exactly: a binary search for z
// at a total cost of 2ε; and once the budget is spent, a hit (success) versus a miss (refusal) would
// reveal e(row) outright. Keyed by the expression, each distinct expression is its own release and is
// charged; repeating one reveals nothing new. An expression whose value the ledger cannot pin to its
// text (it reads a column of another table, a variable, or a function outside the allow-list of
// pureExpression) is released without memoisation: every release fresh and charged. An analyst may
// pass only pure expressions of the protected row.

// ledgerAggregate is PRIVATE_ACCURACY or RR_FREQUENCY bound to the ledger (see above).
type ledgerAggregate struct {
	fn       string           // upper-case function name
	args     []sql.Expression // the function's arguments (no unit key); args[0] is the released value
	units    []sql.Expression // the unit key
	row      []sql.Expression // the row's primary key, where the unit key does not identify the row (memoisation)
	keyTypes keyTypes         // the types units and row are keyed by
	table    engine.TableRef
	strict   bool // analyst: invalid values are released as the default input, never quoted in an error
	ledger   *engine.Ledger
	key      bindKey   // how releases are keyed for memoisation
	call     Aggregate // the function, which parses its parameters

	id     sql.ColumnId
	window *sql.WindowDefinition
}

// bindKey is what the bind rule knows of the released argument, for memoisation: what is released, by
// identity (never its value).
type bindKey struct {
	source string      // a column or LDP_VECTOR of columns of the protected row: columnsSource of its canonical text
	pure   bool        // else a pure expression of the row (pureExpression): keyed by expressionTag
	canon  string      // the expression's canonical text (pure only)
	models []ModelCall // the PREDICT calls whose models' identities complete the tag
	names  []string    // their (literal) model names
	noRow  bool        // the row within its unit cannot be identified (see bindUnit): never memoised
}

// columnsSource is the source of the memo key (engine.ReleaseDigest) of a release of the columns whose
// canonical text (pureExpression) is canon: "col(y)" for the column y, an LDP_VECTOR of columns for
// several. ldp_privatize's releases of a column use it too, so they share LDP_ENCODE's and FLIP_LABEL's.
func columnsSource(canon string) string { return "columns " + canon }

// columnCanon is pureExpression's canonical text of a column of the protected row.
func columnCanon(name string) string { return "col(" + strings.ToLower(name) + ")" }

// keyOf says what a release of arg (reading inst) releases: the columns it names, the expression (pure
// ones only), or nothing that can be pinned down (never memoised).
func (b *binder) keyOf(inst *tableInstance, arg sql.Expression) bindKey {
	canon, models, names, pure := pureExpression(b.ctx, arg, b.columnOf(inst))
	switch {
	case !pure:
		return bindKey{}
	case columnsOnly(arg):
		return bindKey{source: columnsSource(canon)}
	}
	return bindKey{pure: true, canon: canon, models: models, names: names}
}

// columnsOnly reports whether e is a column or LDP_VECTOR of columns.
func columnsOnly(e sql.Expression) bool {
	if g, ok := e.(*guarded); ok {
		e = g.inner
	}
	switch x := e.(type) {
	case *expression.GetField:
		return true
	case Vector:
		for _, c := range x.Children() {
			if _, ok := c.(*expression.GetField); !ok {
				return false
			}
		}
		return true
	}
	return false
}

// sourceOf is the source of k's memo keys (engine.ReleaseDigest), or "" where its releases are not
// memoised.
func (k bindKey) sourceOf(ctx *sql.Context) string {
	switch {
	case k.noRow:
		return ""
	case k.source != "":
		return k.source
	case k.pure:
		return "expression " + expressionTag(ctx, k)
	}
	return ""
}

var _ sql.Aggregation = (*ledgerAggregate)(nil)
var _ sql.FunctionExpression = (*ledgerAggregate)(nil)
var _ sql.NonDeterministicExpression = (*ledgerAggregate)(nil)

func (a *ledgerAggregate) FunctionName() string { return strings.ToLower(a.fn) }
func (a *ledgerAggregate) Description() string {
	return "an aggregate of releases charged to the privacy ledger"
}
func (a *ledgerAggregate) IsNullable(*sql.Context) bool { return true }
func (a *ledgerAggregate) IsNonDeterministic() bool     { return true }
func (a *ledgerAggregate) Type(*sql.Context) sql.Type   { return types.Float64 }
func (a *ledgerAggregate) Children() []sql.Expression {
	return append(append(append([]sql.Expression{}, a.args...), a.units...), a.row...)
}

func (a *ledgerAggregate) Resolved() bool {
	for _, c := range a.Children() {
		if !c.Resolved() {
			return false
		}
	}
	return true
}

// String is the function's own text (GMS matches aggregates to the columns that read them by it).
func (a *ledgerAggregate) String() string {
	parts := make([]string, len(a.args))
	for i, x := range a.args {
		parts[i] = x.String()
	}
	return fmt.Sprintf("%s(%s)", a.fn, strings.Join(parts, ", "))
}

// DebugString shows the binding.
func (a *ledgerAggregate) DebugString(ctx *sql.Context) string {
	units := make([]string, len(a.units))
	for i, u := range a.units {
		units[i] = u.String()
	}
	return fmt.Sprintf("%s [ledger %s, unit %s]", a.String(), a.table, strings.Join(units, ", "))
}

func (a *ledgerAggregate) WithChildren(_ *sql.Context, children ...sql.Expression) (sql.Expression, error) {
	n, nu := len(a.args), len(a.units)
	if len(children) != n+nu+len(a.row) {
		return nil, sql.ErrInvalidChildrenNumber.New(a, len(children), n+nu+len(a.row))
	}
	na := *a
	na.args = append([]sql.Expression{}, children[:n]...)
	na.units = append([]sql.Expression{}, children[n:n+nu]...)
	na.row = append([]sql.Expression{}, children[n+nu:]...)
	return &na, nil
}

// Eval implements sql.Expression; an aggregate is evaluated through its buffer.
func (a *ledgerAggregate) Eval(*sql.Context, sql.Row) (any, error) {
	return nil, sql.ErrAggregationUnsupported.New(a.String())
}

func (a *ledgerAggregate) Id() sql.ColumnId { return a.id }
func (a *ledgerAggregate) WithId(id sql.ColumnId) sql.IdExpression {
	na := *a
	na.id = id
	return &na
}
func (a *ledgerAggregate) Window() *sql.WindowDefinition { return a.window }
func (a *ledgerAggregate) WithWindow(_ *sql.Context, w *sql.WindowDefinition) sql.WindowAdaptableExpression {
	na := *a
	na.window = w
	return &na
}
func (a *ledgerAggregate) NewWindowFunction(*sql.Context) (sql.WindowFunction, error) {
	return nil, fmt.Errorf("%s on protected table %s cannot be used as a window function (OVER ...)", a.fn, a.table)
}

// NewBuffer implements sql.Aggregation. The buffers of one aggregate in one statement share a queue, so
// releases are made (and memoised releases looked up) in batches across groups.
func (a *ledgerAggregate) NewBuffer(ctx *sql.Context) (sql.AggregationBuffer, error) {
	c := collectorFrom(ctx)
	if c == nil {
		return nil, fmt.Errorf("%s on protected table %s has no ledger here: releases of protected data are allowed in SELECT, "+
			"INSERT … SELECT and CREATE TABLE … AS SELECT; nothing was released", a.fn, a.table)
	}
	q, err := c.aggQueue(ctx, a)
	if err != nil {
		return nil, err
	}
	return &ledgerAggBuffer{q: q}, nil
}

// aggregateBatch is how many releases an aggregate's buffers queue before making them: udf's BatchSize,
// the batch its row functions release in.
const aggregateBatch = 4096

// aggQueue is the releases an aggregate's buffers have asked for and not yet made.
type aggQueue struct {
	a      *ledgerAggregate
	c      *Collector
	b      engine.Budget
	source string // the memo keys' source ("": not memoised)

	mu      sync.Mutex
	pending []pendingRelease
}

type pendingRelease struct {
	buf  *ledgerAggBuffer
	unit string
	row  string // the row within its unit ("" where the unit is the row)
	y    int    // the input; -1 for the default
	krr  *mechanisms.KRR

	// deferred is the row whose released argument is still to be evaluated (an analyst's: in a time
	// slot, after the budget check; see slots.go), nil once y holds the input.
	deferred sql.Row
}

// aggQueue returns the statement's queue of aggregate a, creating it (and computing a's release key).
func (c *Collector) aggQueue(ctx *sql.Context, a *ledgerAggregate) (*aggQueue, error) {
	c.mu.Lock()
	q := c.queues[a]
	c.mu.Unlock()
	if q != nil {
		return q, nil
	}
	b, ok := a.ledger.Budget(a.table)
	if !ok {
		return nil, fmt.Errorf("%s: table %s is no longer protected; run the statement again", a.fn, a.table)
	}
	q = &aggQueue{a: a, c: c, b: b, source: a.key.sourceOf(ctx)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.queues == nil {
		c.queues = map[*ledgerAggregate]*aggQueue{}
	}
	if prev := c.queues[a]; prev != nil {
		return prev, nil
	}
	c.queues[a] = q
	return q, nil
}

func (q *aggQueue) add(ctx *sql.Context, p pendingRelease) error {
	q.mu.Lock()
	q.pending = append(q.pending, p)
	full := len(q.pending) >= aggregateBatch
	q.mu.Unlock()
	if full {
		return q.flush(ctx)
	}
	return nil
}

// flush makes every pending release (through the collector, which collects their charges) and counts
// each in its buffer. An analyst's released arguments are evaluated here, after the budget check and in
// time slots (evalDeferred).
func (q *aggQueue) flush(ctx *sql.Context) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pending) == 0 {
		return nil
	}
	groups := map[[2]float64]*releaseGroup{}
	var order []*releaseGroup
	for _, p := range q.pending {
		k := [2]float64{p.krr.Epsilon(), float64(p.krr.K())}
		g := groups[k]
		if g == nil {
			g = &releaseGroup{krr: p.krr}
			groups[k] = g
			order = append(order, g)
		}
		g.items = append(g.items, p)
	}
	q.pending = nil
	if err := q.evalDeferred(ctx, order); err != nil {
		return err
	}
	for _, g := range order {
		units, what, ys := g.releases(q.source)
		released, err := q.c.ReleaseLabels(ctx, q.b, q.a.fn, g.krr, units, what, ys)
		if err != nil {
			return err
		}
		for i, p := range g.items {
			p.buf.n++
			if int64(released[i]) == p.buf.params.Class {
				p.buf.hits++
			}
		}
	}
	return nil
}

// releaseGroup is the pending releases of one (ε, K).
type releaseGroup struct {
	krr   *mechanisms.KRR
	items []pendingRelease
}

// releases is what releaseLabels takes for the group's items.
func (g *releaseGroup) releases(source string) (units []string, what What, ys []int) {
	units = make([]string, len(g.items))
	what = What{Source: source, Rows: make([]string, len(g.items))}
	ys = make([]int, len(g.items))
	for i, p := range g.items {
		units[i], what.Rows[i], ys[i] = p.unit, p.row, p.y
	}
	return units, what, ys
}

// evalDeferred evaluates the released arguments that Update deferred (an analyst's), once the
// statement's budget has room for every fresh release the groups will make (precheck), in time slots
// (slots.go): a refused statement evaluates nothing, and an accepted one takes a time that depends on
// how many fresh releases it makes, not on the values. A memoised release is returned as recorded, so
// its argument is not evaluated (whether a release is memoised never depends on the value).
func (q *aggQueue) evalDeferred(ctx *sql.Context, groups []*releaseGroup) error {
	deferred := false
	for _, g := range groups {
		for _, p := range g.items {
			deferred = deferred || p.deferred != nil
		}
	}
	if !deferred {
		return nil
	}
	fresh, err := q.precheck(ctx, groups)
	if err != nil {
		return err
	}
	type at struct{ g, i int }
	var where []at
	for gi, idx := range fresh {
		for _, i := range idx {
			if groups[gi].items[i].deferred != nil {
				where = append(where, at{gi, i})
			}
		}
	}
	slot := releaseSlot(ctx)
	ys, late, err := evalInSlots(ctx, slot, len(where), func(k int) int {
		p := groups[where[k].g].items[where[k].i]
		v, err := q.a.args[0].Eval(ctx, p.deferred) // guarded: an error is invalidValue
		if err != nil {
			return -1
		}
		y, err := q.a.input(ctx, v, p.krr.K())
		if err != nil {
			return -1
		}
		return y
	}, -1)
	if err != nil {
		return err
	}
	if log := slotLog.Load(); late > 0 && log != nil {
		(*log)("%s on %s (user %s): %d of %d release expressions ran past their %v slot and were released from the default input; "+
			"if the machine is not overloaded, raise ldp_release_slot_us", q.a.fn, q.a.table, q.c.by, late, len(where), slot)
	}
	for k, w := range where {
		groups[w.g].items[w.i].y = ys[k]
	}
	for _, g := range groups {
		for i := range g.items {
			g.items[i].deferred = nil // a memoised or repeated release: its input is not used
		}
	}
	return nil
}

// precheck refuses, before anything is evaluated, releases whose fresh ones (those not memoised) would
// take a unit over its budget, counting what the statement has collected so far; it returns the
// positions of each group's fresh releases.
func (q *aggQueue) precheck(ctx *sql.Context, groups []*releaseGroup) ([][]int, error) {
	var charges []engine.Charge
	fresh := make([][]int, len(groups))
	for gi, g := range groups {
		units, what, _ := g.releases(q.source)
		var err error
		_, fresh[gi], _, err = q.c.split(ctx, q.b, units, what.Digests(len(units), "k-rr", "k-rr", g.krr.Epsilon(), g.krr.K()), what.Source != "")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", q.a.fn, err)
		}
		for _, i := range fresh[gi] {
			charges = append(charges, engine.Charge{Table: q.b.TableRef, Unit: units[i], Eps: g.krr.Epsilon()})
		}
	}
	if err := q.c.check(charges); err != nil {
		return nil, err
	}
	return fresh, nil
}

// ledgerAggBuffer is one group's buffer. Its counts are complete once its queue is flushed.
type ledgerAggBuffer struct {
	q *aggQueue

	params  *KRRParams // the first row's ε, K and class, which every row of the group must repeat
	n, hits int64      // rows released, and releases equal to class
}

// Update implements sql.AggregationBuffer: it queues the row's release.
func (b *ledgerAggBuffer) Update(ctx *sql.Context, row sql.Row) error {
	a := b.q.a
	fn := a.fn
	// An analyst's released argument is not evaluated here but in flush, after the budget check and in a
	// time slot (slots.go); the other arguments (ε, K, class: the same on every row; the unit and row
	// keys: columns an analyst may read) are.
	children := a.Children()
	vals := make([]any, len(children))
	for i, c := range children {
		if i == 0 && a.strict {
			continue
		}
		v, err := c.Eval(ctx, row)
		if err != nil {
			return err
		}
		vals[i] = v
	}
	p, err := a.call.KRRParams(ctx, vals[1:len(a.args)], b.params)
	if err != nil {
		return err
	}
	b.params = p
	n, nu := len(a.args), len(a.units)
	unit, err := engine.UnitKey(a.keyTypes.unit, vals[n:n+nu]...)
	if err != nil {
		return fmt.Errorf("%s on protected table %s: %w (a NULL unit_key names no unit)", fn, a.table, err)
	}
	rowKey := ""
	if len(a.row) > 0 {
		if rowKey, err = engine.UnitKey(a.keyTypes.row, vals[n+nu:]...); err != nil {
			return fmt.Errorf("%s on protected table %s: the row's primary key: %w", fn, a.table, err)
		}
	}
	if a.strict {
		return b.q.add(ctx, pendingRelease{buf: b, unit: unit, row: rowKey, y: -1, krr: b.params.KRR, deferred: append(sql.Row(nil), row...)})
	}
	y, err := a.input(ctx, vals[0], b.params.KRR.K())
	if err != nil {
		return err
	}
	return b.q.add(ctx, pendingRelease{buf: b, unit: unit, row: rowKey, y: y, krr: b.params.KRR})
}

// input is the k-RR input for the released argument's value v: the bit or label, or -1 (the default: a
// uniformly drawn bit or label) for a NULL, and for an analyst's invalid value (a DBA's is an error).
func (a *ledgerAggregate) input(ctx *sql.Context, v any, k int) (int, error) {
	if IsDefault(v) {
		return -1, nil
	}
	x, err := a.call.KRRInput(ctx, v, k)
	switch {
	case err == nil:
		return x, nil
	case !a.strict:
		return 0, err
	}
	return -1, nil
}

// Eval implements sql.AggregationBuffer: the Warner-debiased share of the class among the group's
// releases (clipped to [0, 1]); NULL for an empty group.
func (b *ledgerAggBuffer) Eval(ctx *sql.Context) (any, error) {
	if err := b.q.flush(ctx); err != nil {
		return nil, err
	}
	if b.n == 0 {
		return nil, nil
	}
	return mechanisms.WarnerEstimate(b.hits, b.n, b.params.KRR.Epsilon(), b.params.KRR.K())
}

// Dispose implements sql.Disposable.
func (b *ledgerAggBuffer) Dispose(*sql.Context) {}

// ---------------------------------------------------------------------------------------------------
// Pure expressions and their tags

// tagSessionVariables are the session settings an allowed expression's value may depend on (string
// comparison, arithmetic, conversions); the tag includes them, so changing one is another release.
var tagSessionVariables = []string{"sql_mode", "collation_connection", "character_set_connection", "time_zone", "div_precision_increment"}

// expressionTag completes a pure expression's canonical text with what its value depends on beyond the
// row: each model's identity and the session settings.
func expressionTag(ctx *sql.Context, k bindKey) string {
	h := sha256.New()
	field := func(s string) {
		fmt.Fprintf(h, "%d:%s;", len(s), s)
	}
	field("ldpsql expression v1")
	field(k.canon)
	for i, p := range k.models {
		field(p.ModelIdentity(ctx, k.names[i]))
	}
	for _, name := range tagSessionVariables {
		v, err := ctx.GetSessionVariable(ctx, name)
		if err != nil {
			field(name + "=?")
			continue
		}
		if name == "sql_mode" {
			v = engine.MemoSQLMode(fmt.Sprint(v))
		}
		field(fmt.Sprintf("%s=%v", name, v))
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// literalText is a literal's value as text that tells values of its type apart (Go syntax, not the
// pointers inside a decimal).
func literalText(v any) string {
	switch x := v.(type) {
	case []byte:
		return fmt.Sprintf("x'%x'", x)
	case fmt.Stringer:
		return fmt.Sprintf("%q", x.String())
	}
	return fmt.Sprintf("%#v", v)
}

// nodeDetail is what an allowed node does beyond its type and its children.
func nodeDetail(ctx *sql.Context, e sql.Expression) string {
	switch x := e.(type) {
	case *expression.IsTrue:
		return strings.TrimPrefix(x.String(), x.Child.String()) // IS TRUE, IS FALSE
	case *expression.Convert:
		return x.Type(ctx).String()
	case *expression.Case:
		return fmt.Sprintf("operand %t, %d branches, else %t", x.Expr != nil, len(x.Branches), x.Else != nil)
	case *expression.BitOp:
		return x.Op
	case *expression.Like:
		if lit, ok := x.Escape.(*expression.Literal); ok {
			return fmt.Sprintf("escape %#v", lit.Value())
		}
	case interface{ Operator() string }: // arithmetic operators
		return x.Operator()
	}
	return ""
}

// pureExpression reports whether e computes a value from the protected row alone (inst's columns, via
// columnOf) and literals, through operators and functions whose result depends on nothing else (no
// variables, no time, no randomness, no other row or table), and returns its canonical text and the
// PREDICT calls in it (whose models must have literal names). columnOf maps a column reference to the
// protected column it reads (a reference through a derived table or view resolved), or "" if none.
func pureExpression(ctx *sql.Context, e sql.Expression, columnOf func(*expression.GetField) string) (canon string, models []ModelCall, names []string, ok bool) {
	var sb strings.Builder
	ok = true
	var walk func(e sql.Expression)
	walk = func(e sql.Expression) {
		if !ok {
			return
		}
		switch x := e.(type) {
		case *guarded:
			walk(x.inner)
			return
		case *expression.GetField:
			col := columnOf(x)
			if col == "" {
				ok = false
				return
			}
			sb.WriteString(columnCanon(col))
			return
		case *expression.Literal:
			fmt.Fprintf(&sb, "lit(%s,%T,%s)", x.Type(ctx).String(), x.Value(), literalText(x.Value()))
			return
		case ModelCall:
			args := x.Children()
			name, isLit := args[0].(*expression.Literal)
			if !isLit || name.Value() == nil {
				ok = false
				return
			}
			if len(args) == 3 {
				if _, isLit := args[2].(*expression.Literal); !isLit {
					ok = false
					return
				}
			}
			models, names = append(models, x), append(names, fmt.Sprint(name.Value()))
		case Vector:
		case *expression.Equals, *expression.NullSafeEquals, *expression.GreaterThan, *expression.LessThan,
			*expression.GreaterThanOrEqual, *expression.LessThanOrEqual,
			*expression.And, *expression.Or, *expression.Xor, *expression.Not, *expression.IsNull, *expression.IsTrue,
			*expression.Arithmetic, *expression.Div, *expression.IntDiv, *expression.Mod, *expression.UnaryMinus, *expression.BitOp,
			*expression.Between, *expression.InTuple, *expression.HashInTuple, expression.Tuple,
			*expression.Convert, *expression.Case,
			*function.If, *function.Coalesce, *function.IfNull, *function.NullIf:
		case *expression.Like:
			if x.Escape != nil {
				if _, isLit := x.Escape.(*expression.Literal); !isLit {
					ok = false
					return
				}
			}
		default:
			ok = false
			return
		}
		// The node: its type, what it does beyond its type (an operator, a target type) and its children's
		// canonical texts, in order. (Not its text: that would name columns by their aliases and models
		// by their names; a model is identified by expressionTag.)
		fmt.Fprintf(&sb, "%T{%s}(", e, nodeDetail(ctx, e))
		children := e.Children()
		if _, isPredict := e.(ModelCall); isPredict {
			children = children[1:] // the model's name
		}
		for i, c := range children {
			if i > 0 {
				sb.WriteString(",")
			}
			walk(c)
		}
		sb.WriteString(")")
	}
	walk(e)
	if !ok {
		return "", nil, nil, false
	}
	return sb.String(), models, names, true
}
