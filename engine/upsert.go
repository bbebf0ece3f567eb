package engine

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/analyzer"
	"github.com/dolthub/go-mysql-server/sql/plan"
	"github.com/dolthub/go-mysql-server/sql/transform"
)

// Upserts: INSERT … ON DUPLICATE KEY UPDATE, INSERT IGNORE and REPLACE with MySQL's semantics on tables
// with a primary key. GMS implements them by inserting each row and, when the editor reports the key as
// taken (sql.UniqueKeyError with the existing row), updating, skipping or deleting that row. A plain
// INSERT appends through DuckDB's appender, which finds duplicate keys only when the statement commits,
// so upsertRule gives these statements an editor in checking mode instead: each row is looked up by its
// key first and inserted with its own INSERT (so the next row's lookup sees it), and one editor, one
// DuckDB transaction, serves the statement's inserts, updates and deletes alike.

// ruleUpserts is the analyzer rule id of upsertRule, far from GMS's own ids.
const ruleUpserts analyzer.RuleId = 100_003

func init() {
	// Simple INSERT … VALUES gets only the AlwaysBeforeDefault rules (see transactions.go).
	analyzer.AlwaysBeforeDefault = append(analyzer.AlwaysBeforeDefault, analyzer.Rule{Id: ruleUpserts, Apply: upsertRule})
}

func upsertRule(ctx *sql.Context, _ *analyzer.Analyzer, n sql.Node, _ *plan.Scope, _ analyzer.RuleSelector, _ *sql.QueryFlags) (sql.Node, transform.TreeIdentity, error) {
	ins, ok := n.(*plan.InsertInto)
	if !ok || !(ins.IsReplace || ins.Ignore || ins.OnDupExprs.HasUpdates()) {
		return n, transform.SameTree, nil
	}
	dst, same, err := transform.Node(ctx, ins.Destination, func(ctx *sql.Context, n sql.Node) (sql.Node, transform.TreeIdentity, error) {
		rt, ok := n.(*plan.ResolvedTable)
		if !ok {
			return n, transform.SameTree, nil
		}
		t, ok := rt.Table.(*Table)
		if !ok || len(t.def.schema.PkOrdinals) == 0 {
			return n, transform.SameTree, nil // without a key nothing is a duplicate
		}
		nt, err := rt.WithTable(ctx, &upsertTable{Table: t})
		return nt, transform.NewTree, err
	})
	if err != nil || same == transform.SameTree {
		return n, transform.SameTree, err
	}
	nn, err := ins.WithChildren(ctx, dst) // an InsertInto's one child is its destination
	return nn, transform.NewTree, err
}

// upsertTable is a table with a primary key as an upsert statement writes it: its inserter, updater and
// replacer are one editor in checking mode.
type upsertTable struct {
	*Table
	ed *tableEditor
}

func (u *upsertTable) editor(ctx *sql.Context) *tableEditor {
	if u.ed == nil {
		u.ed = newStatementEditor(ctx, u.Table)
		u.ed.checkKeys = true
	}
	return u.ed
}

// Inserter implements sql.InsertableTable.
func (u *upsertTable) Inserter(ctx *sql.Context) sql.RowInserter { return u.editor(ctx) }

// Updater implements sql.UpdatableTable.
func (u *upsertTable) Updater(ctx *sql.Context) sql.RowUpdater { return u.editor(ctx) }

// Replacer implements sql.ReplaceableTable.
func (u *upsertTable) Replacer(ctx *sql.Context) sql.RowReplacer { return u.editor(ctx) }

// insertChecked is Insert in checking mode: the row whose key is taken is returned in a
// sql.UniqueKeyError, as GMS's upserts expect; a new row is inserted at once.
func (e *tableEditor) insertChecked(ctx *sql.Context, row sql.Row, vals []driver.Value) error {
	existing, err := e.rowByKey(ctx, vals)
	if err != nil {
		return err
	}
	if existing != nil {
		keys := make([]string, len(e.keyCols))
		for i, c := range e.keyCols {
			keys[i] = fmt.Sprint(row[c])
		}
		return sql.NewUniqueKeyErr(strings.Join(keys, "-"), true, existing)
	}
	if e.insertSQL == nil {
		marks := strings.TrimSuffix(strings.Repeat("?, ", len(vals)), ", ")
		if e.insertSQL, err = e.conn.PrepareContext(ctx, fmt.Sprintf("INSERT INTO %s VALUES (%s)", e.t.qualified(), marks)); err != nil {
			return err
		}
	}
	args := make([]any, len(vals))
	for i, v := range vals {
		args[i] = param(v)
	}
	if _, err := e.insertSQL.ExecContext(ctx, args...); err != nil {
		return e.translate(err)
	}
	return e.t.noteInserted(ctx, row)
}

// rowByKey reads, in the editor's transaction, the stored row with vals' key (nil: none).
func (e *tableEditor) rowByKey(ctx *sql.Context, vals []driver.Value) (sql.Row, error) {
	schema := e.t.def.schema.Schema
	if e.selectSQL == nil {
		cols := make([]string, len(schema))
		for i, c := range schema {
			cols[i] = quoteIdent(c.Name)
		}
		q := fmt.Sprintf("SELECT %s FROM %s WHERE %s", strings.Join(cols, ", "), e.t.qualified(), e.keyPredicate(true))
		var err error
		if e.selectSQL, err = e.conn.PrepareContext(ctx, q); err != nil {
			return nil, err
		}
	}
	rows, err := e.selectSQL.QueryContext(ctx, e.keyArgs(vals)...)
	if err != nil {
		return nil, err
	}
	it := newRowIter(rows, schema)
	defer it.Close(ctx)
	row, err := it.Next(ctx)
	if errors.Is(err, io.EOF) {
		return nil, nil
	}
	return row, err
}
