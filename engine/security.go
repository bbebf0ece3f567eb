package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/analyzer"
	"github.com/dolthub/go-mysql-server/sql/expression"
	"github.com/dolthub/go-mysql-server/sql/information_schema"
	"github.com/dolthub/go-mysql-server/sql/mysql_db"
	"github.com/dolthub/go-mysql-server/sql/plan"
	"github.com/dolthub/go-mysql-server/sql/transform"
	"github.com/dolthub/go-mysql-server/sql/types"
	"github.com/dolthub/vitess/go/mysql"
	ast "github.com/dolthub/vitess/go/vt/sqlparser"
)

// The server's boundary around the file system and server-wide state.
//
// MySQL's rules, made stricter where ldpsql's promise needs it:
//
//   - LOAD_FILE, SELECT … INTO OUTFILE / DUMPFILE and server-side LOAD DATA INFILE need the global FILE
//     privilege (error 1227 without it, checked before any path is looked at, so a refusal says nothing
//     about the file system), and touch only files under the secure_file_priv directory
//     (WithSecureFilePriv; by default ldpsql-files beside the database file; NoSecureFilePriv disables
//     them for everyone). A relative path is taken relative to that directory. Symbolic links are
//     resolved before the check, only regular files are read, and a file is never overwritten.
//   - Whatever secure_file_priv says, ldpsql's own files are never read or written through SQL: the
//     DuckDB file (it holds every raw value of every protected table), its WAL and temporary directory,
//     the plugin directory (WithProtectedPath / ProtectPath), the running executable and /proc (the
//     server's environment holds the root password).
//   - SET GLOBAL and SET PERSIST need SUPER or SYSTEM_VARIABLES_ADMIN (error 1227): they change the
//     server for everyone.
//   - SHOW GRANTS for one's own account works for every user (GMS asks for SELECT on mysql); for
//     another account it still needs SELECT on mysql.
//   - ldpsql_catalog.ldp_jobs shows a user who is not a DBA only the jobs they started, and every user
//     may read it without a grant (jobs.go); the rest of the catalog keeps its grants.
//
// LOAD DATA LOCAL INFILE reads the client's file, not the server's, into a table the user may insert
// into: it is on by default (the global local_infile is 1, as MySQL 8 clients expect to ask for it), and
// only a DBA can turn it off.

// NoSecureFilePriv, given to WithSecureFilePriv (or serve --secure-file-priv), disables LOAD_FILE,
// SELECT … INTO OUTFILE/DUMPFILE and LOAD DATA INFILE for everyone, as MySQL's secure_file_priv = NULL.
const NoSecureFilePriv = "NULL"

// DefaultSecureFileDir is the name of the default secure_file_priv directory, beside the database file.
const DefaultSecureFileDir = "ldpsql-files"

// WithSecureFilePriv sets the only directory whose files LOAD_FILE, SELECT … INTO OUTFILE/DUMPFILE and
// LOAD DATA INFILE may touch (NoSecureFilePriv: none). The default is DefaultSecureFileDir beside the
// database file, or none for an in-memory engine. The directory is not created.
func WithSecureFilePriv(dir string) Option {
	return func(e *Engine) error {
		if dir == "" {
			return errors.New("secure_file_priv: give a directory, or NULL to disable file access through SQL (an empty value, which MySQL reads as 'anywhere', is not accepted)")
		}
		if strings.EqualFold(dir, NoSecureFilePriv) {
			e.files.setDir("")
			return nil
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return fmt.Errorf("secure_file_priv %q: %w", dir, err)
		}
		e.files.setDir(abs)
		return nil
	}
}

// WithProtectedPath adds files, or directories with the files directly in them, that SQL never reads or
// writes, whatever secure_file_priv says.
func WithProtectedPath(paths ...string) Option {
	return func(e *Engine) error { return e.ProtectPath(paths...) }
}

// ProtectPath adds files, or directories with the files directly in them, that SQL never reads or
// writes, whatever secure_file_priv says: e.g. the plugin directory and every registered plugin binary.
func (e *Engine) ProtectPath(paths ...string) error {
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return fmt.Errorf("protecting %q: %w", p, err)
		}
		e.files.protect(abs)
	}
	return nil
}

