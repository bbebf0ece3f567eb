package engine

import (
	gosql "database/sql"
	"fmt"
	"io"
	"strings"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"
)

// Table is a GMS table stored as a DuckDB table. Scans run as one DuckDB query that selects only the
// projected columns.
type Table struct {
	db  *Database
	def *tableDef

	projection []string // nil: all columns
	projIdx    []int    // schema ordinals of projection
}

var _ sql.Table = (*Table)(nil)
var _ sql.ProjectedTable = (*Table)(nil)
var _ sql.PrimaryKeyTable = (*Table)(nil)
var _ sql.CommentedTable = (*Table)(nil)
var _ sql.InsertableTable = (*Table)(nil)
var _ sql.UpdatableTable = (*Table)(nil)
var _ sql.DeletableTable = (*Table)(nil)
var _ sql.ReplaceableTable = (*Table)(nil)
var _ sql.TruncateableTable = (*Table)(nil)
var _ sql.AutoIncrementTable = (*Table)(nil)

func newTable(db *Database, def *tableDef) *Table {
	return &Table{db: db, def: def}
}

// Name implements sql.Nameable.
func (t *Table) Name() string { return t.def.name }

// String implements fmt.Stringer.
func (t *Table) String() string { return t.def.name }

// Schema implements sql.Table: the projected columns when a projection is set.
func (t *Table) Schema(*sql.Context) sql.Schema {
	if t.projIdx == nil {
		return t.def.schema.Schema
	}
	s := make(sql.Schema, len(t.projIdx))
	for i, idx := range t.projIdx {
		s[i] = t.def.schema.Schema[idx]
	}
	return s
}

// PrimaryKeySchema implements sql.PrimaryKeyTable.
func (t *Table) PrimaryKeySchema(*sql.Context) sql.PrimaryKeySchema { return t.def.schema }

// Collation implements sql.Table.
func (t *Table) Collation() sql.CollationID { return sql.Collation_Default }

// Comment implements sql.CommentedTable.
func (t *Table) Comment() string { return t.def.comment }

// qualified is the quoted DuckDB name of the table.
func (t *Table) qualified() string {
	return quoteIdent(t.db.name) + "." + quoteIdent(t.def.name)
}

// WithProjections implements sql.ProjectedTable.
func (t *Table) WithProjections(_ *sql.Context, colNames []string) (sql.Table, error) {
	idx := make([]int, len(colNames))
	for i, name := range colNames {
		idx[i] = t.def.schema.Schema.IndexOfColName(name)
		if idx[i] < 0 {
			return nil, sql.ErrColumnNotFound.New(name)
		}
	}
	nt := *t
	nt.projection, nt.projIdx = colNames, idx
	return &nt, nil
}

// Projections implements sql.ProjectedTable.
func (t *Table) Projections() []string { return t.projection }

type partition struct{}

func (partition) Key() []byte { return []byte("all") }

// Partitions implements sql.Table: one partition, scanned by one DuckDB query.
func (t *Table) Partitions(*sql.Context) (sql.PartitionIter, error) {
	return sql.PartitionsToPartitionIter(partition{}), nil
}

// PartitionRows implements sql.Table. A lookupPartition restricts the scan to an index lookup.
func (t *Table) PartitionRows(ctx *sql.Context, part sql.Partition) (sql.RowIter, error) {
	schema := t.Schema(ctx)
	cols := make([]string, len(schema))
	for i, c := range schema {
		cols[i] = quoteIdent(c.Name)
	}
	selectList := strings.Join(cols, ", ")
	if len(cols) == 0 {
		selectList = "1" // spool rows, no columns (e.g. COUNT(*))
	}
	query := "SELECT " + selectList + " FROM " + t.qualified()
	var args []any
	if lp, ok := part.(lookupPartition); ok {
		where, whereArgs, err := t.rangePredicate(ctx, lp.lookup)
		if err != nil {
			return nil, err
		}
		if where != "" {
			query += " WHERE " + where
			args = whereArgs
		}
	}
	rows, err := t.db.p.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("scanning table %q: %w", t.def.name, err)
	}
	width := len(schema)
	if width == 0 {
		width = 1
	}
	it := &rowIter{rows: rows, schema: schema, vals: make([]driverValue, width), ptrs: make([]any, width)}
	for i := range it.vals {
		it.ptrs[i] = &it.vals[i]
	}
	return it, nil
}

// driverValue receives a column value exactly as the DuckDB driver returns it. Scanning into *any
// would make database/sql clone every []byte; duckdb-go already hands each row a fresh copy out of
// C memory, so the clone only doubled the copying of BLOB columns (3 KB per row for 784 features).
type driverValue struct{ v any }

func (d *driverValue) Scan(src any) error {
	d.v = src
	return nil
}

// rowIter turns DuckDB result rows into GMS rows.
type rowIter struct {
	rows   *gosql.Rows
	schema sql.Schema
	vals   []driverValue
	ptrs   []any
}

func (it *rowIter) Next(ctx *sql.Context) (sql.Row, error) {
	if !it.rows.Next() {
		if err := it.rows.Err(); err != nil {
			return nil, err
		}
		return nil, io.EOF
	}
	if err := it.rows.Scan(it.ptrs...); err != nil {
		return nil, err
	}
	row := make(sql.Row, len(it.schema))
	for i, col := range it.schema {
		v, err := fromDuck(ctx, col.Type, it.vals[i].v)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", col.Name, err)
		}
		row[i] = v
	}
	return row, nil
}

func (it *rowIter) Close(*sql.Context) error { return it.rows.Close() }

