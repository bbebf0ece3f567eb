package engine

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/analyzer"
	"github.com/dolthub/go-mysql-server/sql/expression"
	"github.com/dolthub/go-mysql-server/sql/plan"
	"github.com/dolthub/go-mysql-server/sql/transform"
	"github.com/dolthub/go-mysql-server/sql/types"
	"github.com/dolthub/vitess/go/mysql"
	"github.com/dolthub/vitess/go/vt/proto/query"
	duckdb "github.com/duckdb/duckdb-go/v2"
)

// LOAD DATA [LOCAL] INFILE, fast and all or nothing.
//
// GMS reads the file line by line (so a quoted field cannot hold a line break, and a doubled quote is
// stored as two), and inserts each row as INSERT IGNORE does, which for LOAD DATA LOCAL (IGNORE by
// MySQL's rule) means a DuckDB transaction per row: 174 rows/s for a 10-column numeric CSV, and a file
// that fails half way stays half loaded. loadDataRule replaces the statement, for an ldpsql table, by
// loadData: the file is read with MySQL's quoting rules (loadReader), each field converted to its
// column's type, and the rows appended through DuckDB's appender in one transaction. Whatever fails — a
// value that does not convert, a record with too many or too few fields, a duplicate key without IGNORE
// or REPLACE — fails the statement with an error that names the row and the line of the file, and
// nothing is loaded (MySQL, in strict mode, also stops at the first bad row, but LOCAL downgrades such
// errors to warnings and loads the rest; ldpsql does not). Duplicate keys follow MySQL: without IGNORE or
// REPLACE an error (1062), with IGNORE or LOCAL the file's row is skipped, with REPLACE it replaces the
// stored row. User variables in the column list and a SET clause of expressions over them and literals
// (`(@a, b, @c) SET x = @a * 2, y = NULLIF(@c, '')`) run here too: each record sets the variables in
// the session and evaluates the SET expressions. Statements that need GMS's row machinery keep GMS's
// path: a SET expression that reads a column, tables with a generated column, or CHECK constraints. An AUTO_INCREMENT column takes the next value
// where its field is missing, NULL or 0, as in an INSERT.

// ruleLoadData is the analyzer rule id of loadDataRule, far from GMS's own ids.
const ruleLoadData analyzer.RuleId = 100_005

func init() {
	analyzer.AlwaysBeforeDefault = append(analyzer.AlwaysBeforeDefault, analyzer.Rule{Id: ruleLoadData, Apply: loadDataRule})
}

func loadDataRule(ctx *sql.Context, _ *analyzer.Analyzer, n sql.Node, _ *plan.Scope, _ analyzer.RuleSelector, _ *sql.QueryFlags) (sql.Node, transform.TreeIdentity, error) {
	ins, ok := n.(*plan.InsertInto)
	if !ok {
		return n, transform.SameTree, nil
	}
	ld, ok := ins.Source.(*plan.LoadData)
	if !ok || len(ins.Checks()) > 0 {
		return n, transform.SameTree, nil
	}
	it, err := plan.GetInsertable(ins.Destination)
	if err != nil {
		return n, transform.SameTree, nil
	}
	var t *Table
	switch x := it.(type) {
	case *Table:
		t = x
	case *upsertTable:
		t = x.Table
	default:
		return n, transform.SameTree, nil
	}
	schema := t.def.schema.Schema
	for _, c := range schema {
		if c.Generated != nil {
			return n, transform.SameTree, nil
		}
	}
	cols, vars, sets, ok, err := loadFields(ctx, ld, schema)
	if err != nil || !ok {
		return n, transform.SameTree, err
	}
	f := loadFormat{fieldTerm: ld.FieldsTerminatedBy, lineTerm: ld.LinesTerminatedBy, lineStart: ld.LinesStartingBy}
	if ld.FieldsEnclosedBy != "" {
		f.enclose = ld.FieldsEnclosedBy[0]
	}
	if ld.FieldsEscapedBy != "" {
		f.escape = ld.FieldsEscapedBy[0]
	}
	if f.lineTerm == "" {
		f.lineTerm = "\n"
	}
	if f.fieldTerm == "" {
		f.fieldTerm = "\t"
	}
	mode := loadDupError
	switch {
	case ld.IsReplace:
		mode = loadDupReplace
	case ld.IsIgnore:
		mode = loadDupIgnore
	}
	if len(t.def.schema.PkOrdinals) == 0 {
		mode = loadDupError // nothing is a duplicate
	}
	return &loadData{t: t, file: ld.File, local: ld.Local, format: f, ignore: ld.IgnoreNum, cols: cols, vars: vars, sets: sets, dup: mode}, transform.NewTree, nil
}

