package engine

import (
	"context"
	gosql "database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"database/sql/driver"
	sqle "github.com/dolthub/go-mysql-server"
	gmsdriver "github.com/dolthub/go-mysql-server/driver"
	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/analyzer"
	"github.com/dolthub/go-mysql-server/sql/mysql_db"
)

// DefaultDatabase is the database created in a new file and selected by new sessions.
const DefaultDatabase = "ldpsql"

// StoreCatalog is the name under which the DuckDB file is attached (see Open); it is reserved.
const StoreCatalog = "ldpsql_store"

// DefaultPath is the DuckDB file used when none is given.
const DefaultPath = "ldpsql.duckdb"

// MemoryPath opens an ephemeral in-memory engine.
const MemoryPath = ":memory:"

// Engine is an open ldpsql database: GMS over one DuckDB file.
type Engine struct {
	// GMS is the go-mysql-server engine; use it directly for anything this type does not wrap.
	GMS *sqle.Engine
	// Provider serves the databases and the registered functions and procedures.
	Provider *Provider
	// Catalog holds the registered mechanisms and fitted models.
	Catalog *Catalog
	// Jobs runs background jobs and records them in ldp_jobs.
	Jobs *Jobs
	// Ledger records the privacy budgets of protected tables and every release charged to them.
	Ledger *Ledger
	// DuckDB is the underlying DuckDB handle. Writing to ldpsql's tables through it directly bypasses the
	// engine's caches (schemas, row counts): only bulk-load a table this way right after creating it.
	DuckDB *gosql.DB

	path      string
	closeOnce sync.Once
	closeErr  error

	dbOnce sync.Once
	sqlDB  *gosql.DB

	closers []func() error // run by Close, last registered first, before DuckDB closes

	stmts statements // running over the wire, for Drain (shutdown.go)

	// droppedUnfinished are the tables of CREATE TABLE … AS SELECT statements cut off by a crash before
	// their rows committed, dropped at Open (ctas.go).
	droppedUnfinished []TableRef

	files *fileGuard // what SQL may read and write on the server's file system (security.go)

	// Reopening the DuckDB file after DuckDB invalidated it (store.go): the connector whose instance is
	// replaced, the gate every wire statement holds for reading while it runs, and what was done.
	store      *storeConnector
	gate       sync.RWMutex
	recoverMu  sync.Mutex
	recoveries atomic.Int64
	log        func(string)
}

// OnClose registers f to run when the engine closes (e.g. stopping plugin processes).
func (e *Engine) OnClose(f func() error) { e.closers = append(e.closers, f) }

// Option configures Open.
type Option func(*Engine) error

// WithFunctions registers SQL functions on the engine (scalar or aggregate).
func WithFunctions(fns ...sql.Function) Option {
	return func(e *Engine) error {
		e.Provider.RegisterFunction(fns...)
		return nil
	}
}

// maxIdleDuckConns is how many DuckDB connections the pool keeps open between statements.
const maxIdleDuckConns = 64

// Open opens (creating if needed) the DuckDB file at path, or an in-memory engine for MemoryPath, and
// builds the SQL engine over it.
func Open(path string, opts ...Option) (*Engine, error) {
	if path == "" {
		path = DefaultPath
	}
	// DuckDB names a file's catalog after the file (ldpsql.duckdb → "ldpsql"), which would make
	// "ldpsql"."t" ambiguous with the schema of the default database. Every connection therefore
	// attaches the file under the fixed name StoreCatalog and uses it.
	attach := "ATTACH IF NOT EXISTS " + quoteString(path) + " AS " + StoreCatalog
	if path == MemoryPath {
		attach = "ATTACH IF NOT EXISTS ':memory:' AS " + StoreCatalog
	}
	store, err := newStoreConnector(attach, "USE "+StoreCatalog)
	if err != nil {
		return nil, fmt.Errorf("opening DuckDB file %q: %w", path, err)
	}
	duck := gosql.OpenDB(store)
	// Every statement takes connections from the pool (a table scan, an INSERT's transaction); with
	// database/sql's default of 2 idle ones, concurrent clients made a new DuckDB connection (and its
	// ATTACH) for nearly every statement.
	duck.SetMaxIdleConns(maxIdleDuckConns)
	if err := duck.Ping(); err != nil {
		_ = duck.Close()
		return nil, fmt.Errorf("opening DuckDB file %q: %w", path, err)
	}
	e := &Engine{DuckDB: duck, store: store, path: path, files: newFileGuard(path)}
	if err := e.init(opts); err != nil {
		_ = duck.Close()
		return nil, err
	}
	return e, nil
}

