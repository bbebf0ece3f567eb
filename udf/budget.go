package udf

import (
	"fmt"
	"strings"
	"time"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/udf/boundary"
)

// The ledger's procedures: CALL ldp_set_budget (DBA only), and ldp_privatize on a protected source.

func (p *procedures) ledgerDetails() []sql.ExternalStoredProcedureDetails {
	schema := sql.Schema{
		{Name: "table", Type: types.LongText},
		{Name: "eps_total", Type: types.Float64},
		{Name: "mode", Type: types.LongText},
		{Name: "unit_columns", Type: types.LongText},
	}
	return []sql.ExternalStoredProcedureDetails{
		{Name: "ldp_set_budget", Schema: schema, AdminOnly: true, Function: func(ctx *sql.Context, table string, eps float64) (sql.RowIter, error) {
			return p.setBudget(ctx, table, eps, "", "")
		}},
		{Name: "ldp_set_budget", Schema: schema, AdminOnly: true, Function: func(ctx *sql.Context, table string, eps float64, mode string) (sql.RowIter, error) {
			return p.setBudget(ctx, table, eps, mode, "")
		}},
		{Name: "ldp_set_budget", Schema: schema, AdminOnly: true, Function: p.setBudget},
	}
}

// setBudget is CALL ldp_set_budget('table', eps_total [, 'memoise'|'charge' [, 'unit_col, …']]). It
// protects the table: every unit (the rows sharing the unit columns' values; by default the primary key)
// may spend eps_total over all its releases. Called again, it changes the budget; a mode or unit
// columns left out keep their earlier values (memoise and the primary key at first).
func (p *procedures) setBudget(ctx *sql.Context, table string, eps float64, mode, unitColumns string) (sql.RowIter, error) {
	const fn = "ldp_set_budget"
	t, ref, err := p.resolveTable(ctx, fn, table)
	if err != nil {
		return nil, err
	}
	if strings.EqualFold(ref.Database, engine.CatalogSchema) {
		return nil, fmt.Errorf("%s: %s is a catalog table", fn, ref)
	}
	old, had := p.e.Ledger.Budget(ref)
	mode = strings.ToLower(strings.TrimSpace(mode))
	if mode == "" {
		mode = engine.BudgetMemoise
		if had {
			mode = old.Mode
		}
	}
	schema := t.(sql.PrimaryKeyTable).PrimaryKeySchema(ctx)
	var units []string
	if strings.TrimSpace(unitColumns) == "" {
		if had {
			units = old.UnitColumns
		} else {
			for _, i := range schema.PkOrdinals {
				units = append(units, schema.Schema[i].Name)
			}
			if len(units) == 0 {
				return nil, fmt.Errorf("%s: table %s has no primary key: name the columns that identify a privacy unit, in 'charge' mode, e.g. CALL %s('%s', %g, 'charge', 'person_id')",
					fn, ref, fn, table, eps)
			}
		}
	} else {
		for _, c := range strings.Split(unitColumns, ",") {
			c = strings.TrimSpace(c)
			i := schema.Schema.IndexOfColName(c)
			if i < 0 {
				return nil, fmt.Errorf("%s: table %s has no column %q", fn, ref, c)
			}
			units = append(units, schema.Schema[i].Name)
		}
	}
	if mode == engine.BudgetMemoise && len(schema.PkOrdinals) == 0 {
		// A memoised release is keyed by the row it reads; without a primary key the ledger cannot tell
		// a unit's rows apart (their values must not be the key: see boundary.Collector.ReleaseKeyed).
		return nil, fmt.Errorf("%s: table %s has no primary key, so the ledger cannot tell its rows apart and cannot memoise their releases: "+
			"use 'charge' mode, e.g. CALL %s('%s', %g, 'charge', '%s')", fn, ref, fn, table, eps, strings.Join(units, ", "))
	}
	b := engine.Budget{TableRef: ref, EpsTotal: eps, Mode: mode, UnitColumns: units, SetBy: user(ctx), SetAt: time.Now()}
	if err := p.e.Ledger.SetBudget(ctx, b); err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	p.log("%s: %s protected: ε %g per unit (%s), mode %s, by %s", fn, ref, eps, strings.Join(units, ", "), mode, b.SetBy)
	return sql.RowsToRowIter(sql.Row{ref.String(), eps, mode, strings.Join(units, ", ")}), nil
}

