package engine

import (
	"context"
	gosql "database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/vitess/go/mysql"
	duckdb "github.com/duckdb/duckdb-go/v2"
)

// tableEditor applies one statement's INSERT, UPDATE, DELETE and REPLACE operations to a DuckDB table
// inside one DuckDB transaction. A small INSERT in autocommit holds its rows until its end and commits
// them through the engine's insert queue, together with other statements' (insert_queue.go). Larger
// inserts stream through DuckDB's appender (no round trip per row);
// updates and deletes run as prepared statements, after the appender is flushed so the order of
// operations is kept. StatementComplete commits; DiscardChanges rolls back, so a failed statement
// leaves no partial write. In a session's explicit transaction (transactions.go) the editor writes on
// the session's pinned connection instead: StatementComplete leaves the writes to the transaction's
// COMMIT, and DiscardChanges rolls the whole transaction back (DuckDB cannot undo one statement).
type tableEditor struct {
	t *Table

	session *Session // non-nil: conn is the session's transaction, not the editor's own
	// stmt is the context of the CREATE TABLE … AS SELECT or INSERT … SELECT of releases the editor
	// was made in (nil otherwise), whose deferred charges it takes at its first write (ledger_tx.go);
	// charged, when it took any in autocommit, is the transaction on the ledger's connection its rows
	// and their charges commit in.
	stmt      context.Context
	charged   *chargedTx
	chargedBy string
	charges   []Charge
	// discardCause is the error DiscardChanges was given: why a session's transaction is rolled back.
	discardCause error
	conn         *gosql.Conn
	appender     *duckdb.Appender
	deleteSQL    *gosql.Stmt
	updateSQL    *gosql.Stmt
	keyCols      []int // columns that identify a row: the primary key, or every column
	// checkKeys: an upsert's editor (upsert.go), which inserts row by row after a lookup by key.
	checkKeys            bool
	insertSQL, selectSQL *gosql.Stmt
	// grouped holds the rows of a small autocommit INSERT, converted for DuckDB, until the statement
	// ends and the insert queue commits them; grouping says the statement still qualifies.
	grouped  [][]driver.Value
	grouping bool
	// written holds the keys of the statement's last rows (at most maxWrittenKeys), when its table's
	// key is collated: DuckDB's error for a duplicate names the key as its index folds it ('emile'),
	// and MySQL names the value the statement wrote ('Émile'), which translate finds here.
	written     [][]any
	collatedKey int8 // whether the table's key has an insensitive string column: 1 yes, -1 no, 0 not known yet
}

// maxWrittenKeys bounds tableEditor.written: a larger statement's duplicate is named as DuckDB folds it.
const maxWrittenKeys = 4096

var _ sql.TableEditor = (*tableEditor)(nil)
var _ sql.AutoIncrementSetter = (*tableEditor)(nil)

func newTableEditor(t *Table) *tableEditor {
	e := &tableEditor{t: t}
	if len(t.def.schema.PkOrdinals) > 0 {
		e.keyCols = t.def.schema.PkOrdinals
	} else {
		for i := range t.def.schema.Schema {
			e.keyCols = append(e.keyCols, i)
		}
	}
	return e
}

// newStatementEditor is newTableEditor for a statement run under ctx: in a statement whose writes commit
// with its charges (withStatementCharges), the editor takes them at its first write.
func newStatementEditor(ctx *sql.Context, t *Table) *tableEditor {
	e := newTableEditor(t)
	if ctx != nil && statementChargesFrom(ctx) != nil {
		e.stmt = ctx.Context
	}
	e.grouping = e.stmt == nil
	return e
}

