package udf

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/analyzer"
	"github.com/dolthub/go-mysql-server/sql/expression"
	"github.com/dolthub/go-mysql-server/sql/plan"
	"github.com/dolthub/go-mysql-server/sql/transform"
	"github.com/dolthub/go-mysql-server/sql/types"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/plugins/sdk"
	"github.com/ldpsql/ldpsql/udf/boundary"
)

// The short forms (issue #19, item 1): LDP_ENCODE(column, eps), LDP_ENCODE_JSON(column, eps) and
// TRAIN_NOISY_CLASSIFIER('table').
//
//   - A DBA names a column's default release: CALL ldp_set_default_mechanism('table', 'column',
//     'mechanism' [, 'randomiser']) (randomiser left out: laplace), kept in
//     ldpsql_catalog.ldp_default_mechanisms (engine/defaults.go), which every user may read, as
//     ldp_mechanisms; CALL ldp_drop_default_mechanism('table', 'column') removes it. Both are AdminOnly,
//     like the other procedures that change the catalog.
//   - LDP_ENCODE(column, eps) is rewritten by shortFormsRule, at analysis and before the ledger's bind
//     rule, into LDP_ENCODE(column, eps, 'mechanism', 'randomiser') with the column's default. The column
//     is found as the ledger finds the column a release reads (boundary.RowwiseBase over boundary.DerivedColumns: through
//     derived tables, views, CTEs and aliases, one column of one row); anything else, or a column
//     without a default, is an error that says what to do. From then on it is the long form in every
//     respect — the ledger's charge and memo key, batching, NULL handling, the roles — because nothing
//     but the long form is left in the plan. A short form that somehow escaped the rewrite fails rather
//     than release (errShortNotExpanded).
//   - TRAIN_NOISY_CLASSIFIER('table') is TRAIN_NOISY_CLASSIFIER('table', params) with params chosen from
//     the table's ldp_privatize metadata (shortTrainParams).

// errShortNotExpanded is the error of a short form the analyzer did not rewrite.
func errShortNotExpanded(fn string) error {
	return fmt.Errorf("%s(col, eps): the two-argument form is resolved when the statement is planned, and was not here; write %s(col, eps, 'mechanism')", fn, fn)
}

// ---------------------------------------------------------------------------------------------------
// The procedures

func (p *procedures) defaultDetails() []sql.ExternalStoredProcedureDetails {
	schema := sql.Schema{
		{Name: "table", Type: types.LongText},
		{Name: "column", Type: types.LongText},
		{Name: "mechanism", Type: types.LongText},
		{Name: "randomiser", Type: types.LongText},
	}
	return []sql.ExternalStoredProcedureDetails{
		{Name: "ldp_set_default_mechanism", Schema: schema, AdminOnly: true, Function: func(ctx *sql.Context, table, column, mechanism string) (sql.RowIter, error) {
			return p.setDefault(ctx, table, column, mechanism, "")
		}},
		{Name: "ldp_set_default_mechanism", Schema: schema, AdminOnly: true, Function: p.setDefault},
		{Name: "ldp_drop_default_mechanism", Schema: schema[:2], AdminOnly: true, Function: p.dropDefault},
	}
}