// privatizeRowsLedger is privatizeRows for a protected source: each row's unit is charged ε_x for its
// features and ε_y for its label. It writes the releases into the temporary table, which nothing can
// read (engine.StagingPrefix), checks their charges against the budgets (a source that would go over
// its budget writes nothing) and returns the charges: they are written in the transaction that renames
// the temporary table to the destination (privatize), so the destination and its charges commit
// together or not at all. NULL features or labels are released as the default input; for an analyst so
// are invalid ones (the error would quote them).
func (p *procedures) privatizeRowsLedger(ctx *sql.Context, fn string, b engine.Budget, srcDB, srcName string, selectCols []string, nKeys int,
	withLabel bool, mech *resolvedMechanism, randomiser string, epsX float64, krr *mechanisms.KRR, dstDB, tmpName string, charges *[]engine.Charge) (int64, error) {
	dba := boundary.IsDBA(ctx, p.e.GMS.Analyzer)
	isUnit := map[string]bool{}
	for _, u := range b.UnitColumns {
		isUnit[strings.ToLower(u)] = true
	}
	// What is released, for the memo keys: the features column and the label column of each row, which
	// the source's primary key identifies where the unit does not (LDP_ENCODE and FLIP_LABEL key theirs
	// alike, so the releases are shared); without a primary key nothing is memoised.
	pk := make([]string, nKeys)
	for i, k := range selectCols[:nKeys] {
		pk[i] = unquoteCol(k)
	}
	byRow := !boundary.UnitIsRow(b.UnitColumns, pk)
	featuresWhat, labelWhat := boundary.What{}, boundary.What{}
	if nKeys > 0 {
		featuresWhat.Source = boundary.ColumnSource(unquoteCol(selectCols[nKeys]))
		if withLabel {
			labelWhat.Source = boundary.ColumnSource(unquoteCol(selectCols[nKeys+1]))
		}
	}
	if !dba {
		for _, k := range selectCols[:nKeys] {
			if name := strings.Trim(k, "`"); !isUnit[strings.ToLower(name)] {
				return 0, fmt.Errorf("%s: access denied: the destination would copy column %s of protected table %s, which is raw data (its unit columns are %s)",
					fn, name, b.TableRef, strings.Join(b.UnitColumns, ", "))
			}
		}
	}
	cols := append([]string{}, selectCols...)
	unitAt := len(cols)
	for _, u := range b.UnitColumns {
		cols = append(cols, quoteCol(u))
	}
	// The roles do not apply to this read: what it reads is released through the ledger below.
	schema, iter, err := p.querySchema(boundary.WithInternalRead(ctx), fmt.Sprintf("SELECT %s FROM %s.%s", strings.Join(cols, ", "), quoteCol(srcDB), quoteCol(srcName)))
	if err != nil {
		return 0, fmt.Errorf("%s: reading the source: %w", fn, err)
	}
	defer iter.Close(ctx)
	// By position: the select list names a unit column twice where it is also the primary key.
	unitTypes, rowTypes := columnTypes(schema[unitAt:]), columnTypes(schema[:nKeys])
	ins, fail, err := p.openDestination(ctx, dstDB, tmpName)
	if err != nil {
		return 0, err
	}
	src := privatizeSource{fn: fn, unitAt: unitAt, nKeys: nKeys, unitTypes: unitTypes, rowTypes: rowTypes, byRow: byRow, withLabel: withLabel, dba: dba, mech: mech, krr: krr}
	c := boundary.NewCollector(p.e.Ledger, user(ctx))
	var n int64
	lastLog := time.Now()
	rd := readAhead(ctx, iter)
	defer rd.close() // before iter.Close
	for {
		batch, err := rd.next()
		if err != nil {
			return fail(fmt.Errorf("%s: reading the source: %w", fn, err))
		}
		if len(batch) == 0 {
			break
		}
		units, rows, feats, ys, err := src.inputs(ctx, batch, n)
		if err != nil {
			return fail(err)
		}
		featuresWhat.Rows, labelWhat.Rows = rows, rows
		released, err := releaseVectors(ctx, c, b, fn, mech, randomiser, epsX, units, featuresWhat, feats)
		if err != nil {
			return fail(err)
		}
		var labels []int
		if withLabel {
			if labels, err = c.ReleaseLabels(ctx, b, fn, krr, units, labelWhat, ys); err != nil {
				return fail(err)
			}
		}
		for i, r := range batch {
			out := make(sql.Row, 0, nKeys+2)
			if nKeys == 0 {
				out = append(out, n+int64(i)+1)
			} else {
				out = append(out, r[:nKeys]...)
			}
			out = append(out, PackVector(toFloat32(released[i])))
			if withLabel {
				out = append(out, int32(labels[i]))
			}
			if err := ins.Insert(ctx, out); err != nil {
				return fail(fmt.Errorf("%s: writing: %w", fn, err))
			}
		}
		n += int64(len(batch))
		if time.Since(lastLog) > 5*time.Second {
			p.log("%s: %d rows so far", fn, n)
			lastLog = time.Now()
		}
	}
	// Check the charges now, so that a source over its budget fails before anything is committed; they
	// are checked again and written when the destination is named.
	*charges = c.Take()
	if err := p.e.Ledger.Check(*charges); err != nil {
		return fail(fmt.Errorf("%s: %w", fn, err))
	}
	if err := ins.StatementComplete(ctx); err != nil {
		_ = ins.Close(ctx)
		return 0, fmt.Errorf("%s: committing (nothing was charged): %w", fn, err)
	}
	return n, ins.Close(ctx)
}