// begin opens the statement's DuckDB transaction on a dedicated connection, once.
func (e *tableEditor) begin(ctx *sql.Context) error {
	if e.conn != nil {
		return nil
	}
	if e.t.db.readOnly {
		return e.t.db.errReadOnly()
	}
	s, conn, err := sessionConn(ctx)
	if err != nil {
		return err
	}
	var by string
	var charges []Charge
	if e.stmt != nil {
		by, charges = takeCharges(e.stmt)
	}
	if conn != nil {
		if len(charges) > 0 {
			// Inside a transaction (autocommit off) the rows commit with it, later: the charges are
			// made now, as a release read by a SELECT of the transaction would be, and stay charged
			// whether the transaction commits or not (ledger_tx.go).
			if err := e.t.db.p.ledger.Charge(ctx, by, charges); err != nil {
				return err
			}
		}
		s.noteWrite(e.t.def, e.t.mysqlName())
		e.session, e.conn = s, conn
		return nil
	}
	if len(charges) > 0 {
		tx, err := e.t.db.p.ledger.beginCharged()
		if err != nil {
			return err
		}
		e.conn, e.charged, e.chargedBy, e.charges = tx.conn, tx, by, charges
		return nil
	}
	conn, err = e.t.db.p.db.Conn(ctx)
	if err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "BEGIN TRANSACTION"); err != nil {
		_ = conn.Close()
		return err
	}
	e.conn = conn
	return nil
}

// StatementBegin implements sql.EditOpenerCloser. The transaction opens lazily at the first edit.
func (e *tableEditor) StatementBegin(*sql.Context) {}

// DiscardChanges implements sql.EditOpenerCloser: everything since the statement began is rolled back.
func (e *tableEditor) DiscardChanges(ctx *sql.Context, errorEncountered error) error {
	if _, ignorable := errorEncountered.(sql.IgnorableError); ignorable {
		return nil
	}
	e.discardCause = errorEncountered
	return e.finish(ctx, false)
}

// StatementComplete implements sql.EditOpenerCloser: the statement's edits commit.
func (e *tableEditor) StatementComplete(ctx *sql.Context) error {
	return e.finish(ctx, true)
}

// Close implements sql.Closer. Table rewrites call Close without StatementComplete; what is still open
// commits then (a discarded statement has nothing open any more).
func (e *tableEditor) Close(ctx *sql.Context) error {
	return e.finish(ctx, true)
}

func (e *tableEditor) finish(ctx *sql.Context, commit bool) error {
	defer func() { e.written = nil }() // after translate has named a duplicate from them
	if rows := e.grouped; rows != nil {
		e.grouped = nil
		defer e.t.def.wrote()
		if !commit {
			return nil // nothing was written
		}
		return e.translate(e.t.db.p.inserts.commit(ctx, e.t, rows))
	}
	if e.conn == nil {
		return nil
	}
	conn, session := e.conn, e.session
	e.conn, e.session = nil, nil
	defer e.t.def.wrote() // after the commit or rollback, so no stale count is cached
	err := e.closeAppender()
	for _, stmt := range []*gosql.Stmt{e.deleteSQL, e.updateSQL, e.insertSQL, e.selectSQL} {
		if stmt != nil {
			_ = stmt.Close()
		}
	}
	e.deleteSQL, e.updateSQL, e.insertSQL, e.selectSQL = nil, nil, nil, nil
	if session != nil {
		if err != nil || !commit {
			cause := e.translate(err)
			if cause == nil {
				cause = e.discardCause
			}
			if cause == nil {
				cause = errors.New("the statement failed")
			}
			session.abort(ctx, cause)
		}
		return e.translate(err)
	}
	if err == nil && commit && e.stmt != nil {
		// A CREATE TABLE … AS SELECT's table is finished when its rows commit (ctas.go).
		err = finishCreate(ctx, conn, e.stmt, e.t)
	}
	if tx := e.charged; tx != nil {
		// The rows and their charges, on the ledger's connection (not closed here).
		e.charged = nil
		if err == nil && commit {
			return tx.commit(e.chargedBy, e.charges)
		}
		_ = tx.rollback()
		return e.translate(err)
	}
	defer conn.Close()
	if err == nil && commit {
		if _, err = conn.ExecContext(ctx, "COMMIT"); err == nil {
			return nil
		}
	}
	// Not on ctx: a cancelled statement (KILL QUERY, a shutdown) must still roll back, or its
	// connection would go back to the pool inside its open transaction.
	if _, rbErr := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rbErr != nil && err == nil && !commit {
		return rbErr
	}
	return e.translate(err)
}