// loadSet is one assignment of a SET clause: column col gets expr's value.
type loadSet struct {
	col  int
	expr sql.Expression
}

// loadFields reads the fields of a LOAD DATA statement: the table column each field goes to (-1 for a
// user variable), the variable's name where it is one, and the SET clause, whose expressions read the
// variables and the row's columns by their table positions (GMS builds them over the table). ok is
// false for what the fast path leaves to GMS: a SET clause without a column list.
//
// GMS's planbuilder appends each SET column that is not in the column list to ColNames (and nil
// entries to UserVars) after the file's fields: the file's fields are the user variables and the
// column names before those. How many were appended follows from UserVars, which the planbuilder makes
// max(columns of the table, entries of the list) long before appending (appendedSetColumns); where
// the list is longer than the table, the trailing SET columns are taken as appended (a column both in
// the list and SET, listed last, then makes the file's records one field too many).
func loadFields(ctx *sql.Context, ld *plan.LoadData, schema sql.Schema) (cols []int, vars []string, sets []loadSet, ok bool, err error) {
	for i, e := range ld.SetExprs {
		if e == nil {
			continue
		}
		// The columns it reads, by their position in the row the load builds.
		e, _, err := transform.Expr(ctx, e, func(_ *sql.Context, e sql.Expression) (sql.Expression, transform.TreeIdentity, error) {
			gf, ok := e.(*expression.GetField)
			if !ok {
				return e, transform.SameTree, nil
			}
			at := schema.IndexOfColName(gf.Name())
			if at < 0 {
				return nil, transform.SameTree, sql.ErrColumnNotFound.New(gf.Name())
			}
			return gf.WithIndex(at), transform.NewTree, nil
		})
		if err != nil {
			return nil, nil, nil, false, err
		}
		sets = append(sets, loadSet{col: i, expr: e})
	}
	if len(ld.ColNames) == 0 {
		if len(sets) > 0 {
			return nil, nil, nil, false, nil
		}
		for i := range schema {
			cols, vars = append(cols, i), append(vars, "")
		}
		return cols, vars, nil, true, nil
	}
	names := ld.ColNames
	nVars := 0
	for _, v := range ld.UserVars {
		if v != nil {
			nVars++
		}
	}
	if appended, exact := appendedSetColumns(len(schema), len(names), nVars, len(ld.UserVars)); exact {
		names = names[:len(names)-appended]
	} else {
		isSet := func(name string) bool {
			i := schema.IndexOfColName(name)
			return i >= 0 && ld.SetExprs != nil && ld.SetExprs[i] != nil
		}
		for len(names) > 0 && isSet(names[len(names)-1]) {
			names = names[:len(names)-1]
		}
	}
	fields := len(names) + nVars
	if fields > len(ld.UserVars) {
		return nil, nil, nil, false, nil
	}
	next := 0
	for f := 0; f < fields; f++ {
		if v := ld.UserVars[f]; v != nil {
			sf, isSetField := v.(*expression.SetField)
			uv, isVar := sf.LeftChild.(*expression.UserVar)
			if !isSetField || !isVar {
				return nil, nil, nil, false, nil
			}
			cols, vars = append(cols, -1), append(vars, uv.Name)
			continue
		}
		if next >= len(names) {
			return nil, nil, nil, false, nil
		}
		i := schema.IndexOfColName(names[next])
		next++
		if i < 0 {
			return nil, nil, nil, false, sql.ErrColumnNotFound.New(names[next-1])
		}
		cols, vars = append(cols, i), append(vars, "")
	}
	return cols, vars, sets, true, nil
}