func (e *Engine) init(opts []Option) error {
	if _, err := e.DuckDB.Exec(`CREATE SCHEMA IF NOT EXISTS ` + CatalogSchema + `;
		CREATE TABLE IF NOT EXISTS ` + CatalogSchema + `.settings (key VARCHAR PRIMARY KEY, value BLOB);
		` + createViewsTable + `;` + createCatalogTables + createJobsTable); err != nil {
		return fmt.Errorf("creating ldpsql catalog in %q: %w", e.path, err)
	}
	var err error
	if e.droppedUnfinished, err = dropUnfinishedCreates(e.DuckDB); err != nil {
		return fmt.Errorf("recovering from an interrupted CREATE TABLE … AS SELECT: %w", err)
	}
	p, err := newProvider(e.DuckDB)
	if err != nil {
		return err
	}
	e.Provider = p
	e.Catalog = &Catalog{db: e.DuckDB, files: e.files}
	if mechs, err := e.Catalog.Mechanisms(context.Background()); err == nil {
		for _, m := range mechs {
			e.Catalog.protect(m.Path)
		}
	}
	if e.Jobs, err = newJobs(e.DuckDB); err != nil {
		return fmt.Errorf("recovering jobs: %w", err)
	}
	if e.Ledger, err = newLedger(e.DuckDB); err != nil {
		return fmt.Errorf("opening the privacy ledger: %w", err)
	}
	p.ledger = e.Ledger
	e.OnClose(e.Ledger.close)
	e.OnClose(p.rollbackAll) // before the ledger closes and DuckDB, which a pinned connection holds open
	e.OnClose(p.inserts.close)
	if err := e.ensureDefaultDatabase(); err != nil {
		return err
	}
	e.GMS = sqle.New(analyzer.NewBuilder(p).
		AddPreAnalyzeRule(ruleServerBoundary, e.serverBoundary).
		AddOverrides(statementLimits(p)).Build(), nil) // statementLimits: see limits.go
	e.GMS.Analyzer.Catalog.StatsProvider = analyzeEmptySafe{e.GMS.Analyzer.Catalog.StatsProvider} // stats.go
	// groupby.go: GMS's own GROUP BY iterator can hang on an error.
	e.installGroupingBuilder()
	if err := e.loadUsers(); err != nil {
		return err
	}
	for _, opt := range opts {
		if err := opt(e); err != nil {
			return err
		}
	}
	e.installServerBoundary()
	e.registerUnpackAtOpen() // for ldp_export (export.go)
	// GMS's default says "Dolt"; clients such as mysqladmin show it.
	if err := sql.SystemVariables.AssignValues(map[string]any{"version_comment": "ldpsql"}); err != nil {
		return err
	}
	return nil
}

// ensureDefaultDatabase creates DefaultDatabase the first time a file is opened.
func (e *Engine) ensureDefaultDatabase() error {
	var initialised int
	if err := e.DuckDB.QueryRow(`SELECT count(*) FROM ` + CatalogSchema + `.settings WHERE key = 'initialised'`).Scan(&initialised); err != nil {
		return err
	}
	if initialised > 0 {
		return nil
	}
	ctx := sql.NewEmptyContext()
	if !e.Provider.HasDatabase(ctx, DefaultDatabase) {
		if err := e.Provider.CreateDatabase(ctx, DefaultDatabase); err != nil {
			return err
		}
	}
	_, err := e.DuckDB.Exec(`INSERT INTO ` + CatalogSchema + `.settings VALUES ('initialised', NULL)`)
	return err
}

// Path is the DuckDB file this engine stores its data in (MemoryPath when ephemeral).
func (e *Engine) Path() string { return e.path }

// NewContext returns a query context for an in-process session acting as the local root user.
func (e *Engine) NewContext(ctx context.Context) *sql.Context {
	session := e.Provider.newSession(sql.NewBaseSessionWithClientServer("embedded", sql.Client{User: "root", Address: "localhost"}, 0))
	sctx := sql.NewContext(ctx, sql.WithSession(session))
	sctx.SetCurrentDatabase(DefaultDatabase)
	return sctx
}