// holdRow keeps row for the insert queue when the statement runs in autocommit, and reports whether it
// did; when it did not (a client's transaction) the statement writes as it goes from now on.
func (e *tableEditor) holdRow(ctx *sql.Context, row sql.Row) (bool, error) {
	if e.grouped == nil {
		if e.t.db.readOnly {
			return true, e.t.db.errReadOnly()
		}
		if _, conn, err := sessionConn(ctx); err != nil || conn != nil {
			e.grouping = false
			return err != nil, err
		}
	}
	vals, err := e.toDuckRow(ctx, row)
	if err != nil {
		return true, err
	}
	e.grouped = append(e.grouped, vals)
	return true, e.t.noteInserted(ctx, row)
}

// writeGrouped writes the rows held for the insert queue into the statement's own transaction, begun
// (the statement grew past maxGroupedRows, or also updates or deletes): it writes as it goes from now on.
func (e *tableEditor) writeGrouped() error {
	e.grouping = false
	rows := e.grouped
	e.grouped = nil
	for _, vals := range rows {
		if err := e.appendRow(vals); err != nil {
			return err
		}
	}
	return nil
}

// noteWritten keeps row's key in written when the table's key is collated (uniqueIndexFor).
func (e *tableEditor) noteWritten(row sql.Row) {
	pk := e.t.def.schema.PkOrdinals
	if e.collatedKey == 0 {
		e.collatedKey = -1
		for _, i := range pk {
			if isInsensitiveString(e.t.def.schema.Schema[i].Type) {
				e.collatedKey = 1
			}
		}
	}
	if e.collatedKey < 0 || len(row) != len(e.t.def.schema.Schema) {
		return
	}
	if len(e.written) == maxWrittenKeys {
		e.written = e.written[1:]
	}
	key := make([]any, len(pk))
	for j, i := range pk {
		key[j] = row[i]
	}
	e.written = append(e.written, key)
}

// dupKeyParts splits the key of DuckDB's duplicate-key error into the primary key's values. DuckDB
// writes one value alone ("7") for an INSERT's single-column key, and otherwise each part after its
// column or index expression ("a: 1, b: x, y", "lower(strip_accents(name)): alice"), which is how the
// parts are told apart even where a value holds ", ".
func (e *tableEditor) dupKeyParts(key string) []string {
	schema := e.t.def.schema
	labels := func(j int) []string {
		col := schema.Schema[schema.PkOrdinals[j]].Name
		return []string{"lower(strip_accents(" + col + ")): ", col + ": "}
	}
	n := len(schema.PkOrdinals)
	cut := func(s string, j int) (string, bool) { // s without part j's label
		for _, l := range labels(j) {
			if rest, ok := strings.CutPrefix(s, l); ok {
				return rest, true
			}
		}
		return s, false
	}
	rest, labelled := "", false
	if n > 0 {
		rest, labelled = cut(key, 0)
	}
	if !labelled {
		return []string{key}
	}
	parts := make([]string, 0, n)
	for j := 1; j < n; j++ {
		next := -1
		for _, l := range labels(j) {
			if i := strings.Index(rest, ", "+l); i >= 0 && (next < 0 || i < next) {
				next = i
			}
		}
		if next < 0 {
			return []string{key}
		}
		parts = append(parts, rest[:next])
		rest, _ = cut(rest[next+2:], j)
	}
	return append(parts, rest)
}

// writtenKey is, of the keys in written, the first equal to folded (its parts as the collated key's
// index printed them, each string compared in its column's collation), each part as the statement wrote
// it; nil when none is.
func (e *tableEditor) writtenKey(folded []string) []string {
	pk := e.t.def.schema.PkOrdinals
	if len(folded) != len(pk) {
		return nil
	}
	for _, key := range e.written {
		parts := make([]string, len(pk))
		match := true
		for j, i := range pk {
			parts[j] = fmt.Sprint(key[j])
			if t := e.t.def.schema.Schema[i].Type; isInsensitiveString(t) {
				// The index folds case and accents, which the column's collation equates too.
				c, err := t.Compare(sql.NewEmptyContext(), key[j], folded[j])
				match = match && err == nil && c == 0
			} else {
				match = match && parts[j] == folded[j]
			}
		}
		if match {
			return parts
		}
	}
	return nil
}