// appendedSetColumns returns how many of a LOAD DATA's names (ColNames) the planbuilder appended for
// SET columns missing from the list, from the table's width, the names, the list's user variables and
// UserVars's length: UserVars = max(width, listed names + variables) + appended. exact is false where
// the list is longer than the table, as UserVars's length then does not depend on what was appended.
func appendedSetColumns(width, names, vars, userVars int) (appended int, exact bool) {
	appended = userVars - width
	if appended < 0 || appended > names || names-appended+vars > width {
		return 0, false
	}
	return appended, true
}

type loadDupMode int

const (
	loadDupError loadDupMode = iota
	loadDupIgnore
	loadDupReplace
)

// loadData is a LOAD DATA statement into an ldpsql table; it answers with an OK packet.
type loadData struct {
	t      *Table
	file   string // as the statement names it
	local  bool
	format loadFormat
	ignore int64
	cols   []int    // the table column of each field, -1 for a user variable
	vars   []string // the user variable of each field, "" for a column
	sets   []loadSet
	dup    loadDupMode
}

var _ sql.ExecBuilderNode = (*loadData)(nil)

func (n *loadData) Resolved() bool                 { return true }
func (n *loadData) IsReadOnly() bool               { return false }
func (n *loadData) Children() []sql.Node           { return nil }
func (n *loadData) Schema(*sql.Context) sql.Schema { return types.OkResultSchema }
func (n *loadData) String() string                 { return fmt.Sprintf("LoadData(%s)", n.t.def.name) }
func (n *loadData) CollationCoercibility(*sql.Context) (sql.CollationID, byte) {
	return sql.Collation_binary, 7
}

func (n *loadData) WithChildren(_ *sql.Context, children ...sql.Node) (sql.Node, error) {
	if len(children) != 0 {
		return nil, sql.ErrInvalidChildrenNumber.New(n, len(children), 0)
	}
	return n, nil
}

// loadInfo is the OK packet's info text, as MySQL writes it.
type loadInfo struct{ records, deleted, skipped int64 }

func (i loadInfo) String() string {
	return fmt.Sprintf("Records: %d  Deleted: %d  Skipped: %d  Warnings: 0", i.records, i.deleted, i.skipped)
}

// BuildRowIter implements sql.ExecBuilderNode: the whole load runs here.
func (n *loadData) BuildRowIter(ctx *sql.Context, _ sql.NodeExecBuilder, _ sql.Row) (sql.RowIter, error) {
	var in io.ReadCloser
	if n.local {
		_, on, ok := sql.SystemVariables.GetGlobal("local_infile")
		if !ok || on.(int8) == 0 {
			return nil, mysql.NewSQLError(mysql.ERNotAllowedCommand, mysql.SSClientError,
				"Loading local data is disabled; this must be enabled on both the client and server sides (SET GLOBAL local_infile = 1)")
		}
		r, err := ctx.LoadInfile(n.file)
		if err != nil {
			return nil, err
		}
		in = r
	} else {
		// GMS analyzes an INSERT's source apart, after this rule, so serverBoundary has not checked
		// the path yet: checked here as it would be (FILE was checked before).
		path := n.file
		if check := n.t.db.p.infile; check != nil {
			var err error
			if path, err = check(n.file); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil, sql.ErrLoadDataCannotOpen.New(err.Error())
				}
				return nil, err
			}
		}
		f, err := os.Open(path)
		if err != nil {
			return nil, sql.ErrLoadDataCannotOpen.New(err.Error())
		}
		in = f
	}
	res, err := n.load(ctx, in)
	// Closing a LOCAL reader drains what the client still sends, so the connection stays in step.
	if cerr := in.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return sql.RowsToRowIter(sql.NewRow(res)), nil
}

var loadSeq atomic.Uint64

func (n *loadData) load(ctx *sql.Context, in io.Reader) (res types.OkResult, err error) {
	ed := newTableEditor(n.t)
	if err := ed.begin(ctx); err != nil {
		return res, err
	}
	defer func() {
		if err != nil {
			ed.discardCause = err
			_ = ed.finish(ctx, false)
		}
	}()
	defaults, err := n.defaultColumns()
	if err != nil {
		return res, err
	}
	staging, err := n.openAppender(ctx, ed)
	if err != nil {
		return res, err
	}
	records, err := n.appendRecords(ctx, ed, in, defaults)
	if err != nil {
		return res, err
	}
	res.RowsAffected = uint64(records)
	info := loadInfo{records: records}
	if staging != "" {
		if err := n.mergeStaging(ctx, ed, staging, &res, &info); err != nil {
			return res, err
		}
	}
	res.Info = info
	if err := ed.finish(ctx, true); err != nil {
		return res, err
	}
	return res, nil
}