// Query runs one statement and returns its schema and all its rows.
func (e *Engine) Query(ctx *sql.Context, query string) (sql.Schema, []sql.Row, error) {
	schema, iter, _, err := e.GMS.Query(ctx, query)
	if err != nil {
		return nil, nil, err
	}
	rows, err := sql.RowIterToRows(ctx, iter)
	if err != nil {
		return nil, nil, err
	}
	return schema, rows, nil
}

// DB returns a database/sql handle that runs statements in process through GMS (no network).
func (e *Engine) DB() *gosql.DB {
	e.dbOnce.Do(func() {
		drv := gmsdriver.New(embeddedResolver{e}, nil)
		connector, err := drv.OpenConnector("ldpsql-" + e.path)
		if err != nil {
			panic(fmt.Sprintf("ldpsql: opening in-process connector: %v", err)) // only malformed DSNs fail
		}
		e.sqlDB = gosql.OpenDB(embeddedConnector{connector})
	})
	return e.sqlDB
}

// embeddedConnector gives GMS's database/sql connections real transactions: GMS's driver begins a
// fake one (its Commit and Rollback do nothing, so a Rollback kept the writes) and its Close does
// nothing (so a connection closed in a transaction kept it open).
type embeddedConnector struct{ driver.Connector }

func (c embeddedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return embeddedConn{conn.(*gmsdriver.Conn)}, nil
}

// embeddedConn is a GMS driver connection whose BeginTx is START TRANSACTION.
type embeddedConn struct{ *gmsdriver.Conn }

var _ driver.ConnBeginTx = embeddedConn{}

// Begin implements driver.Conn.
func (c embeddedConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// BeginTx implements driver.ConnBeginTx.
func (c embeddedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	begin := "START TRANSACTION"
	if opts.ReadOnly {
		begin += " READ ONLY"
	}
	if _, err := c.ExecContext(ctx, begin, nil); err != nil {
		return nil, err
	}
	return embeddedTx{c}, nil
}

// Close implements driver.Conn: a transaction left open is rolled back.
func (c embeddedConn) Close() error {
	if s, ok := c.Session().(*Session); ok {
		return s.rollback(sql.NewEmptyContext())
	}
	return nil
}

type embeddedTx struct{ c embeddedConn }

func (t embeddedTx) Commit() error {
	_, err := t.c.ExecContext(context.Background(), "COMMIT", nil)
	return err
}

func (t embeddedTx) Rollback() error {
	_, err := t.c.ExecContext(context.Background(), "ROLLBACK", nil)
	return err
}

// embeddedResolver hands the engine's provider to GMS's database/sql driver.
type embeddedResolver struct{ e *Engine }

func (r embeddedResolver) Resolve(string, *gmsdriver.Options) (string, sql.DatabaseProvider, error) {
	return "ldpsql-" + r.e.path, r.e.Provider, nil
}

func (r embeddedResolver) NewSession(context.Context, uint32, *gmsdriver.Connector) (sql.Session, error) {
	s := r.e.Provider.newSession(sql.NewBaseSessionWithClientServer("embedded", sql.Client{User: "root", Address: "localhost"}, 0))
	s.SetCurrentDatabase(DefaultDatabase)
	return s, nil
}

// Close checkpoints and closes the DuckDB file. It is safe to call more than once.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		var errs []error
		e.Jobs.close() // jobs use the plugin host and DuckDB: stop them first
		for i := len(e.closers) - 1; i >= 0; i-- {
			errs = append(errs, e.closers[i]())
		}
		if e.sqlDB != nil {
			errs = append(errs, e.sqlDB.Close())
		}
		errs = append(errs, e.GMS.Close())
		if e.path != MemoryPath {
			errs = append(errs, e.checkpoint())
		}
		errs = append(errs, e.DuckDB.Close())
		e.closeErr = errors.Join(errs...)
	})
	return e.closeErr
}