// appendRow appends a converted row through the statement's appender, opened on its transaction's
// connection at the first row.
func (e *tableEditor) appendRow(vals []driver.Value) error {
	if e.appender == nil {
		err := e.conn.Raw(func(dc any) error {
			a, err := duckdb.NewAppenderFromConn(duckConn(dc), e.t.db.name, e.t.def.name)
			e.appender = a
			return err
		})
		if err != nil {
			return fmt.Errorf("opening appender on %q: %w", e.t.def.name, err)
		}
	}
	return e.translate(e.appender.AppendRow(vals...))
}

func (e *tableEditor) closeAppender() error {
	if e.appender == nil {
		return nil
	}
	a := e.appender
	e.appender = nil
	return a.Close()
}

// toDuckRow converts a GMS row for DuckDB.
func (e *tableEditor) toDuckRow(ctx *sql.Context, row sql.Row) ([]driver.Value, error) {
	schema := e.t.def.schema.Schema
	if len(row) != len(schema) {
		return nil, fmt.Errorf("table %q has %d columns, row has %d values", e.t.def.name, len(schema), len(row))
	}
	vals := make([]driver.Value, len(row))
	for i, col := range schema {
		v, err := toDuck(ctx, col.Type, row[i])
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", col.Name, err)
		}
		vals[i] = v
	}
	return vals, nil
}

// Insert implements sql.RowInserter.
func (e *tableEditor) Insert(ctx *sql.Context, row sql.Row) error {
	e.noteWritten(row)
	if e.grouping && !e.checkKeys && e.conn == nil && len(e.grouped) < maxGroupedRows {
		if grouped, err := e.holdRow(ctx, row); grouped || err != nil {
			return err
		}
	}
	if err := e.begin(ctx); err != nil {
		return err
	}
	if err := e.writeGrouped(); err != nil {
		return err
	}
	vals, err := e.toDuckRow(ctx, row)
	if err != nil {
		return err
	}
	if e.checkKeys {
		return e.insertChecked(ctx, row, vals)
	}
	if err := e.appendRow(vals); err != nil {
		return err
	}
	return e.t.noteInserted(ctx, row)
}

// keyPredicate matches one row by its key columns. Primary-key columns are never NULL and are compared
// with =, which DuckDB answers from the key's index; IS NOT DISTINCT FROM, needed for nullable columns,
// makes it scan the table for every row an UPDATE or DELETE touches. Without a primary key every column
// is the key and the match is limited to one physical row (rowid), so deleting one of two equal rows
// deletes one.
//
// collated compares insensitive string key columns as their collation does, through the expression of
// the key's unique index (uniqueIndexFor): an upsert's lookup of 'ALICE' finds 'alice'. UPDATE and
// DELETE match the stored bytes they read.
func (e *tableEditor) keyPredicate(collated bool) string {
	hasPK := len(e.t.def.schema.PkOrdinals) > 0
	var conds []string
	for _, i := range e.keyCols {
		col := e.t.def.schema.Schema[i]
		op := " IS NOT DISTINCT FROM ?"
		if hasPK {
			op = " = ?"
		}
		if hasPK && collated && isInsensitiveString(col.Type) {
			conds = append(conds, "lower(strip_accents("+quoteIdent(col.Name)+")) = lower(strip_accents(?))")
			continue
		}
		conds = append(conds, quoteIdent(col.Name)+op)
	}
	where := strings.Join(conds, " AND ")
	if hasPK {
		return where
	}
	return fmt.Sprintf("rowid = (SELECT rowid FROM %s WHERE %s LIMIT 1)", e.t.qualified(), where)
}

func (e *tableEditor) keyArgs(vals []driver.Value) []any {
	args := make([]any, len(e.keyCols))
	for i, c := range e.keyCols {
		args[i] = param(vals[c])
	}
	return args
}

// param is an appender value as a statement parameter: duckdb-go binds no duckdb.Decimal (database/sql
// refused it, so an UPDATE, DELETE or upsert of a table with a DECIMAL column failed), so a decimal
// goes as its exact text, which DuckDB casts to the column's DECIMAL.
func param(v driver.Value) any {
	if d, ok := v.(duckdb.Decimal); ok {
		return d.String()
	}
	return v
}