// defaultColumns returns the columns without a field or a SET, which get their default; a NOT NULL
// column without a default among them is MySQL's error 1364, before anything is read.
func (n *loadData) defaultColumns() ([]int, error) {
	schema := n.t.def.schema.Schema
	hasField := make([]bool, len(schema))
	for _, c := range n.cols {
		if c >= 0 {
			hasField[c] = true
		}
	}
	for _, st := range n.sets {
		hasField[st.col] = true
	}
	var defaults []int
	for i, c := range schema {
		if !hasField[i] {
			if c.Default == nil && !c.Nullable && !c.AutoIncrement {
				return nil, mysql.NewSQLError(mysql.ERNoDefaultForField, mysql.SSUnknownSQLState, "Field '%s' doesn't have a default value", c.Name)
			}
			defaults = append(defaults, i)
		}
	}
	return defaults, nil
}

// openAppender opens the statement's appender: on the table itself, or, when duplicates are skipped or
// replaced, on a temporary table of the same columns (returned) that mergeStaging merges into it.
func (n *loadData) openAppender(ctx *sql.Context, ed *tableEditor) (staging string, err error) {
	t := n.t
	if n.dup != loadDupError {
		staging = fmt.Sprintf("ldpsql_load_%d", loadSeq.Add(1))
		if _, err := ed.conn.ExecContext(ctx, fmt.Sprintf("CREATE TEMP TABLE %s AS SELECT * FROM %s LIMIT 0", quoteIdent(staging), t.qualified())); err != nil {
			return "", err
		}
	}
	err = ed.conn.Raw(func(dc any) error {
		var err error
		if staging != "" {
			ed.appender, err = duckdb.NewAppender(duckConn(dc), "temp", "main", staging)
		} else {
			ed.appender, err = duckdb.NewAppenderFromConn(duckConn(dc), t.db.name, t.def.name)
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("opening appender on %q: %w", t.def.name, err)
	}
	return staging, nil
}

// appendRecords reads the file's records (after the IGNORE n LINES), converts each into a row and
// appends it, and returns how many it read. The first bad record is the statement's error.
func (n *loadData) appendRecords(ctx *sql.Context, ed *tableEditor, in io.Reader, defaults []int) (int64, error) {
	schema := n.t.def.schema.Schema
	fastConv := make([]func(string) (driver.Value, bool), len(schema))
	for i, c := range schema {
		fastConv[i] = fastNumber(c.Type)
	}
	r := newLoadReader(in, n.format)
	var fields []loadField
	var err error
	for skip := n.ignore; skip > 0; skip-- {
		if fields, _, err = r.next(fields); err == io.EOF {
			break
		} else if err != nil {
			return 0, loadErr(err)
		}
	}
	auto := n.t.autoIncrementColumn()
	row := make(sql.Row, len(schema))
	vals := make([]driver.Value, len(schema))
	var records int64
	for {
		var line int
		fields, line, err = r.next(fields)
		if err == io.EOF {
			break
		}
		if err != nil {
			return records, loadErr(err)
		}
		records++
		where := func() string { return fmt.Sprintf("at row %d (line %d of the file)", records, line) }
		if len(fields) < len(n.cols) {
			return records, mysql.NewSQLError(1261, mysql.SSUnknownSQLState, "Row %d doesn't contain data for all columns: %d fields, %d columns %s", records, len(fields), len(n.cols), where())
		}
		if len(fields) > len(n.cols) {
			return records, mysql.NewSQLError(1262, mysql.SSUnknownSQLState, "Row %d was truncated; it contained more data than there were input columns: %d fields, %d columns %s", records, len(fields), len(n.cols), where())
		}
		if err := n.fieldsToRow(ctx, fields, fastConv, row, vals, where); err != nil {
			return records, err
		}
		if err := n.completeRow(ctx, defaults, auto, row, vals, where); err != nil {
			return records, err
		}
		ed.noteWritten(row) // a duplicate is named as the file wrote it
		if err := ed.appender.AppendRow(vals...); err != nil {
			return records, ed.translate(err)
		}
	}
	if err := ed.closeAppender(); err != nil {
		return records, ed.translate(err)
	}
	return records, nil
}

// fieldsToRow converts one record's fields into row (GMS values) and vals (DuckDB's), by their columns'
// types; a field read into a user variable sets it, as MySQL's does.
func (n *loadData) fieldsToRow(ctx *sql.Context, fields []loadField, fastConv []func(string) (driver.Value, bool),
	row sql.Row, vals []driver.Value, where func() string) error {
	schema := n.t.def.schema.Schema
	for i, fld := range fields {
		c := n.cols[i]
		if c < 0 {
			// A user variable holds the field's text (NULL for \N), as MySQL's does.
			var v any
			var typ sql.Type = types.Null
			if !fld.null {
				v, typ = fld.s, types.LongText
			}
			if err := ctx.SetUserVariable(ctx, n.vars[i], v, typ); err != nil {
				return err
			}
			continue
		}
		col := schema[c]
		if fld.null {
			if !col.Nullable && !col.AutoIncrement {
				return mysql.NewSQLError(mysql.ERBadNullError, mysql.SSConstraintViolation, "Column '%s' cannot be null %s", col.Name, where())
			}
			row[c], vals[c] = nil, nil
			continue
		}
		if fast := fastConv[c]; fast != nil {
			if v, ok := fast(fld.s); ok {
				row[c], vals[c] = v, v
				continue
			}
		}
		v, err := loadConvert(ctx, col, fld.s)
		if err != nil {
			return mysql.NewSQLError(mysql.ERTruncatedWrongValueForField, mysql.SSUnknownSQLState,
				"Incorrect %s value: '%s' for column '%s' %s", col.Type.String(), clip(fld.s), col.Name, where())
		}
		row[c] = v
		if vals[c], err = toDuck(ctx, col.Type, v); err != nil {
			return fmt.Errorf("column '%s' %s: %w", col.Name, where(), err)
		}
	}
	return nil
}

// completeRow fills the rest of a record's row after its fields: the SET clauses (evaluated on the
// fields), the defaults, and the AUTO_INCREMENT value (of column auto, if ≥ 0) as an INSERT would take it.
func (n *loadData) completeRow(ctx *sql.Context, defaults []int, auto int, row sql.Row, vals []driver.Value, where func() string) error {
	t := n.t
	schema := t.def.schema.Schema
	var err error
	for _, st := range n.sets {
		col := schema[st.col]
		v, err := st.expr.Eval(ctx, row) // the row so far: the file's fields
		if err != nil {
			return fmt.Errorf("SET %s %s: %w", col.Name, where(), err)
		}
		if v == nil && !col.Nullable && !col.AutoIncrement {
			return mysql.NewSQLError(mysql.ERBadNullError, mysql.SSConstraintViolation, "Column '%s' cannot be null %s", col.Name, where())
		}
		if v != nil {
			cv, inRange, err := col.Type.Convert(ctx, v)
			if err != nil || inRange != sql.InRange {
				return mysql.NewSQLError(mysql.ERTruncatedWrongValueForField, mysql.SSUnknownSQLState,
					"Incorrect %s value: '%s' for column '%s' %s", col.Type.String(), clip(fmt.Sprint(v)), col.Name, where())
			}
			v = cv
		}
		row[st.col] = v
		if vals[st.col], err = toDuck(ctx, col.Type, v); err != nil {
			return fmt.Errorf("column '%s' %s: %w", col.Name, where(), err)
		}
	}
	for _, c := range defaults {
		col := schema[c]
		var v any
		if col.Default != nil {
			if v, err = col.Default.Eval(ctx, row); err != nil {
				return err
			}
			if v, _, err = col.Type.Convert(ctx, v); err != nil {
				return err
			}
		}
		row[c] = v
		if vals[c], err = toDuck(ctx, col.Type, v); err != nil {
			return fmt.Errorf("column '%s' %s: %w", col.Name, where(), err)
		}
	}
	if auto < 0 {
		return nil
	}
	// As an INSERT: NULL or 0 (or no field) takes the next value; a value moves the counter past it.
	if isZeroOrNull(row[auto]) {
		next, err := t.GetNextAutoIncrementValue(ctx, nil)
		if err != nil {
			return err
		}
		if row[auto], _, err = schema[auto].Type.Convert(ctx, next); err != nil {
			return err
		}
		if vals[auto], err = toDuck(ctx, schema[auto].Type, row[auto]); err != nil {
			return err
		}
	}
	return t.noteInserted(ctx, row)
}

// mergeStaging merges the staging table into the table, skipping (IGNORE) or replacing (REPLACE) the
// rows whose key is there already, sets the counts MySQL reports for them, and drops the staging table.
func (n *loadData) mergeStaging(ctx *sql.Context, ed *tableEditor, staging string, res *types.OkResult, info *loadInfo) error {
	t := n.t
	// Keys compare as their columns' collations (keyExpr); DuckDB's INSERT OR IGNORE / OR REPLACE
	// know only the binary primary key, so a key with an insensitive string column is merged by
	// NOT EXISTS, or DELETE then INSERT.
	key := strings.Join(keyExprs(t.def.schema, ""), ", ")
	collated := uniqueIndexFor(t.db.name, t.def.name, t.def.schema) != ""
	order, verb, where := "", "INSERT OR IGNORE", ""
	if collated {
		verb = "INSERT"
		where = fmt.Sprintf(" WHERE NOT EXISTS (SELECT 1 FROM %s t WHERE %s)", t.qualified(), keyJoin(t.def.schema, "s", "t"))
	}
	if n.dup == loadDupReplace {
		order, verb, where = " DESC", "INSERT OR REPLACE", ""
		// MySQL counts a replaced row twice: deleted, then inserted.
		var replaced int64
		q := fmt.Sprintf("SELECT count(*) FROM (SELECT DISTINCT ON (%s) * FROM temp.main.%s) s WHERE EXISTS (SELECT 1 FROM %s t WHERE %s)",
			key, quoteIdent(staging), t.qualified(), keyJoin(t.def.schema, "s", "t"))
		if err := ed.conn.QueryRowContext(ctx, q).Scan(&replaced); err != nil {
			return ed.translate(err)
		}
		if collated && replaced > 0 {
			verb = "INSERT"
			q := fmt.Sprintf("DELETE FROM %s t WHERE EXISTS (SELECT 1 FROM temp.main.%s s WHERE %s)", t.qualified(), quoteIdent(staging), keyJoin(t.def.schema, "s", "t"))
			if _, err := ed.conn.ExecContext(ctx, q); err != nil {
				return ed.translate(err)
			}
		}
		dupInFile := int64(0)
		q = fmt.Sprintf("SELECT count(*) - count(DISTINCT (%s)) FROM temp.main.%s", key, quoteIdent(staging))
		if err := ed.conn.QueryRowContext(ctx, q).Scan(&dupInFile); err != nil {
			return ed.translate(err)
		}
		info.deleted = replaced + dupInFile
		res.RowsAffected = uint64(info.records + info.deleted)
	}
	// Of the file's rows with one key, IGNORE keeps the first and REPLACE the last.
	q := fmt.Sprintf("%s INTO %s SELECT * EXCLUDE (ldpsql_load_pos) FROM (SELECT *, rowid AS ldpsql_load_pos FROM temp.main.%s) s%s QUALIFY row_number() OVER (PARTITION BY %s ORDER BY ldpsql_load_pos%s) = 1",
		verb, t.qualified(), quoteIdent(staging), where, key, order)
	r, err := ed.conn.ExecContext(ctx, q)
	if err != nil {
		return ed.translate(err)
	}
	if n.dup == loadDupIgnore {
		inserted, _ := r.RowsAffected()
		info.skipped = info.records - inserted
		res.RowsAffected = uint64(inserted)
	}
	// Dropped before the commit: the connection goes back to the pool, or stays the session's.
	_, err = ed.conn.ExecContext(ctx, "DROP TABLE temp.main."+quoteIdent(staging))
	return err
}

// keyJoin matches the primary keys of rows a and b as their collations compare them.
func keyJoin(schema sql.PrimaryKeySchema, a, b string) string {
	as, bs := keyExprs(schema, a), keyExprs(schema, b)
	conds := make([]string, len(as))
	for i := range as {
		conds[i] = as[i] + " = " + bs[i]
	}
	return strings.Join(conds, " AND ")
}

// isZeroOrNull reports whether an AUTO_INCREMENT column's value asks for the next one.
func isZeroOrNull(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case int8:
		return x == 0
	case int16:
		return x == 0
	case int32:
		return x == 0
	case int64:
		return x == 0
	case uint8:
		return x == 0
	case uint16:
		return x == 0
	case uint32:
		return x == 0
	case uint64:
		return x == 0
	}
	return false
}

// loadErr names a reading error as LOAD DATA's.
func loadErr(err error) error {
	return fmt.Errorf("LOAD DATA: %w; nothing was loaded", err)
}

// clip shortens a value quoted in an error to a few dozen bytes.
func clip(s string) string {
	const max = 40
	if len(s) <= max {
		return s
	}
	return s[:max] + fmt.Sprintf("… (%d bytes)", len(s))
}

// loadConvert converts a field's text to its column's type, refusing what MySQL's strict mode refuses:
// text that is not a number for a numeric column (the empty field included) and values out of range.
func loadConvert(ctx *sql.Context, col *sql.Column, s string) (any, error) {
	if s == "" && !types.IsText(col.Type) {
		return nil, fmt.Errorf("empty")
	}
	v, inRange, err := col.Type.Convert(ctx, s)
	if err != nil {
		return nil, err
	}
	if inRange != sql.InRange {
		return nil, fmt.Errorf("out of range")
	}
	return v, nil
}

// fastNumber returns, for the integer and floating-point types, a conversion of plain decimal text to
// the column's Go value that skips GMS's general conversion (a third of the load's time); text it does
// not take (spaces, exponents in integers, out of range) goes the general way, which decides.
func fastNumber(t sql.Type) func(string) (driver.Value, bool) {
	signed := func(bits int, mk func(int64) driver.Value) func(string) (driver.Value, bool) {
		return func(s string) (driver.Value, bool) {
			i, err := strconv.ParseInt(s, 10, bits)
			if err != nil {
				return nil, false
			}
			return mk(i), true
		}
	}
	unsigned := func(bits int, mk func(uint64) driver.Value) func(string) (driver.Value, bool) {
		return func(s string) (driver.Value, bool) {
			if strings.HasPrefix(s, "+") {
				return nil, false
			}
			u, err := strconv.ParseUint(s, 10, bits)
			if err != nil {
				return nil, false
			}
			return mk(u), true
		}
	}
	float := func(bits int, mk func(float64) driver.Value) func(string) (driver.Value, bool) {
		return func(s string) (driver.Value, bool) {
			for i := 0; i < len(s); i++ {
				if c := s[i]; (c < '0' || c > '9') && c != '.' && c != '-' && c != '+' && c != 'e' && c != 'E' {
					return nil, false // NaN, Inf, hexadecimal, spaces: the general way
				}
			}
			f, err := strconv.ParseFloat(s, bits)
			if err != nil {
				return nil, false
			}
			return mk(f), true
		}
	}
	switch t.Type() {
	case query.Type_INT8:
		return signed(8, func(i int64) driver.Value { return int8(i) })
	case query.Type_INT16:
		return signed(16, func(i int64) driver.Value { return int16(i) })
	case query.Type_INT32:
		return signed(32, func(i int64) driver.Value { return int32(i) })
	case query.Type_INT64:
		return signed(64, func(i int64) driver.Value { return i })
	case query.Type_UINT8:
		return unsigned(8, func(u uint64) driver.Value { return uint8(u) })
	case query.Type_UINT16:
		return unsigned(16, func(u uint64) driver.Value { return uint16(u) })
	case query.Type_UINT32:
		return unsigned(32, func(u uint64) driver.Value { return uint32(u) })
	case query.Type_UINT64:
		return unsigned(64, func(u uint64) driver.Value { return u })
	case query.Type_FLOAT64:
		return float(64, func(f float64) driver.Value { return f })
	case query.Type_FLOAT32:
		return float(32, func(f float64) driver.Value { return float32(f) })
	}
	return nil
}