// SecureFilePriv is the directory that file access through SQL is confined to, or NoSecureFilePriv.
func (e *Engine) SecureFilePriv() string {
	if d := e.files.directory(); d != "" {
		return d
	}
	return NoSecureFilePriv
}

// CreateSecureFileDir creates the secure_file_priv directory (mode 0700) if it is missing, as the
// server does at start, and returns it (NoSecureFilePriv when file access is off).
func (e *Engine) CreateSecureFileDir() (string, error) {
	d := e.files.directory()
	if d == "" {
		return NoSecureFilePriv, nil
	}
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", fmt.Errorf("creating the secure_file_priv directory: %w", err)
	}
	e.publishSecureFilePriv()
	return d, nil
}

// fileGuard confines the SQL statements and functions that touch the server's file system.
type fileGuard struct {
	mu        sync.RWMutex
	dir       string          // absolute secure_file_priv directory; "" when file access is disabled
	protected []protectedPath // never touched through SQL
}

// protectedPath is a file, or a directory with the files directly in it (subtree: with everything
// under it), that SQL never reads or writes.
type protectedPath struct {
	path    string // absolute
	subtree bool
}

// covers reports whether target (absolute, resolved) is p or, for a directory, in it.
func (p protectedPath) covers(target string) bool {
	rp := resolve(p.path)
	if p.subtree {
		return within(rp, target)
	}
	return target == rp || filepath.Dir(target) == rp
}

// newFileGuard returns the guard of an engine over the DuckDB file at path.
func newFileGuard(path string) *fileGuard {
	g := &fileGuard{}
	if exe, err := os.Executable(); err == nil {
		g.protect(exe)
	}
	if runtime.GOOS == "linux" {
		g.protected = append(g.protected, protectedPath{path: "/proc", subtree: true})
	}
	if path != MemoryPath {
		if abs, err := filepath.Abs(path); err == nil {
			g.protect(abs, abs+".wal", abs+".tmp")
			g.dir = filepath.Join(filepath.Dir(abs), DefaultSecureFileDir)
		}
	}
	return g
}

func (g *fileGuard) setDir(dir string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dir = dir
}

func (g *fileGuard) directory() string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.dir
}

func (g *fileGuard) protect(paths ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range paths {
		g.protected = append(g.protected, protectedPath{path: p})
	}
}

// errFileAccess is MySQL's ER_OPTION_PREVENTS_STATEMENT with the reason, in MySQL's SQLSTATE (HY000).
func errFileAccess(format string, args ...any) error {
	return mysql.NewSQLError(mysql.EROptionPreventsStatement, mysql.SSUnknownSQLState,
		"The MySQL server is running with the --secure-file-priv option so it cannot execute this statement: "+format, args...)
}

// errNeedPrivilege is MySQL's ER_SPECIFIC_ACCESS_DENIED_ERROR (1227).
func errNeedPrivilege(privileges string) error {
	return mysql.NewSQLError(1227, mysql.SSClientError,
		"Access denied; you need (at least one of) the %s privilege(s) for this operation", privileges)
}