// Delete implements sql.RowDeleter.
func (e *tableEditor) Delete(ctx *sql.Context, row sql.Row) error {
	if err := e.begin(ctx); err != nil {
		return err
	}
	if err := e.writeGrouped(); err != nil {
		return err
	}
	if err := e.closeAppender(); err != nil {
		return e.translate(err)
	}
	vals, err := e.toDuckRow(ctx, row)
	if err != nil {
		return err
	}
	if e.deleteSQL == nil {
		q := fmt.Sprintf("DELETE FROM %s WHERE %s", e.t.qualified(), e.keyPredicate(false))
		if e.deleteSQL, err = e.conn.PrepareContext(ctx, q); err != nil {
			return err
		}
	}
	res, err := e.deleteSQL.ExecContext(ctx, e.keyArgs(vals)...)
	if err != nil {
		return e.translate(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return sql.ErrDeleteRowNotFound.New()
	}
	return nil
}

// Update implements sql.RowUpdater.
func (e *tableEditor) Update(ctx *sql.Context, old, new sql.Row) error {
	e.noteWritten(new)
	if err := e.begin(ctx); err != nil {
		return err
	}
	if err := e.writeGrouped(); err != nil {
		return err
	}
	if err := e.closeAppender(); err != nil {
		return e.translate(err)
	}
	oldVals, err := e.toDuckRow(ctx, old)
	if err != nil {
		return err
	}
	newVals, err := e.toDuckRow(ctx, new)
	if err != nil {
		return err
	}
	if e.updateSQL == nil {
		var sets []string
		for _, c := range e.t.def.schema.Schema {
			sets = append(sets, quoteIdent(c.Name)+" = ?")
		}
		q := fmt.Sprintf("UPDATE %s SET %s WHERE %s", e.t.qualified(), strings.Join(sets, ", "), e.keyPredicate(false))
		if e.updateSQL, err = e.conn.PrepareContext(ctx, q); err != nil {
			return err
		}
	}
	args := make([]any, 0, len(newVals)+len(e.keyCols))
	for _, v := range newVals {
		args = append(args, param(v))
	}
	args = append(args, e.keyArgs(oldVals)...)
	res, err := e.updateSQL.ExecContext(ctx, args...)
	if err != nil {
		return e.translate(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("update of table %q found no stored row matching %v", e.t.def.name, old)
	}
	return e.t.noteInserted(ctx, new)
}

// SetAutoIncrementValue implements sql.AutoIncrementSetter.
func (e *tableEditor) SetAutoIncrementValue(_ *sql.Context, v uint64) error {
	e.t.def.autoMu.Lock()
	defer e.t.def.autoMu.Unlock()
	e.t.def.autoNext = v
	return nil
}

// AcquireAutoIncrementLock implements sql.AutoIncrementSetter. The counter has its own mutex.
func (e *tableEditor) AcquireAutoIncrementLock(*sql.Context) (func(), error) { return func() {}, nil }

var duckDupKey = regexp.MustCompile(`(?i)duplicate key "([^"]*)"`)

// translate turns DuckDB constraint errors into the MySQL errors clients expect.
func (e *tableEditor) translate(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if strings.Contains(msg, "PRIMARY KEY or UNIQUE constraint") || strings.Contains(msg, "violates primary key constraint") ||
		strings.Contains(msg, "violates unique constraint") { // the collated key's index (uniqueIndexFor)
		key := "?"
		if m := duckDupKey.FindStringSubmatch(msg); m != nil {
			parts := e.dupKeyParts(m[1])
			if strings.Contains(msg, "violates unique constraint") {
				// The collated key's index (uniqueIndexFor) prints its parts folded ('emile'): the
				// statement's row they match names them as it wrote them ('Émile').
				if written := e.writtenKey(parts); written != nil {
					parts = written
				}
			}
			key = strings.Join(parts, "-") // as MySQL joins a key's parts
		}
		return mysql.NewSQLError(mysql.ERDupEntry, mysql.SSConstraintViolation,
			"Duplicate entry '%s' for key '%s.PRIMARY'", key, e.t.def.name)
	}
	if strings.Contains(msg, "NOT NULL constraint") {
		return mysql.NewSQLError(mysql.ERBadNullError, mysql.SSConstraintViolation, "%s", msg)
	}
	var sqlErr *mysql.SQLError
	if errors.As(err, &sqlErr) {
		return err
	}
	if isWriteConflict(err) {
		return errWriteConflict(e.t.mysqlName(), err)
	}
	return fmt.Errorf("table %q: %w", e.t.def.name, err)
}
