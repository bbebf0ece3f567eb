package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"
)

// Database is a GMS database stored as one DuckDB schema.
type Database struct {
	p    *Provider
	name string
	// readOnly marks the catalog database: clients may read its ldp_ tables and change nothing.
	readOnly bool

	mu        sync.Mutex
	loaded    bool
	tables    map[string]*tableDef          // by lower-case name
	viewCache map[string]sql.ViewDefinition // by lower-case name; nil until loaded
}

// tableDef is the cached definition of one table. The DuckDB file is opened by one process only (DuckDB
// holds a file lock), so the cache is authoritative once loaded.
type tableDef struct {
	name    string
	schema  sql.PrimaryKeySchema
	comment string

	autoMu   sync.Mutex
	autoNext uint64 // next AUTO_INCREMENT value; 0 until first needed

	countMu  sync.Mutex
	rowCount int64  // cached row count, -1 when unknown
	writeGen uint64 // incremented after every committed write, so a count read concurrently is not cached

	lastScan atomic.Int64 // rows the last full scan returned (0 before the first): chooses how to scan
}

func newTableDef(name string, schema sql.PrimaryKeySchema, comment string) *tableDef {
	return &tableDef{name: name, schema: schema, comment: comment, rowCount: -1}
}

// wrote invalidates the cached row count; call it after a write commits or rolls back.
func (def *tableDef) wrote() {
	def.countMu.Lock()
	def.writeGen++
	def.rowCount = -1
	def.countMu.Unlock()
}

var _ sql.Database = (*Database)(nil)
var _ sql.TableCreator = (*Database)(nil)
var _ sql.TableDropper = (*Database)(nil)
var _ sql.TableRenamer = (*Database)(nil)
var _ sql.ReadOnlyDatabase = (*Database)(nil)

// IsReadOnly implements sql.ReadOnlyDatabase.
func (d *Database) IsReadOnly() bool { return d.readOnly }

// errReadOnly is returned for any change a client attempts in the catalog database.
func (d *Database) errReadOnly() error {
	return fmt.Errorf("database %s is read-only: it is changed only by ldpsql's procedures (CALL ldp_...)", d.name)
}

func newDatabase(p *Provider, name string) *Database {
	return &Database{p: p, name: name, tables: map[string]*tableDef{}}
}

// Name implements sql.Nameable.
func (d *Database) Name() string { return d.name }

// GetTableInsensitive implements sql.Database.
func (d *Database) GetTableInsensitive(ctx *sql.Context, name string) (sql.Table, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.loadLocked(ctx); err != nil {
		return nil, false, err
	}
	def, ok := d.tables[strings.ToLower(name)]
	if !ok {
		return nil, false, nil
	}
	if d.readOnly && strings.EqualFold(def.name, JobsTable) {
		return jobsTable{t: newTable(d, def), p: d.p}, true, nil // each user's own jobs (jobs.go)
	}
	return newTable(d, def), true, nil
}

// GetTableNames implements sql.Database.
func (d *Database) GetTableNames(ctx *sql.Context) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.loadLocked(ctx); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(d.tables))
	for _, def := range d.tables {
		names = append(names, def.name)
	}
	sort.Strings(names)
	return names, nil
}