// resolve returns p with every symbolic link resolved, or p itself while it does not exist.
func resolve(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// within reports whether path is dir or lies under it (both absolute and resolved).
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// check confines name, a path given in SQL, for reading (write false) or for creating a new file. It
// returns the resolved path to use instead of name. A file to read that does not exist is an error
// wrapping fs.ErrNotExist.
func (g *fileGuard) check(name string, write bool) (string, error) {
	g.mu.RLock()
	dir, protected := g.dir, append([]protectedPath(nil), g.protected...)
	g.mu.RUnlock()
	if dir == "" {
		return "", errFileAccess("secure_file_priv is NULL, so no file is read or written through SQL")
	}
	if name == "" {
		return "", errFileAccess("the file name is empty")
	}
	secure, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", errFileAccess("the secure_file_priv directory %s does not exist: create it, or start ldpsql serve with --secure-file-priv DIR", dir)
	}
	p := name
	if !filepath.IsAbs(p) {
		p = filepath.Join(secure, p)
	}
	p = filepath.Clean(p)
	var target string
	if write {
		parent, err := filepath.EvalSymlinks(filepath.Dir(p))
		if err != nil {
			return "", errFileAccess("the directory of %s does not exist", name)
		}
		target = filepath.Join(parent, filepath.Base(p))
	} else {
		if target, err = filepath.EvalSymlinks(p); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				if within(secure, resolve(filepath.Dir(p))) {
					return "", fmt.Errorf("%s: %w", name, fs.ErrNotExist)
				}
			} else {
				return "", fmt.Errorf("%s: %w", name, err)
			}
			target = p
		}
	}
	if !within(secure, target) {
		return "", errFileAccess("%s is outside the secure_file_priv directory %s", name, secure)
	}
	info, statErr := os.Stat(target)
	for _, pp := range protected {
		if pp.covers(target) {
			return "", errFileAccess("%s is one of ldpsql's own files (its database, WAL, plugins or executable), never read or written through SQL", name)
		}
		if pi, err := os.Stat(resolve(pp.path)); err == nil && statErr == nil && os.SameFile(pi, info) {
			return "", errFileAccess("%s is one of ldpsql's own files (its database, WAL, plugins or executable), never read or written through SQL", name)
		}
	}
	if write {
		if _, err := os.Lstat(target); err == nil {
			return "", sql.ErrFileExists.New(name)
		}
	} else {
		if statErr != nil {
			return "", fmt.Errorf("%s: %w", name, statErr)
		}
		if !info.Mode().IsRegular() {
			return "", errFileAccess("%s is not a regular file", name)
		}
	}
	return target, nil
}

// HasGlobalPrivilege reports whether the session's user holds priv globally, or SUPER, or one of the
// dynamic privileges (everyone does while user accounts are disabled).
func HasGlobalPrivilege(ctx *sql.Context, mdb *mysql_db.MySQLDb, priv sql.PrivilegeType, dynamic ...string) bool {
	if mdb == nil || !mdb.Enabled() {
		return true
	}
	ps := mdb.UserActivePrivilegeSet(ctx)
	if ps.Has(sql.PrivilegeType_Super) || ps.Has(priv) {
		return true
	}
	for _, d := range dynamic {
		if ps.HasDynamic(d) {
			return true
		}
	}
	return false
}

// ruleServerBoundary is the analyzer rule id of serverBoundary, far from GMS's own ids.
const ruleServerBoundary analyzer.RuleId = 100_001

