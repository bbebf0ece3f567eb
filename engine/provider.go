package engine

import (
	"context"
	gosql "database/sql"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/mysql_db"
)

// reservedSchemas are DuckDB schemas that never appear as MySQL databases.
// DuckDB's own catalogs (memory, system, temp) and StoreCatalog are reserved too: a schema of the same
// name would make qualified names ambiguous.
var reservedSchemas = map[string]bool{
	"main": true, "information_schema": true, "pg_catalog": true, "mysql": true, CatalogSchema: true,
	StoreCatalog: true, "memory": true, "system": true, "temp": true,
}

// CatalogSchema is the DuckDB schema that holds ldpsql's own catalog tables (mechanisms, jobs, ledger).
// It is not visible as a MySQL database.
const CatalogSchema = "ldpsql_catalog"

// Provider is the GMS database provider over one DuckDB file. It also serves the extra SQL functions the
// caller registered (sql.FunctionProvider), so they work in embedded, database/sql and server use alike.
type Provider struct {
	db *gosql.DB

	mu        sync.RWMutex
	databases map[string]*Database // by lower-case name

	functions  map[string]sql.Function // by lower-case name
	procedures sql.ExternalStoredProcedureRegistry

	ledger *Ledger

	inserts *insertQueue // group commit of small autocommit INSERTs (insert_queue.go)

	// Set by installServerBoundary: whether a session's user is a DBA (jobsTable), and the grant tables
	// (jobsForEveryone). nil before: nobody is a DBA, and ldp_jobs needs a grant.
	isDBA  func(*sql.Context) bool
	grants func() *mysql_db.MySQLDb
	// infile checks and resolves a server-side LOAD DATA INFILE path against secure_file_priv.
	infile func(name string) (string, error)

	open     sync.Map // *Session → struct{}: those with a pinned DuckDB transaction (transactions.go)
	sessions sync.Map // connection id → *Session, for the server's connections (rolled back on disconnect)
}

var _ sql.MutableDatabaseProvider = (*Provider)(nil)
var _ sql.FunctionProvider = (*Provider)(nil)
var _ sql.ExternalStoredProcedureProvider = (*Provider)(nil)

// newProvider loads every database (DuckDB schema) in db.
func newProvider(db *gosql.DB) (*Provider, error) {
	p := &Provider{
		db:         db,
		databases:  map[string]*Database{},
		functions:  map[string]sql.Function{},
		procedures: sql.NewExternalStoredProcedureRegistry(),
		inserts:    &insertQueue{db: db},
	}
	rows, err := db.Query(`SELECT schema_name FROM duckdb_schemas() WHERE database_name = current_database() AND NOT internal`)
	if err != nil {
		return nil, fmt.Errorf("listing DuckDB schemas: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		if reservedSchemas[strings.ToLower(name)] {
			continue
		}
		p.databases[strings.ToLower(name)] = newDatabase(p, name)
	}
	catalog := newDatabase(p, CatalogSchema)
	catalog.readOnly = true
	p.databases[CatalogSchema] = catalog
	return p, rows.Err()
}

// Database implements sql.DatabaseProvider.
func (p *Provider) Database(_ *sql.Context, name string) (sql.Database, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if db, ok := p.databases[strings.ToLower(name)]; ok {
		return db, nil
	}
	return nil, sql.ErrDatabaseNotFound.New(name)
}

// HasDatabase implements sql.DatabaseProvider.
func (p *Provider) HasDatabase(_ *sql.Context, name string) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	_, ok := p.databases[strings.ToLower(name)]
	return ok
}

// AllDatabases implements sql.DatabaseProvider.
func (p *Provider) AllDatabases(*sql.Context) []sql.Database {
	p.mu.RLock()
	defer p.mu.RUnlock()
	all := make([]sql.Database, 0, len(p.databases))
	for _, db := range p.databases {
		all = append(all, db)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name() < all[j].Name() })
	return all
}

// CreateDatabase implements sql.MutableDatabaseProvider: a database is a DuckDB schema.
func (p *Provider) CreateDatabase(_ *sql.Context, name string) error {
	if reservedSchemas[strings.ToLower(name)] {
		return fmt.Errorf("database name %q is reserved by ldpsql", name)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.databases[strings.ToLower(name)]; ok {
		return sql.ErrDatabaseExists.New(name)
	}
	if _, err := p.db.Exec("CREATE SCHEMA " + quoteIdent(name)); err != nil {
		return fmt.Errorf("creating database %q: %w", name, err)
	}
	p.databases[strings.ToLower(name)] = newDatabase(p, name)
	return nil
}

// DropDatabase implements sql.MutableDatabaseProvider, dropping the schema and every table in it.
func (p *Provider) DropDatabase(_ *sql.Context, name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	db, ok := p.databases[strings.ToLower(name)]
	if !ok {
		return sql.ErrDatabaseNotFound.New(name)
	}
	if db.readOnly {
		return db.errReadOnly()
	}
	if _, err := p.db.Exec("DROP SCHEMA " + quoteIdent(db.name) + " CASCADE"); err != nil {
		return fmt.Errorf("dropping database %q: %w", name, err)
	}
	delete(p.databases, strings.ToLower(name))
	return nil
}

// RegisterFunction adds SQL functions (scalar or aggregate) served to every query. A later registration
// of the same name replaces the earlier one.
func (p *Provider) RegisterFunction(fns ...sql.Function) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, fn := range fns {
		p.functions[strings.ToLower(fn.FunctionName())] = fn
	}
}

// Function implements sql.FunctionProvider.
func (p *Provider) Function(_ *sql.Context, name string) (sql.Function, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	fn, ok := p.functions[strings.ToLower(name)]
	return fn, ok
}

// RegisterProcedure adds a stored procedure implemented in Go (called with CALL name(...)).
func (p *Provider) RegisterProcedure(procs ...sql.ExternalStoredProcedureDetails) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, proc := range procs {
		p.procedures.Register(proc)
	}
}

// ExternalStoredProcedure implements sql.ExternalStoredProcedureProvider.
func (p *Provider) ExternalStoredProcedure(_ *sql.Context, name string, numOfParams int) (*sql.ExternalStoredProcedureDetails, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.procedures.LookupByNameAndParamCount(name, numOfParams)
}

// ExternalStoredProcedures implements sql.ExternalStoredProcedureProvider.
func (p *Provider) ExternalStoredProcedures(_ *sql.Context, name string) ([]sql.ExternalStoredProcedureDetails, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.procedures.LookupByName(name)
}

// execTx runs statements in one DuckDB transaction: all of them take effect, or none.
func (p *Provider) execTx(ctx context.Context, stmts ...string) error {
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	for _, stmt := range stmts {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			_ = tx.Rollback()
			return err
		}
	}
	return tx.Commit()
}

// quoteIdent quotes a DuckDB identifier.
func quoteIdent(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// quoteString quotes a DuckDB string literal.
func quoteString(s string) string {
	return `'` + strings.ReplaceAll(s, `'`, `''`) + `'`
}