// checkpoint checkpoints the DuckDB file, on a connection of its own that is in no transaction.
func (e *Engine) checkpoint() error {
	ctx := context.Background()
	conn, err := e.DuckDB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("checkpointing %q: %w", e.path, err)
	}
	defer conn.Close()
	_, _ = conn.ExecContext(ctx, "ROLLBACK") // whatever a statement may have left open on it
	if _, err := conn.ExecContext(ctx, "CHECKPOINT "+StoreCatalog); err != nil {
		// A transaction still open elsewhere (a statement that outlived Drain) has not committed and
		// never will: FORCE CHECKPOINT rolls it back, as a crash would, and checkpoints.
		if _, ferr := conn.ExecContext(ctx, "FORCE CHECKPOINT "+StoreCatalog); ferr != nil {
			return fmt.Errorf("checkpointing %q: %w (FORCE CHECKPOINT: %v)", e.path, err, ferr)
		}
		return fmt.Errorf("checkpointing %q: %w; FORCE CHECKPOINT rolled back the transactions still open, and checkpointed", e.path, err)
	}
	return nil
}

// loadUsers restores the persisted users and grants (CREATE USER, GRANT) and adds the root account for
// this process. Root is ephemeral: its password comes from the server's configuration at every start.
func (e *Engine) loadUsers() error {
	mdb := e.GMS.Analyzer.Catalog.MySQLDb
	var data []byte
	err := e.DuckDB.QueryRow(`SELECT value FROM ` + CatalogSchema + `.settings WHERE key = 'mysql_db'`).Scan(&data)
	if err != nil && !errors.Is(err, gosql.ErrNoRows) {
		return fmt.Errorf("loading users: %w", err)
	}
	ctx := e.NewContext(context.Background())
	if len(data) > 0 {
		if err := mdb.LoadData(ctx, data); err != nil {
			return fmt.Errorf("loading users: %w", err)
		}
	}
	mdb.SetPersister(userPersister{e})
	return e.SetRootPassword("")
}

// SetRootPassword sets the password of this process's root account ('root'@'%').
func (e *Engine) SetRootPassword(password string) error {
	mdb := e.GMS.Analyzer.Catalog.MySQLDb
	ed := mdb.Editor()
	defer ed.Close()
	ed.RemoveUser(mysql_db.UserPrimaryKey{Host: "%", User: "root"})
	mdb.AddEphemeralSuperUser(ed, "root", "%", password)
	return nil
}

// userPersister stores GMS's users and grants in the catalog, so they survive a restart.
type userPersister struct{ e *Engine }

func (p userPersister) Persist(ctx *sql.Context, data []byte) error {
	_, err := p.e.DuckDB.ExecContext(ctx, `INSERT OR REPLACE INTO `+CatalogSchema+`.settings VALUES ('mysql_db', ?)`, data)
	return err
}

var _ io.Closer = (*Engine)(nil)

// InsertRows inserts rows into table (in the session's current database unless qualified as db.table)
// as one statement: through the table editor and DuckDB's appender, all or nothing. next returns the
// rows batch by batch and nil at the end. It is the bulk path for loaders; SQL INSERT is for clients.
func (e *Engine) InsertRows(ctx *sql.Context, table string, next func() ([]sql.Row, error)) (int64, error) {
	dbName, name := ctx.GetCurrentDatabase(), table
	if i := strings.Index(table, "."); i >= 0 {
		dbName, name = table[:i], table[i+1:]
	}
	db, err := e.Provider.Database(ctx, dbName)
	if err != nil {
		return 0, err
	}
	t, ok, err := db.GetTableInsensitive(ctx, name)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, sql.ErrTableNotFound.New(table)
	}
	ins := t.(sql.InsertableTable).Inserter(ctx)
	ins.StatementBegin(ctx)
	var n int64
	for {
		rows, err := next()
		if err == nil && rows == nil {
			break
		}
		for _, r := range rows {
			if err != nil {
				break
			}
			err = ins.Insert(ctx, r)
			n++
		}
		if err != nil {
			_ = ins.DiscardChanges(ctx, err)
			_ = ins.Close(ctx)
			return 0, fmt.Errorf("inserting into %s: %w", table, err)
		}
	}
	if err := ins.StatementComplete(ctx); err != nil {
		_ = ins.Close(ctx)
		return 0, fmt.Errorf("inserting into %s: %w", table, err)
	}
	return n, ins.Close(ctx)
}