// serverBoundary enforces, before anything else runs, the privileges and confinement described at the
// top of this file for the statement's file access, SET GLOBAL and SHOW GRANTS. It rewrites the paths of
// INTO OUTFILE/DUMPFILE and LOAD DATA INFILE to their resolved, checked form.
func (e *Engine) serverBoundary(ctx *sql.Context, a *analyzer.Analyzer, n sql.Node, _ *plan.Scope, _ analyzer.RuleSelector, _ *sql.QueryFlags) (sql.Node, transform.TreeIdentity, error) {
	mdb := a.Catalog.MySQLDb
	hasFile := func() bool { return HasGlobalPrivilege(ctx, mdb, sql.PrivilegeType_File) }
	var err error
	fail := func(e error) bool {
		if err == nil {
			err = e
		}
		return false
	}
	inspectAll(ctx, n, func(n sql.Node) bool {
		switch x := n.(type) {
		case *plan.Into:
			if (x.Outfile != "" || x.Dumpfile != "") && !hasFile() {
				return fail(errNeedPrivilege("FILE"))
			}
		case *plan.LoadData:
			if !x.Local && !hasFile() {
				return fail(errNeedPrivilege("FILE"))
			}
		case *plan.Set:
			for _, ex := range x.Exprs {
				if setsGlobal(ex) && !HasGlobalPrivilege(ctx, mdb, sql.PrivilegeType_Super, "SYSTEM_VARIABLES_ADMIN") {
					return fail(errNeedPrivilege("SUPER or SYSTEM_VARIABLES_ADMIN"))
				}
			}
		case *plan.Kill:
			if err := mayKill(ctx, mdb, x.ConnID); err != nil {
				return fail(err)
			}
		case *plan.ShowGrants:
			if !showsOwnGrants(ctx, x) && mdb != nil && mdb.Enabled() &&
				!mdb.UserHasPrivileges(ctx, sql.NewPrivilegedOperation(sql.PrivilegeCheckSubject{Database: "mysql"}, sql.PrivilegeType_Select)) {
				c := ctx.Session.Client()
				return fail(mysql.NewSQLError(mysql.ERDBAccessDenied, mysql.SSClientError,
					"Access denied for user '%s'@'%s' to database 'mysql'", c.User, c.Address))
			}
		}
		return true
	}, func(ex sql.Expression) bool {
		if _, ok := ex.(*loadFile); ok && !hasFile() {
			return fail(errNeedPrivilege("FILE"))
		}
		return true
	})
	if err != nil {
		return nil, transform.SameTree, err
	}
	return transform.Node(ctx, n, func(ctx *sql.Context, n sql.Node) (sql.Node, transform.TreeIdentity, error) {
		switch x := n.(type) {
		case *plan.Into:
			if x.Outfile == "" && x.Dumpfile == "" {
				return n, transform.SameTree, nil
			}
			nx := *x
			var err error
			if nx.Outfile != "" {
				nx.Outfile, err = e.files.check(x.Outfile, true)
			} else {
				nx.Dumpfile, err = e.files.check(x.Dumpfile, true)
			}
			if err != nil {
				return nil, transform.SameTree, err
			}
			return &nx, transform.NewTree, nil
		case *plan.LoadData:
			if x.Local {
				return n, transform.SameTree, nil
			}
			path, err := e.files.check(x.File, false)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil, transform.SameTree, sql.ErrLoadDataCannotOpen.New(err.Error())
				}
				return nil, transform.SameTree, err
			}
			nx := *x
			nx.File = path
			return &nx, transform.NewTree, nil
		}
		return n, transform.SameTree, nil
	})
}

// inspectAll calls node on every node of n and expr on every expression, also inside subqueries,
// opaque nodes and the source of INSERT; either stops the walk by returning false.
func inspectAll(ctx *sql.Context, n sql.Node, node func(sql.Node) bool, expr func(sql.Expression) bool) bool {
	ok := true
	transform.InspectWithOpaque(ctx, n, func(ctx *sql.Context, n sql.Node) bool {
		if !ok {
			return false
		}
		if ok = node(n); !ok {
			return false
		}
		if ex, isEx := n.(sql.Expressioner); isEx {
			for _, e := range ex.Expressions() {
				transform.InspectExpr(ctx, e, func(ctx *sql.Context, e sql.Expression) bool {
					if ok {
						ok = expr(e)
					}
					if sq, isSq := e.(*plan.Subquery); isSq && ok && sq.Query != nil {
						ok = inspectAll(ctx, sq.Query, node, expr)
					}
					return !ok
				})
			}
		}
		if ins, isIns := n.(*plan.InsertInto); isIns && ok && ins.Source != nil {
			ok = inspectAll(ctx, ins.Source, node, expr)
		}
		return ok
	})
	return ok
}

// setsGlobal reports whether ex assigns a system variable's global or persisted value.
func setsGlobal(ex sql.Expression) bool {
	sf, ok := ex.(*expression.SetField)
	if !ok {
		return false
	}
	sv, ok := sf.LeftChild.(*expression.SystemVar)
	if !ok {
		return false
	}
	scope, ok := sv.Scope.(*sql.MysqlScope)
	if !ok {
		return true // another dialect's scope: treat as server-wide
	}
	return scope.Type != sql.SystemVariableScope_Session && scope.Type != sql.SystemVariableScope_Both
}