// Inserter implements sql.InsertableTable.
func (t *Table) Inserter(*sql.Context) sql.RowInserter { return newTableEditor(t) }

// Updater implements sql.UpdatableTable.
func (t *Table) Updater(*sql.Context) sql.RowUpdater { return newTableEditor(t) }

// Deleter implements sql.DeletableTable.
func (t *Table) Deleter(*sql.Context) sql.RowDeleter { return newTableEditor(t) }

// Replacer implements sql.ReplaceableTable.
func (t *Table) Replacer(*sql.Context) sql.RowReplacer { return newTableEditor(t) }

// Truncate implements sql.TruncateableTable.
func (t *Table) Truncate(ctx *sql.Context) (int, error) {
	if t.db.readOnly {
		return 0, t.db.errReadOnly()
	}
	defer t.def.wrote()
	res, err := t.db.p.db.ExecContext(ctx, "DELETE FROM "+t.qualified())
	if err != nil {
		return 0, fmt.Errorf("truncating table %q: %w", t.def.name, err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// autoIncrementColumn returns the ordinal of the AUTO_INCREMENT column, or -1.
func (t *Table) autoIncrementColumn() int {
	for i, c := range t.def.schema.Schema {
		if c.AutoIncrement {
			return i
		}
	}
	return -1
}

// loadAutoIncrementLocked initialises the counter from the stored maximum (def.autoMu held).
func (t *Table) loadAutoIncrementLocked(ctx *sql.Context) error {
	if t.def.autoNext != 0 {
		return nil
	}
	t.def.autoNext = 1
	idx := t.autoIncrementColumn()
	if idx < 0 {
		return nil
	}
	var max gosql.NullInt64
	q := fmt.Sprintf("SELECT max(%s)::BIGINT FROM %s", quoteIdent(t.def.schema.Schema[idx].Name), t.qualified())
	if err := t.db.p.db.QueryRowContext(ctx, q).Scan(&max); err != nil {
		return fmt.Errorf("reading AUTO_INCREMENT state of %q: %w", t.def.name, err)
	}
	if max.Valid && max.Int64 >= 1 {
		t.def.autoNext = uint64(max.Int64) + 1
	}
	return nil
}

// PeekNextAutoIncrementValue implements sql.AutoIncrementGetter.
func (t *Table) PeekNextAutoIncrementValue(ctx *sql.Context) (uint64, error) {
	t.def.autoMu.Lock()
	defer t.def.autoMu.Unlock()
	if err := t.loadAutoIncrementLocked(ctx); err != nil {
		return 0, err
	}
	return t.def.autoNext, nil
}

// GetNextAutoIncrementValue implements sql.AutoIncrementTable: the value to insert, which is insertVal
// when that is larger than the counter.
func (t *Table) GetNextAutoIncrementValue(ctx *sql.Context, insertVal any) (uint64, error) {
	t.def.autoMu.Lock()
	defer t.def.autoMu.Unlock()
	if err := t.loadAutoIncrementLocked(ctx); err != nil {
		return 0, err
	}
	if insertVal != nil {
		cmp, err := types.Uint64.Compare(ctx, insertVal, t.def.autoNext)
		if err != nil {
			return 0, err
		}
		if cmp > 0 {
			v, _, err := types.Uint64.Convert(ctx, insertVal)
			if err != nil {
				return 0, err
			}
			t.def.autoNext = v.(uint64)
		}
	}
	return t.def.autoNext, nil
}

// AutoIncrementSetter implements sql.AutoIncrementTable.
func (t *Table) AutoIncrementSetter(*sql.Context) sql.AutoIncrementSetter { return newTableEditor(t) }

// noteInserted moves the AUTO_INCREMENT counter past an inserted value.
func (t *Table) noteInserted(ctx *sql.Context, row sql.Row) error {
	idx := t.autoIncrementColumn()
	if idx < 0 || row[idx] == nil {
		return nil
	}
	v, _, err := types.Uint64.Convert(ctx, row[idx])
	if err != nil {
		return nil // negative or odd values do not move the counter
	}
	t.def.autoMu.Lock()
	defer t.def.autoMu.Unlock()
	if err := t.loadAutoIncrementLocked(ctx); err != nil {
		return err
	}
	if u := v.(uint64); u >= t.def.autoNext {
		t.def.autoNext = u + 1
	}
	return nil
}

var _ sql.StatisticsTable = (*Table)(nil)

// RowCount implements sql.StatisticsTable, so GMS answers SELECT COUNT(*) without streaming every row
// and can cost index lookups. The count is cached until the next write through a table editor (GMS asks
// for it while planning every query on the table).
func (t *Table) RowCount(ctx *sql.Context) (uint64, bool, error) {
	def := t.def
	def.countMu.Lock()
	n, gen := def.rowCount, def.writeGen
	def.countMu.Unlock()
	if n >= 0 && !t.db.readOnly { // catalog tables change behind GMS's back: never cached
		return uint64(n), true, nil
	}
	if err := t.db.p.db.QueryRowContext(ctx, "SELECT count(*) FROM "+t.qualified()).Scan(&n); err != nil {
		return 0, false, fmt.Errorf("counting rows of %q: %w", def.name, err)
	}
	def.countMu.Lock()
	if def.writeGen == gen {
		def.rowCount = n
	}
	def.countMu.Unlock()
	return uint64(n), true, nil
}

// DataLength implements sql.StatisticsTable; DuckDB does not report a per-table size cheaply.
func (t *Table) DataLength(*sql.Context) (uint64, error) { return 0, nil }