// privatizeSource is how privatizeRowsLedger reads a protected source's rows: the unit columns follow
// the columns it selects (from unitAt), the first nKeys of which are its primary key (byRow: the row
// within its unit is named by it), then the features and, withLabel, the label.
type privatizeSource struct {
	fn               string
	unitAt, nKeys    int
	unitTypes        []sql.Type // the unit columns' and the primary key's types, for engine.UnitKey
	rowTypes         []sql.Type
	byRow, withLabel bool
	dba              bool // a DBA's invalid value is an error; an analyst's is released as the default input
	mech             *resolvedMechanism
	krr              *mechanisms.KRR
}

// inputs is one batch's units, rows within their units (nil where not needed), features (nil: the
// default input) and labels (-1: the default input); n rows came before the batch.
func (s privatizeSource) inputs(ctx *sql.Context, batch []sql.Row, n int64) (units, rows []string, feats [][]float32, ys []int, err error) {
	fn := s.fn
	units = make([]string, len(batch))
	if s.byRow && s.nKeys > 0 {
		rows = make([]string, len(batch))
	}
	feats = make([][]float32, len(batch))
	ys = make([]int, len(batch))
	for i, r := range batch {
		if units[i], err = engine.UnitKey(s.unitTypes, r[s.unitAt:]...); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("%s: source row %d: %w", fn, n+int64(i)+1, err)
		}
		if rows != nil {
			if rows[i], err = engine.UnitKey(s.rowTypes, r[:s.nKeys]...); err != nil {
				return nil, nil, nil, nil, fmt.Errorf("%s: source row %d: its primary key: %w", fn, n+int64(i)+1, err)
			}
		}
		if v := r[s.nKeys]; v != nil {
			vec, err := toVector(ctx, fn, "features", v)
			if err == nil && len(vec) != s.mech.desc.InputDim {
				err = fmt.Errorf("%s: source row %d has %d features, mechanism %q expects %d", fn, n+int64(i)+1, len(vec), s.mech.record.Name, s.mech.desc.InputDim)
			}
			if err == nil {
				err = checkFinite(fn, "features", vec)
			}
			switch {
			case err == nil:
				feats[i] = vec
			case s.dba:
				return nil, nil, nil, nil, err
			}
		}
		ys[i] = -1
		if s.withLabel && r[s.nKeys+1] != nil {
			y, err := toInt(ctx, fn, "label", r[s.nKeys+1])
			if err == nil && (y < 0 || y >= int64(s.krr.K())) {
				err = fmt.Errorf("%s: source row %d has label %d outside 0..%d", fn, n+int64(i)+1, y, s.krr.K()-1)
			}
			switch {
			case err == nil:
				ys[i] = int(y)
			case s.dba:
				return nil, nil, nil, nil, err
			}
		}
	}
	return units, rows, feats, ys, nil
}

// unquoteCol is the name that quoteCol quoted.
func unquoteCol(q string) string {
	return strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(q, "`"), "`"), "``", "`")
}