// showsOwnGrants reports whether SHOW GRANTS n names the session's own account.
func showsOwnGrants(ctx *sql.Context, n *plan.ShowGrants) bool {
	if n.CurrentUser || n.For == nil {
		return true
	}
	c := ctx.Session.Client()
	return strings.EqualFold(n.For.Name, c.User) && (n.For.Host == c.Address || n.For.AnyHost && c.Address == "%")
}

// mayKill is MySQL's rule for KILL [QUERY|CONNECTION] id: one's own connections (by user name, whichever
// host) need no privilege, as the mysql client's Ctrl-C sends KILL QUERY from a second connection of the
// same user; another user's need SUPER or CONNECTION_ADMIN (error 1095). An id that is no connection is
// error 1094, whoever asks.
func mayKill(ctx *sql.Context, mdb *mysql_db.MySQLDb, id uint32) error {
	if HasGlobalPrivilege(ctx, mdb, sql.PrivilegeType_Super, "CONNECTION_ADMIN") {
		return nil
	}
	for _, p := range ctx.ProcessList.Processes() {
		if p.Connection == id {
			if p.User == ctx.Session.Client().User {
				return nil
			}
			return mysql.NewSQLError(mysql.ERKillDenied, mysql.SSUnknownSQLState, "You are not owner of thread %d", id)
		}
	}
	return mysql.NewSQLError(mysql.ERNoSuchThread, mysql.SSUnknownSQLState, "Unknown thread id: %d", id)
}

// authHandler lets SHOW GRANTS and KILL through GMS's parse-time check, which asks every user for SELECT
// on the database mysql and for SUPER; serverBoundary checks them instead, asking that only for another
// account's grants and another user's connection. Only SHOW GRANTS and KILL carry those exact
// authorisations (vitess's grammar).
type authHandler struct{ sql.AuthorizationHandler }

func (h authHandler) HandleAuth(ctx *sql.Context, aqs sql.AuthorizationQueryState, auth ast.AuthInformation) error {
	if auth.AuthType == ast.AuthType_SELECT && auth.TargetType == ast.AuthTargetType_DatabaseIdentifiers &&
		len(auth.TargetNames) == 1 && auth.TargetNames[0] == "mysql" {
		return nil
	}
	if auth.AuthType == ast.AuthType_SUPER && auth.TargetType == ast.AuthTargetType_Global {
		return nil // KILL, the only statement with this authorisation: serverBoundary checks it (mayKill)
	}
	return h.AuthorizationHandler.HandleAuth(ctx, aqs, auth)
}

// loadFile is LOAD_FILE(name) under the boundary: the caller needs FILE, and the file must be a regular
// file under secure_file_priv and not one of ldpsql's own. It returns NULL, as MySQL does, for a file
// that does not exist or is larger than max_allowed_packet.
type loadFile struct {
	name  sql.Expression
	files *fileGuard
	mdb   func() *mysql_db.MySQLDb
}

var _ sql.FunctionExpression = (*loadFile)(nil)

func (l *loadFile) FunctionName() string { return "load_file" }
func (l *loadFile) Description() string {
	return "returns the contents of a file under secure_file_priv"
}
func (l *loadFile) Resolved() bool               { return l.name.Resolved() }
func (l *loadFile) String() string               { return fmt.Sprintf("load_file(%s)", l.name) }
func (l *loadFile) Type(*sql.Context) sql.Type   { return types.LongBlob }
func (l *loadFile) IsNullable(*sql.Context) bool { return true }
func (l *loadFile) IsNonDeterministic() bool     { return true }
func (l *loadFile) Children() []sql.Expression   { return []sql.Expression{l.name} }
func (l *loadFile) CollationCoercibility(*sql.Context) (sql.CollationID, byte) {
	return sql.Collation_binary, 5
}

func (l *loadFile) WithChildren(_ *sql.Context, children ...sql.Expression) (sql.Expression, error) {
	if len(children) != 1 {
		return nil, sql.ErrInvalidChildrenNumber.New(l, len(children), 1)
	}
	nl := *l
	nl.name = children[0]
	return &nl, nil
}