// CreateTable implements sql.TableCreator. The DDL and the column metadata commit together.
func (d *Database) CreateTable(ctx *sql.Context, name string, schema sql.PrimaryKeySchema, _ sql.CollationID, comment string) error {
	if d.readOnly {
		return d.errReadOnly()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.loadLocked(ctx); err != nil {
		return err
	}
	if _, ok := d.tables[strings.ToLower(name)]; ok {
		return sql.ErrTableAlreadyExists.New(name)
	}
	qualified := quoteIdent(d.name) + "." + quoteIdent(name)
	var cols []string
	var stmts []string
	for _, col := range schema.Schema {
		duckType, err := duckTypeFor(col.Type)
		if err != nil {
			return fmt.Errorf("column %q: %w", col.Name, err)
		}
		def := quoteIdent(col.Name) + " " + duckType
		if !col.Nullable {
			def += " NOT NULL"
		}
		cols = append(cols, def)
		meta, err := encodeColumnMeta(col)
		if err != nil {
			return err
		}
		stmts = append(stmts, fmt.Sprintf("COMMENT ON COLUMN %s.%s IS %s", qualified, quoteIdent(col.Name), quoteString(meta)))
	}
	if len(schema.PkOrdinals) > 0 {
		var pk []string
		for _, i := range schema.PkOrdinals {
			pk = append(pk, quoteIdent(schema.Schema[i].Name))
		}
		cols = append(cols, "PRIMARY KEY ("+strings.Join(pk, ", ")+")")
	}
	create := fmt.Sprintf("CREATE TABLE %s (%s)", qualified, strings.Join(cols, ", "))
	stmts = append([]string{create}, stmts...)
	if idx := uniqueIndexFor(d.name, name, schema); idx != "" {
		stmts = append(stmts, idx)
	}
	if comment != "" {
		stmts = append(stmts, fmt.Sprintf("COMMENT ON TABLE %s IS %s", qualified, quoteString(comment)))
	}
	sc := statementChargesFrom(ctx)
	if sc != nil && sc.ctas {
		// A CREATE TABLE … AS SELECT: the table is unfinished until its rows commit (ctas.go).
		t := TableRef{Database: d.name, Table: name}
		stmts = append(stmts, unfinishedCreateStatement(t))
		sc.mu.Lock()
		sc.created = &t
		sc.mu.Unlock()
	}
	if err := d.p.execTx(ctx, stmts...); err != nil {
		return fmt.Errorf("creating table %q: %w", name, err)
	}
	stored := make(sql.Schema, len(schema.Schema))
	for i, col := range schema.Schema {
		c := col.Copy()
		c.Source = name
		c.DatabaseSource = d.name
		stored[i] = c
	}
	d.tables[strings.ToLower(name)] = newTableDef(name, sql.NewPrimaryKeySchema(stored, schema.PkOrdinals...), comment)
	return nil
}

// DropTable implements sql.TableDropper.
func (d *Database) DropTable(ctx *sql.Context, name string) error {
	if d.readOnly {
		return d.errReadOnly()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.loadLocked(ctx); err != nil {
		return err
	}
	def, ok := d.tables[strings.ToLower(name)]
	if !ok {
		return sql.ErrTableNotFound.New(name)
	}
	if err := d.p.execTx(ctx, "DROP TABLE "+quoteIdent(d.name)+"."+quoteIdent(def.name)); err != nil {
		return fmt.Errorf("dropping table %q: %w", name, err)
	}
	delete(d.tables, strings.ToLower(name))
	return nil
}

// RenameTable implements sql.TableRenamer.
func (d *Database) RenameTable(ctx *sql.Context, oldName, newName string) error {
	if d.readOnly {
		return d.errReadOnly()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.loadLocked(ctx); err != nil {
		return err
	}
	def, ok := d.tables[strings.ToLower(oldName)]
	if !ok {
		return sql.ErrTableNotFound.New(oldName)
	}
	if _, exists := d.tables[strings.ToLower(newName)]; exists {
		return sql.ErrTableAlreadyExists.New(newName)
	}
	stmts := []string{fmt.Sprintf("ALTER TABLE %s.%s RENAME TO %s", quoteIdent(d.name), quoteIdent(def.name), quoteIdent(newName))}
	if idx := uniqueIndexFor(d.name, newName, def.schema); idx != "" {
		// DuckDB renames no table with an index on it: the collated key's index is made again.
		stmts = []string{fmt.Sprintf("DROP INDEX IF EXISTS %s.%s", quoteIdent(d.name), quoteIdent(collatedKeyIndex(def.name))), stmts[0], idx}
	}
	// A protected table's budget and record, and the table's default mechanisms, follow it, in the same
	// transaction.
	from, to := TableRef{Database: d.name, Table: def.name}, TableRef{Database: d.name, Table: newName}
	stmts = append(stmts, defaultsRenameStatement(from, to))
	ledgerStmts := d.p.ledger.renameStatements(from, to)
	stmts = append(stmts, ledgerStmts...)
	if by, charges := takeCharges(ctx); len(charges) > 0 || len(ledgerStmts) > 0 {
		// A protected table's ledger rows move under the ledger's lock, on its connection, so that no
		// fold or charge runs between (a fold beside the rename counted releases twice); ldp_privatize
		// naming its destination also commits the charges for its rows in the same transaction
		// (ledger_tx.go).
		if err := d.renameCharged(ctx, stmts, by, charges); err != nil {
			return fmt.Errorf("renaming table %q: %w", oldName, err)
		}
	} else if err := d.p.execTx(ctx, stmts...); err != nil {
		return fmt.Errorf("renaming table %q: %w", oldName, err)
	}
	d.p.ledger.renamed(from, to)
	delete(d.tables, strings.ToLower(oldName))
	def.name = newName
	for _, col := range def.schema.Schema {
		col.Source = newName
	}
	d.tables[strings.ToLower(newName)] = def
	return nil
}

// renameCharged runs a rename's statements and writes charges in one transaction on the ledger's
// connection (chargedTx): both commit, or neither.
func (d *Database) renameCharged(ctx context.Context, stmts []string, by string, charges []Charge) error {
	tx, err := d.p.ledger.beginCharged()
	if err != nil {
		return err
	}
	for _, stmt := range stmts {
		if _, err := tx.conn.ExecContext(ctx, stmt); err != nil {
			_ = tx.rollback()
			return err
		}
	}
	return tx.commit(by, charges)
}

// loadLocked reads every table definition of this schema from DuckDB's catalog, once.
func (d *Database) loadLocked(ctx *sql.Context) error {
	if d.loaded {
		return nil
	}
	rows, err := d.p.db.QueryContext(ctx, `
		SELECT c.table_name, c.column_name, c.data_type, c.is_nullable, coalesce(c.comment, ''), coalesce(t.comment, '')
		FROM duckdb_columns() c JOIN duckdb_tables() t
		  ON t.database_name = c.database_name AND t.schema_name = c.schema_name AND t.table_name = c.table_name
		WHERE c.database_name = current_database() AND c.schema_name = ?
		ORDER BY c.table_name, c.column_index`, d.name)
	if err != nil {
		return fmt.Errorf("loading tables of database %q: %w", d.name, err)
	}
	defer rows.Close()
	cols := map[string]sql.Schema{}
	comments := map[string]string{}
	var order []string
	for rows.Next() {
		var tbl, col, duckType, tblComment, colComment string
		var nullable bool
		if err := rows.Scan(&tbl, &col, &duckType, &nullable, &colComment, &tblComment); err != nil {
			return err
		}
		c := &sql.Column{Name: col, Nullable: nullable, Source: tbl, DatabaseSource: d.name}
		if meta, ok := decodeColumnMeta(colComment); ok {
			t, err := parseColumnType(meta.Type)
			if err != nil {
				return fmt.Errorf("table %q column %q: recorded type %q: %w", tbl, col, meta.Type, err)
			}
			c.Type, c.AutoIncrement, c.Comment = t, meta.AutoIncrement, meta.Comment
			if meta.Default != "" {
				// GMS's planbuilder resolves the expression text when a statement uses it.
				c.Default = sql.NewUnresolvedColumnDefaultValue(meta.Default)
			}
		} else {
			t, err := typeForUnannotated(duckType)
			if err != nil {
				return fmt.Errorf("table %q column %q: %w", tbl, col, err)
			}
			c.Type = t
		}
		if _, seen := cols[tbl]; !seen {
			order = append(order, tbl)
		}
		cols[tbl] = append(cols[tbl], c)
		comments[tbl] = tblComment
	}
	if err := rows.Err(); err != nil {
		return err
	}
	pks, err := d.primaryKeys(ctx)
	if err != nil {
		return err
	}
	for _, tbl := range order {
		if d.readOnly && !strings.HasPrefix(tbl, CatalogTablePrefix) {
			continue // internal catalog tables (settings, views) stay hidden
		}
		schema := cols[tbl]
		var ordinals []int
		for _, pkCol := range pks[tbl] {
			for i, c := range schema {
				if strings.EqualFold(c.Name, pkCol) {
					c.PrimaryKey = true
					ordinals = append(ordinals, i)
				}
			}
		}
		d.tables[strings.ToLower(tbl)] = newTableDef(tbl, sql.NewPrimaryKeySchema(schema, ordinals...), comments[tbl])
	}
	d.loaded = true
	return nil
}

// primaryKeys returns each table's primary-key column names, in key order.
func (d *Database) primaryKeys(ctx context.Context) (map[string][]string, error) {
	rows, err := d.p.db.QueryContext(ctx, `
		SELECT table_name, constraint_column_names FROM duckdb_constraints()
		WHERE database_name = current_database() AND schema_name = ? AND constraint_type = 'PRIMARY KEY'`, d.name)
	if err != nil {
		return nil, fmt.Errorf("loading primary keys of database %q: %w", d.name, err)
	}
	defer rows.Close()
	pks := map[string][]string{}
	for rows.Next() {
		var tbl string
		var names []any
		if err := rows.Scan(&tbl, &names); err != nil {
			return nil, err
		}
		for _, n := range names {
			pks[tbl] = append(pks[tbl], fmt.Sprint(n))
		}
	}
	return pks, rows.Err()
}

// typeForUnannotated maps the DuckDB type of a table that ldpsql did not create (no column metadata).
func typeForUnannotated(duckType string) (sql.Type, error) {
	switch strings.ToUpper(duckType) {
	case "TINYINT":
		return types.Int8, nil
	case "SMALLINT":
		return types.Int16, nil
	case "INTEGER":
		return types.Int32, nil
	case "BIGINT":
		return types.Int64, nil
	case "UTINYINT":
		return types.Uint8, nil
	case "USMALLINT":
		return types.Uint16, nil
	case "UINTEGER":
		return types.Uint32, nil
	case "UBIGINT":
		return types.Uint64, nil
	case "FLOAT":
		return types.Float32, nil
	case "DOUBLE":
		return types.Float64, nil
	case "VARCHAR":
		return types.LongText, nil
	case "BLOB":
		return types.LongBlob, nil
	case "TIMESTAMP":
		return types.DatetimeMaxPrecision, nil
	case "DATE":
		return types.Date, nil
	}
	return nil, fmt.Errorf("DuckDB type %s has no MySQL equivalent in ldpsql", duckType)
}
