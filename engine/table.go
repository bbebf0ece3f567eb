package engine

import (
	gosql "database/sql"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"
)

// Table is a GMS table stored as a DuckDB table. Scans select only the projected columns: an index
// lookup or a small table in one DuckDB query, a large table in ranges of row ids (rangeScan).
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
func (t *Table) Collation() sql.CollationID { return tableCollation(t.def.schema.Schema) }

// Comment implements sql.CommentedTable.
func (t *Table) Comment() string { return t.def.comment }

// qualified is the quoted DuckDB name of the table.
func (t *Table) qualified() string {
	return quoteIdent(t.db.name) + "." + quoteIdent(t.def.name)
}

// source is what a read of the table selects from: the table, or for ldp_budget_units the exact
// spending of every unit (budgetUnitsSQL: the folded rows and the releases since).
func (t *Table) source() string {
	if budgetUnitsTable(t.db.name, t.def.name) && t.db.p.ledger != nil {
		return "(" + budgetUnitsSQL(t.db.p.ledger.folded.Load(), "") + ") AS ldp_budget_units"
	}
	return t.qualified()
}

// mysqlName is the table's name as a MySQL client writes it, for messages: `db`.`table`.
func (t *Table) mysqlName() string {
	return "`" + strings.ReplaceAll(t.db.name, "`", "``") + "`.`" + strings.ReplaceAll(t.def.name, "`", "``") + "`"
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

// PartitionRows implements sql.Table. A lookupPartition restricts the scan to an index lookup, run as one
// query; a full scan of a large table is a rangeScan.
func (t *Table) PartitionRows(ctx *sql.Context, part sql.Partition) (sql.RowIter, error) {
	if stagingTable(t.def.name) {
		return nil, errStaging(t.def.name)
	}
	schema := t.Schema(ctx)
	lp, isLookup := part.(lookupPartition)
	// A lookup by a collated key reads the key too, to keep the rows GMS's comparison puts in its ranges
	// (collatedLookup).
	read := schema
	if isLookup && t.hasCollatedKey() {
		read = append(schema.Copy(), t.keyColumns()...)
	}
	cols := make([]string, len(read))
	for i, c := range read {
		cols[i] = quoteIdent(c.Name)
	}
	selectList := strings.Join(cols, ", ")
	if len(cols) == 0 {
		selectList = "1" // spool rows, no columns (e.g. COUNT(*))
	}
	query := "SELECT " + selectList + " FROM " + t.source()
	if !isLookup && t.def.lastScan.Load() >= rangeScanFrom && !t.hasRowidColumn() && !budgetUnitsTable(t.db.name, t.def.name) {
		it, err := newRangeScan(ctx, t, query, schema)
		if err != nil {
			return nil, fmt.Errorf("scanning table %q: %w", t.def.name, err)
		}
		return it, nil
	}
	var args []any
	if isLookup {
		where, whereArgs, extra, extraArgs, err := t.rangePredicate(ctx, lp.lookup)
		if err != nil {
			return nil, err
		}
		if where != "" {
			plain := query
			query += " WHERE " + where
			args = whereArgs
			if extra != "" {
				query += " UNION ALL " + plain + " WHERE " + extra
				args = append(append([]any(nil), args...), extraArgs...)
			}
		}
	}
	q, _, err := t.querier(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("scanning table %q: %w", t.def.name, err)
	}
	it := newRowIter(rows, read)
	if !isLookup {
		it.fullScanOf = t.def
	}
	if len(read) > len(schema) {
		return &collatedLookup{rows: it, lookup: lp.lookup, keys: t.keyColumns(), width: len(schema)}, nil
	}
	return it, nil
}

// querier is where the table is read: the session's transaction, or the pool. ldpsql's catalog tables
// (the ledger's among them) are always read on the pool: other connections write them, and a session
// sees its own charges as soon as they are made, also inside a transaction.
func (t *Table) querier(ctx *sql.Context) (q duckQuerier, inTx bool, err error) {
	if t.db.readOnly {
		return t.db.p.db, false, nil
	}
	return t.db.p.querier(ctx)
}

// hasRowidColumn says whether the table has a column named rowid, which hides DuckDB's row ids.
func (t *Table) hasRowidColumn() bool {
	for _, c := range t.def.schema.Schema {
		if strings.EqualFold(c.Name, "rowid") {
			return true
		}
	}
	return false
}

// Scan ranges. duckdb-go materialises a query's whole result before it returns the first row, so one
// query per scan would make a statement over a large table wait for all of it (and hold all of it in
// memory) before its first row: 60 ms for 60,000 rows of 784 features, during which a plugin has
// nothing to encode. A rangeScan reads the table in ranges of row ids, the first small and each next
// one twice as large up to maxScanRange rows, all in one transaction so that they see one snapshot of
// the table. Its transaction and extra queries cost about 1 ms, so a table is scanned that way only
// once a full scan of it has returned rangeScanFrom rows or more; smaller tables, and the first scan of
// any table, take one query.
const (
	firstScanRange = 2048
	maxScanRange   = 65536
	rangeScanFrom  = 8192
)

type rangeScan struct {
	def    *tableDef
	rows   int64       // returned so far
	q      duckQuerier // tx, or the session's transaction
	tx     *gosql.Tx   // the scan's own; nil in a session's transaction
	query  string      // with a rowid range to fill in
	schema sql.Schema
	next   int64 // first row id of the next range
	end    int64 // one past the largest row id
	step   int64 // rows in the next range
	cur    *rowIter
}

func newRangeScan(ctx *sql.Context, t *Table, query string, schema sql.Schema) (*rangeScan, error) {
	q, inTx, err := t.querier(ctx)
	if err != nil {
		return nil, err
	}
	var tx *gosql.Tx
	if !inTx {
		if tx, err = t.db.p.db.BeginTx(ctx, nil); err != nil {
			return nil, err
		}
		q = tx
	}
	var last gosql.NullInt64
	if err := q.QueryRowContext(ctx, "SELECT max(rowid) FROM "+t.qualified()).Scan(&last); err != nil {
		if tx != nil {
			_ = tx.Rollback()
		}
		return nil, err
	}
	s := &rangeScan{def: t.def, q: q, tx: tx, query: query + " WHERE rowid >= ? AND rowid < ?", schema: schema, step: firstScanRange}
	if last.Valid {
		s.end = last.Int64 + 1
	}
	return s, nil
}

func (s *rangeScan) Next(ctx *sql.Context) (sql.Row, error) {
	for {
		if s.cur != nil {
			row, err := s.cur.Next(ctx)
			if err == nil {
				s.rows++
			}
			if err != io.EOF {
				return row, err
			}
			err = s.cur.Close(ctx)
			s.cur = nil
			if err != nil {
				return nil, err
			}
		}
		if s.next >= s.end {
			s.def.lastScan.Store(s.rows)
			return nil, io.EOF
		}
		lo, hi := s.next, s.next+s.step
		s.next, s.step = hi, min(2*s.step, maxScanRange)
		rows, err := s.q.QueryContext(ctx, s.query, lo, hi)
		if err != nil {
			return nil, err
		}
		s.cur = newRowIter(rows, s.schema)
	}
}

// Close ends the scan's read-only transaction.
func (s *rangeScan) Close(ctx *sql.Context) error {
	var err error
	if s.cur != nil {
		err = s.cur.Close(ctx)
		s.cur = nil
	}
	if s.tx == nil {
		return err
	}
	if rerr := s.tx.Rollback(); rerr != nil && !errors.Is(rerr, gosql.ErrTxDone) && err == nil {
		err = rerr
	}
	return err
}

func newRowIter(rows *gosql.Rows, schema sql.Schema) *rowIter {
	width := max(len(schema), 1)
	it := &rowIter{rows: rows, schema: schema, vals: make([]driverValue, width), ptrs: make([]any, width)}
	for i := range it.vals {
		it.ptrs[i] = &it.vals[i]
	}
	return it
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
	fullScanOf *tableDef // set on a full scan: its row count goes to lastScan
	n          int64     // rows returned so far
	rows       *gosql.Rows
	schema     sql.Schema
	vals       []driverValue
	ptrs       []any
}

func (it *rowIter) Next(ctx *sql.Context) (sql.Row, error) {
	if !it.rows.Next() {
		if err := it.rows.Err(); err != nil {
			return nil, err
		}
		if it.fullScanOf != nil {
			it.fullScanOf.lastScan.Store(it.n)
		}
		return nil, io.EOF
	}
	it.n++
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
func (t *Table) Inserter(ctx *sql.Context) sql.RowInserter { return newStatementEditor(ctx, t) }

// Updater implements sql.UpdatableTable.
func (t *Table) Updater(ctx *sql.Context) sql.RowUpdater { return newStatementEditor(ctx, t) }

// Deleter implements sql.DeletableTable.
func (t *Table) Deleter(*sql.Context) sql.RowDeleter { return newTableEditor(t) }

// Replacer implements sql.ReplaceableTable.
func (t *Table) Replacer(ctx *sql.Context) sql.RowReplacer { return newStatementEditor(ctx, t) }

// Truncate implements sql.TruncateableTable.
func (t *Table) Truncate(ctx *sql.Context) (int, error) {
	if t.db.readOnly {
		return 0, t.db.errReadOnly()
	}
	defer t.def.wrote()
	s, conn, err := sessionConn(ctx)
	if err != nil {
		return 0, err
	}
	var q duckQuerier = t.db.p.db
	if conn != nil {
		s.noteWrite(t.def, t.mysqlName())
		q = conn
	}
	res, err := q.ExecContext(ctx, "DELETE FROM "+t.qualified())
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
	q, inTx, err := t.querier(ctx)
	if err != nil {
		return 0, false, err
	}
	if inTx { // the transaction's own snapshot and writes: never from or into the shared cache
		var n int64
		if err := q.QueryRowContext(ctx, "SELECT count(*) FROM "+t.source()).Scan(&n); err != nil {
			return 0, false, fmt.Errorf("counting rows of %q: %w", def.name, err)
		}
		return uint64(n), true, nil
	}
	def.countMu.Lock()
	n, gen := def.rowCount, def.writeGen
	def.countMu.Unlock()
	if n >= 0 && !t.db.readOnly { // catalog tables change behind GMS's back: never cached
		return uint64(n), true, nil
	}
	if err := t.db.p.db.QueryRowContext(ctx, "SELECT count(*) FROM "+t.source()).Scan(&n); err != nil {
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