func (l *loadFile) Eval(ctx *sql.Context, row sql.Row) (any, error) {
	if !HasGlobalPrivilege(ctx, l.mdb(), sql.PrivilegeType_File) {
		return nil, errNeedPrivilege("FILE")
	}
	v, err := l.name.Eval(ctx, row)
	if err != nil || v == nil {
		return nil, err
	}
	s, _, err := types.LongText.Convert(ctx, v)
	if err != nil {
		return nil, fmt.Errorf("LOAD_FILE: the file name: %w", err)
	}
	name, _ := s.(string)
	path, err := l.files.check(name, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("LOAD_FILE(%q): %w", name, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("LOAD_FILE(%q): %w", name, err)
	}
	if !info.Mode().IsRegular() {
		return nil, errFileAccess("%s is not a regular file", name)
	}
	limit := int64(types.LongTextBlobMax)
	if max, err := ctx.Session.GetSessionVariable(ctx, "max_allowed_packet"); err == nil {
		if m, ok := max.(int64); ok {
			limit = m
		}
	}
	if info.Size() > limit {
		return nil, nil
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("LOAD_FILE(%q): %w", name, err)
	}
	if int64(len(data)) > limit {
		return nil, nil
	}
	return data, nil
}

// installServerBoundary puts the boundary into e's SQL engine: the analyzer rule, the SHOW GRANTS
// authorisation and the confined LOAD_FILE, and publishes secure_file_priv as the system variable.
func (e *Engine) installServerBoundary() {
	cat := e.GMS.Analyzer.Catalog
	cat.AuthHandler = authHandler{cat.AuthHandler}
	e.Provider.isDBA = e.IsDBA
	e.Provider.grants = func() *mysql_db.MySQLDb { return cat.MySQLDb }
	e.Provider.infile = func(name string) (string, error) { return e.files.check(name, false) }
	e.Provider.RegisterFunction(sql.Function1{Name: "load_file", Fn: func(_ *sql.Context, name sql.Expression) sql.Expression {
		return &loadFile{name: name, files: e.files, mdb: func() *mysql_db.MySQLDb { return cat.MySQLDb }}
	}})
	e.publishSecureFilePriv()
	enableLocalInfile()
	setMySQL8Defaults()
	e.confineProcessList()
	e.confineColumnStatistics()
}

// confineColumnStatistics hides, from users who are not DBAs (SUPER), the rows of
// information_schema.column_statistics that describe a protected table's columns other than its unit
// columns: a histogram of a raw column (a primary-key column that is not a unit column, after a DBA's
// ANALYZE TABLE) is raw data that no release paid for.
func (e *Engine) confineColumnStatistics() {
	e.wrapInfoSchema("column_statistics", func(ctx *sql.Context, rows []sql.Row) []sql.Row {
		if HasGlobalPrivilege(ctx, e.GMS.Analyzer.Catalog.MySQLDb, sql.PrivilegeType_Super) {
			return rows
		}
		kept := rows[:0]
		for _, r := range rows {
			db, _ := r[0].(string)
			table, _ := r[1].(string)
			col, _ := r[2].(string)
			if b, protected := e.Ledger.Budget(TableRef{Database: db, Table: table}); protected && !slices.ContainsFunc(b.UnitColumns, func(u string) bool { return strings.EqualFold(u, col) }) {
				continue
			}
			kept = append(kept, r)
		}
		return kept
	})
}

// wrapInfoSchema filters the rows of the information_schema table name through keep.
func (e *Engine) wrapInfoSchema(name string, keep func(ctx *sql.Context, rows []sql.Row) []sql.Row) {
	t, ok, err := e.GMS.Analyzer.Catalog.InfoSchema.GetTableInsensitive(sql.NewEmptyContext(), name)
	if err != nil || !ok {
		panic(fmt.Sprintf("ldpsql: GMS has no information_schema.%s to confine (%v)", name, err))
	}
	ist, ok := t.(*information_schema.InformationSchemaTable)
	if !ok {
		panic(fmt.Sprintf("ldpsql: information_schema.%s is a %T, not GMS's InformationSchemaTable", name, t))
	}
	all := ist.Reader
	ist.Reader = func(ctx *sql.Context, c sql.Catalog) (sql.RowIter, error) {
		iter, err := all(ctx, c)
		if err != nil {
			return nil, err
		}
		rows, err := sql.RowIterToRows(ctx, iter)
		if err != nil {
			return nil, err
		}
		return sql.RowsToRowIter(keep(ctx, rows)...), nil
	}
}

// confineProcessList makes information_schema.processlist show a user without the PROCESS privilege
// only their own connections, as MySQL does: another connection's statement text can hold raw values
// that a DBA typed. (SHOW PROCESSLIST itself is refused by GMS without PROCESS.)
func (e *Engine) confineProcessList() {
	e.wrapInfoSchema(information_schema.ProcessListTableName, func(ctx *sql.Context, rows []sql.Row) []sql.Row {
		if HasGlobalPrivilege(ctx, e.GMS.Analyzer.Catalog.MySQLDb, sql.PrivilegeType_Process) {
			return rows
		}
		me := ctx.Session.Client()
		own := rows[:0]
		for _, r := range rows {
			if r[1] == me.User && r[2] == me.Address {
				own = append(own, r)
			}
		}
		return own
	})
}

// publishSecureFilePriv sets the system variable secure_file_priv to the engine's directory (NULL when
// file access is off), so that clients see it and GMS's own check of the (already checked and resolved)
// paths agrees. The variable is process-wide: with several engines in one process, the last one opened
// or configured shows; the engines' own checks do not read it.
func (e *Engine) publishSecureFilePriv() {
	nullableSecureFilePriv.Do(func() {
		sv, _, ok := sql.SystemVariables.GetGlobal("secure_file_priv")
		if !ok {
			panic("ldpsql: GMS has no system variable secure_file_priv")
		}
		msv, ok := sv.(*sql.MysqlSystemVariable)
		if !ok {
			panic(fmt.Sprintf("ldpsql: GMS's secure_file_priv is a %T", sv))
		}
		nv := *msv
		nv.Type = nullableString{msv.Type}
		nv.Default = nil
		sql.SystemVariables.AddSystemVariables([]sql.SystemVariable{&nv})
	})
	var v any
	if d := e.files.directory(); d != "" {
		v = resolve(d)
	}
	if err := sql.SystemVariables.AssignValues(map[string]any{"secure_file_priv": v}); err != nil {
		panic(fmt.Sprintf("ldpsql: publishing secure_file_priv: %v", err))
	}
}

var nullableSecureFilePriv sync.Once

// enableLocalInfile makes local_infile 1 by default (GMS: 0) and sets it so, once per process.
func enableLocalInfile() {
	localInfileOn.Do(func() {
		sv, _, ok := sql.SystemVariables.GetGlobal("local_infile")
		if !ok {
			panic("ldpsql: GMS has no system variable local_infile")
		}
		msv, ok := sv.(*sql.MysqlSystemVariable)
		if !ok {
			panic(fmt.Sprintf("ldpsql: GMS's local_infile is a %T", sv))
		}
		nv := *msv
		nv.Default = int8(1)
		sql.SystemVariables.AddSystemVariables([]sql.SystemVariable{&nv})
		if err := sql.SystemVariables.AssignValues(map[string]any{"local_infile": int8(1)}); err != nil {
			panic(fmt.Sprintf("ldpsql: setting local_infile: %v", err))
		}
	})
}

var localInfileOn sync.Once

// nullableString is a string system variable type that also holds NULL, as MySQL's secure_file_priv
// does when file access is off (GMS's string type turns NULL into ”, which MySQL reads as "anywhere").
type nullableString struct{ sqlType }

// sqlType names sql.Type so that it can be embedded beside its own method Type.
type sqlType = sql.Type

func (t nullableString) Convert(ctx context.Context, v any) (any, sql.ConvertInRange, error) {
	if v == nil {
		return nil, sql.InRange, nil
	}
	return t.sqlType.Convert(ctx, v)
}