// setDefault is CALL ldp_set_default_mechanism('table', 'column', 'mechanism' [, 'randomiser']): the
// column's default release, replacing an earlier one. The table and column must exist, the mechanism be
// registered and ready (fitted), and the randomiser one that can release the mechanism's recorded
// output set (the check LDP_ENCODE makes).
func (p *procedures) setDefault(ctx *sql.Context, table, column, mechanism, randomiser string) (sql.RowIter, error) {
	const fn = "ldp_set_default_mechanism"
	t, ref, err := p.resolveTable(ctx, fn, table)
	if err != nil {
		return nil, err
	}
	if strings.EqualFold(ref.Database, engine.CatalogSchema) {
		return nil, fmt.Errorf("%s: %s is a catalog table", fn, ref)
	}
	schema := t.Schema(ctx)
	i := schema.IndexOfColName(column)
	if i < 0 {
		names := make([]string, len(schema))
		for k, c := range schema {
			names[k] = c.Name
		}
		return nil, fmt.Errorf("%s: table %s has no column %q (its columns: %s)", fn, ref, column, strings.Join(names, ", "))
	}
	column = schema[i].Name
	randomiser = strings.ToLower(strings.TrimSpace(randomiser))
	if randomiser == "" {
		randomiser = mechanisms.RandomiserLaplace
	}
	rec, err := p.mechs.catalog.Mechanism(ctx, mechanism)
	if errors.Is(err, engine.ErrNoMechanism) {
		return nil, fmt.Errorf("%s: unknown mechanism %q (SELECT name FROM ldpsql_catalog.ldp_mechanisms lists them)", fn, mechanism)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	var desc sdk.Description
	if err := json.Unmarshal(rec.Description, &desc); err != nil {
		return nil, fmt.Errorf("%s: mechanism %q: recorded description: %w", fn, rec.Name, err)
	}
	if !desc.Ready() {
		return nil, fmt.Errorf("%s: mechanism %q has no fitted model, so it cannot release anything: fit one with CALL ldp_fit_mechanism('new_name', '%s', 'aux_table', 'features_col', '{...}') and name that",
			fn, rec.Name, rec.Name)
	}
	set, err := outputSet(desc)
	if err != nil {
		return nil, fmt.Errorf("%s: mechanism %q: %w", fn, rec.Name, err)
	}
	if _, err := mechanisms.NewRandomiser(randomiser, set, 1); err != nil {
		return nil, fmt.Errorf("%s: randomiser %q cannot release mechanism %q (output set %s): %w", fn, randomiser, rec.Name, describeRow("", "", desc)[4], err)
	}
	if msg := mechanisms.RandomiserCaveatAnyEpsilon(randomiser, set); msg != "" {
		warnOnce(ctx, warnPoorRandomiser, fmt.Sprintf("mechanism %q: %s", rec.Name, msg))
		p.log("%s: mechanism %q: %s", fn, rec.Name, msg)
	}
	def := engine.DefaultMechanism{TableRef: ref, Column: column, Mechanism: rec.Name, Randomiser: randomiser, SetBy: user(ctx), SetAt: time.Now()}
	if err := p.e.Catalog.SetDefaultMechanism(ctx, def); err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	p.log("%s: %s.%s is released by LDP_ENCODE(%s, eps) through %s with %s (set by %s)", fn, ref, column, column, rec.Name, randomiser, def.SetBy)
	return sql.RowsToRowIter(sql.Row{ref.String(), column, rec.Name, randomiser}), nil
}

// dropDefault is CALL ldp_drop_default_mechanism('table', 'column'). The table need not exist any more
// (a default stays after DROP TABLE, as a budget does).
func (p *procedures) dropDefault(ctx *sql.Context, table, column string) (sql.RowIter, error) {
	const fn = "ldp_drop_default_mechanism"
	dbName, name := splitTable(ctx, table)
	ref := engine.TableRef{Database: dbName, Table: name}
	if d, err := p.e.Provider.Database(ctx, dbName); err == nil {
		ref.Database = d.Name()
		if t, err := p.table(ctx, dbName, name); err == nil {
			ref.Table = t.Name()
		}
	}
	err := p.e.Catalog.DropDefaultMechanism(ctx, ref, column)
	if errors.Is(err, engine.ErrNoDefaultMechanism) {
		return nil, fmt.Errorf("%s: %s.%s has no default mechanism (SELECT * FROM ldpsql_catalog.ldp_default_mechanisms lists them)", fn, ref, column)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	p.log("%s: %s.%s has no default mechanism any more (dropped by %s)", fn, ref, column, user(ctx))
	return sql.RowsToRowIter(sql.Row{ref.String(), column}), nil
}

// ---------------------------------------------------------------------------------------------------
// LDP_ENCODE(column, eps)

// shortFormsRule rewrites every LDP_ENCODE(column, eps) and LDP_ENCODE_JSON(column, eps) of the
// statement — in its SELECT lists, derived tables, views, CTEs, subquery expressions and INSERT source —
// into the four-argument form with the column's default mechanism and randomiser. It runs on the whole
// statement (like boundary.BindRule, which it precedes), and again, finding nothing left, on the subqueries
// that GMS analyses on their own.
func shortFormsRule(ctx *sql.Context, _ *analyzer.Analyzer, n sql.Node, _ *plan.Scope, _ analyzer.RuleSelector, _ *sql.QueryFlags) (sql.Node, transform.TreeIdentity, error) {
	if !hasShortForm(ctx, n) {
		return n, transform.SameTree, nil
	}
	sf := &shortForms{ctx: ctx, cols: map[sql.ColumnId]shortColumn{}}
	err := boundary.WalkPlan(ctx, n, false, func(n sql.Node, _ bool) error {
		rt, ok := n.(*plan.ResolvedTable)
		if !ok || rt.Database() == nil {
			return nil
		}
		cols, err := boundary.ColumnsByID(ctx, rt)
		if err != nil {
			return nil // its columns name no default: a short form over them says so
		}
		ref := engine.TableRef{Database: rt.Database().Name(), Table: rt.Name()}
		for id, c := range cols {
			sf.cols[id] = shortColumn{table: ref, column: c.Name}
		}
		return nil
	})
	if err != nil {
		return nil, transform.SameTree, err
	}
	// The provenance of derived columns, as the ledger builds it (no protected tables to taint with).
	if sf.prov, err = boundary.DerivedColumns(ctx, n); err != nil {
		return nil, transform.SameTree, err
	}
	return sf.node(n)
}

// hasShortForm reports whether the statement holds a short form anywhere.
func hasShortForm(ctx *sql.Context, n sql.Node) bool {
	if ins, ok := n.(*plan.InsertInto); ok && ins.LiteralValueSource {
		return false // INSERT … VALUES of literals only (a bulk load): no function call to look at
	}
	found := false
	_ = boundary.WalkPlan(ctx, n, false, func(n sql.Node, _ bool) error {
		ex, ok := n.(sql.Expressioner)
		if !ok || found {
			return nil
		}
		for _, e := range ex.Expressions() {
			transform.InspectExpr(ctx, e, func(ctx *sql.Context, e sql.Expression) bool {
				if f, ok := e.(*LDPEncode); ok && f.short() {
					found = true
				}
				return found
			})
		}
		return nil
	})
	return found
}

// shortColumn is a column of a table that the statement reads.
type shortColumn struct {
	table  engine.TableRef
	column string
}

type shortForms struct {
	ctx  *sql.Context
	cols map[sql.ColumnId]shortColumn // every table column of the statement, by id
	prov boundary.Provenance          // derived columns
}

func (sf *shortForms) node(n sql.Node) (sql.Node, transform.TreeIdentity, error) {
	return transform.NodeWithOpaque(sf.ctx, n, func(ctx *sql.Context, n sql.Node) (sql.Node, transform.TreeIdentity, error) {
		same := transform.SameTree
		if ins, ok := n.(*plan.InsertInto); ok && ins.Source != nil {
			src, s, err := sf.node(ins.Source)
			if err != nil {
				return nil, transform.SameTree, err
			}
			if s == transform.NewTree {
				n, same = ins.WithSource(src), transform.NewTree
			}
		}
		if _, ok := n.(sql.Expressioner); !ok {
			return n, same, nil
		}
		nn, s, err := transform.OneNodeExpressions(ctx, n, sf.expr)
		if err != nil {
			return nil, transform.SameTree, err
		}
		if s == transform.NewTree {
			return nn, s, nil
		}
		return n, same, nil
	})
}

func (sf *shortForms) expr(ctx *sql.Context, e sql.Expression) (sql.Expression, transform.TreeIdentity, error) {
	switch x := e.(type) {
	case *plan.Subquery:
		if x.Query == nil {
			return e, transform.SameTree, nil
		}
		q, same, err := sf.node(x.Query)
		if err != nil || same == transform.SameTree {
			return e, transform.SameTree, err
		}
		return x.WithQuery(q), transform.NewTree, nil
	case *LDPEncode:
		if x.short() {
			return sf.expand(ctx, x)
		}
	}
	return e, transform.SameTree, nil
}

// expand is the long form of one short form.
func (sf *shortForms) expand(ctx *sql.Context, f *LDPEncode) (sql.Expression, transform.TreeIdentity, error) {
	fn := strings.ToUpper(f.name)
	arg := f.args[0]
	var src shortColumn
	found := false
	if gf, ok := arg.(*expression.GetField); ok {
		if id := boundary.RowwiseBase(sf.prov, gf, func(id sql.ColumnId) bool { _, ok := sf.cols[id]; return ok }); id != 0 {
			src, found = sf.cols[id], true
		}
	}
	if !found {
		return nil, transform.SameTree, fmt.Errorf("%s(col, eps): the two-argument form releases a column of a table with the column's default mechanism, "+
			"and %s is not one (an expression, or a column computed in a derived table or view); write %s(%s, eps, 'mechanism')", fn, arg, fn, arg)
	}
	d, err := f.mechs.catalog.DefaultMechanismOf(ctx, src.table, src.column)
	if errors.Is(err, engine.ErrNoDefaultMechanism) {
		return nil, transform.SameTree, fmt.Errorf("%s(col, eps): no default mechanism for %s.%s; CALL ldp_set_default_mechanism('%s', '%s', 'mechanism', 'randomiser') first, "+
			"or write %s(%s, eps, 'mechanism')", fn, src.table, src.column, src.table, src.column, fn, src.column)
	}
	if err != nil {
		return nil, transform.SameTree, fmt.Errorf("%s: the default mechanism of %s.%s: %w", fn, src.table, src.column, err)
	}
	if _, err := f.mechs.catalog.Mechanism(ctx, d.Mechanism); errors.Is(err, engine.ErrNoMechanism) {
		return nil, transform.SameTree, fmt.Errorf("%s(col, eps): the default mechanism of %s.%s is %q, which is no longer registered; "+
			"CALL ldp_set_default_mechanism('%s', '%s', 'mechanism', 'randomiser') again, or write %s(%s, eps, 'mechanism')",
			fn, src.table, src.column, d.Mechanism, src.table, src.column, fn, src.column)
	}
	long, err := newLDPEncode(f.mechs, f.asJSON)(ctx, f.args[0], f.args[1],
		expression.NewLiteral(d.Mechanism, types.LongText), expression.NewLiteral(d.Randomiser, types.LongText))
	if err != nil {
		return nil, transform.SameTree, err
	}
	return long, transform.NewTree, nil
}

// ---------------------------------------------------------------------------------------------------
// TRAIN_NOISY_CLASSIFIER('table')

// shortTrainParams chooses TRAIN_NOISY_CLASSIFIER('table')'s params from the table's ldp_privatize
// metadata (which gives the mechanism, randomiser, ε_x, ε_y, K and columns as for the two-argument form):
//
//   - the model is called <table>_classifier (the two-argument form's default), and an existing model of
//     that name is an error: the short form never replaces one;
//   - the objective is "marginal" with aux_table the mechanism's own training table (ldp_models'
//     training_table and training_column of the mechanism's model) when the marginal objective can
//     model the release (an ℓ1-ball mechanism released with laplace) and the caller may read that column
//     (SELECT, as the caller: an analyst's read of a protected table's raw column is refused, so such a
//     table is never the prior); otherwise "forward", which any mechanism and randomiser allow.
//
// The choice and its reason are in the server log, and the resolved params in ldp_jobs.params.
func (c *classifiers) shortTrainParams(ctx *sql.Context, table string) (string, error) {
	dbName, name := splitTable(ctx, table)
	t, err := c.p.table(ctx, dbName, name)
	if err != nil {
		return "", err
	}
	meta := privatizeMetadataOf(t)
	if meta == nil {
		return "", fmt.Errorf("table %s has no ldp_privatize metadata, which TRAIN_NOISY_CLASSIFIER('%s') takes its defaults from; give them with "+
			`TRAIN_NOISY_CLASSIFIER('%s', '{"mechanism": …, "randomiser": …, "eps_x": …, "eps_y": …, "K": …, "features_col": …, "label_col": …}')`,
			table, table, table)
	}
	model := name + "_classifier"
	if _, err := c.p.e.Catalog.Model(ctx, model); err == nil {
		return "", fmt.Errorf(`a model called %q exists, and TRAIN_NOISY_CLASSIFIER('%s') never replaces one; name another with TRAIN_NOISY_CLASSIFIER('%s', '{"model": "…"}') `+
			`or replace it with TRAIN_NOISY_CLASSIFIER('%s', '{"replace": true}')`, model, table, table, table)
	}
	params := map[string]any{"objective": "forward"}
	aux, col, why := c.marginalPrior(ctx, meta)
	if why == "" {
		params["objective"], params["aux_table"], params["aux_features_col"] = "marginal", aux, col
		c.p.log("TRAIN_NOISY_CLASSIFIER('%s'): objective marginal, with the training rows %s.%s of mechanism %s as the prior", table, aux, col, meta.Mechanism)
	} else {
		c.p.log("TRAIN_NOISY_CLASSIFIER('%s'): objective forward: %s", table, why)
	}
	raw, _ := json.Marshal(params)
	return string(raw), nil
}

// marginalPrior returns the mechanism's training table and column for the marginal objective, or why
// there is none the caller may use.
func (c *classifiers) marginalPrior(ctx *sql.Context, meta *PrivatizeMetadata) (table, column, why string) {
	rec, err := c.p.e.Catalog.Mechanism(ctx, meta.Mechanism)
	if err != nil {
		return "", "", fmt.Sprintf("mechanism %q: %v", meta.Mechanism, err)
	}
	var desc sdk.Description
	if err := json.Unmarshal(rec.Description, &desc); err != nil {
		return "", "", fmt.Sprintf("mechanism %q: recorded description: %v", meta.Mechanism, err)
	}
	if set, err := outputSet(desc); err != nil {
		return "", "", err.Error()
	} else if _, ball := set.(mechanisms.L1Ball); !ball || meta.Randomiser != mechanisms.RandomiserLaplace {
		return "", "", fmt.Sprintf("the marginal objective models Laplace noise on an l1 ball, and the table was released through %q with %q", meta.Mechanism, meta.Randomiser)
	}
	if rec.Model == "" {
		return "", "", fmt.Sprintf("mechanism %q has no model, so no training table", meta.Mechanism)
	}
	m, err := c.p.e.Catalog.Model(ctx, rec.Model)
	if err != nil || m.TrainingTable == "" {
		return "", "", fmt.Sprintf("mechanism %q's model records no training table", meta.Mechanism)
	}
	column = m.TrainingColumn
	if column == "" {
		column = meta.FeaturesCol // recorded before ldpsql kept the column: the two-argument form's default
	}
	if err := c.p.exec(ctx, fmt.Sprintf("SELECT %s FROM %s LIMIT 1", quoteCol(column), quoteTable(m.TrainingTable))); err != nil {
		return "", "", fmt.Sprintf("the caller may not read mechanism %q's training rows %s.%s (%v)", meta.Mechanism, m.TrainingTable, column, err)
	}
	return m.TrainingTable, column, ""
}
