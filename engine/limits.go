package engine

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/vitess/go/mysql"
	"github.com/dolthub/vitess/go/netutil"
	"github.com/dolthub/vitess/go/sqltypes"
	querypb "github.com/dolthub/vitess/go/vt/proto/query"
	ast "github.com/dolthub/vitess/go/vt/sqlparser"
)

// Bounds on the size of one statement, checked right after parsing and before GMS plans it.
//
// GMS's planning is not cancellable (neither the planbuilder, nor the analyzer, nor the join planner
// checks its context), and parts of it are superlinear in the statement's size, so an unbounded
// statement holds a core for as long as it likes, through KILL QUERY and its client's disconnect.
// Measured on a 2-core machine (parse / plan+analyse):
//   - `1 + 1 + … ` with n terms (planbuilder's NewArithmetic walks the whole left operand: quadratic):
//     1k terms 4 ms / 47 ms, 2k 0.4 ms / 153 ms, 5k 1 ms / 0.78 s, 10k 3 ms / 3.3 s; 50k ≈ 80 s.
//   - `a = 1 OR b = 2 OR …`: 1k 70 ms, 5k 0.8 s, 10k 2.6 s; NOT NOT … and CASE … ELSE CASE … alike.
//   - a 10,000-value IN list: 8 ms; 10,000 WHEN branches of one CASE: 50 ms (linear, not deep).
//   - `SELECT 1 UNION ALL SELECT 1 …` (GMS's SetOp.Schema recurses, and validateUnionSchemasMatch calls
//     it at every level: cubic): 100 branches 0.1 s, 200 0.6 s, 500 4.7 s, 1,000 26 s, 2,000 5.6 min;
//     with 10 columns, 100 branches 0.22 s, 200 1.9 s.
//   - parenthesised nesting (`((((1))))`, nested subqueries, nested function calls) is already stopped by
//     the parser at about 200 levels ("max nesting level reached").
//
// The depth bound lets a 1,000-term chain through (≈ 50-70 ms to plan) and stops a deeper one at once;
// the operator bound caps the sum of such chains in one statement (50 chains of 1,000 terms plan in
// ≈ 2.2 s; 20 in 0.7 s), while operators in shallow expressions cost ≈ 10 µs each (a 25,000-row INSERT
// with two function calls a row, 50,000 operators, plans in ≈ 0.6 s); IN lists of any length and
// INSERT … VALUES of literals count nothing. Set operations are bounded on their own, cubic as they are.
// What the bounds leave unbounded: the join planner enumerates orders of up to 15 tables exhaustively
// (11 joined tables 2.2 s, 12 6.8 s, ×3 a table; above 15 GMS switches to a greedy order).
const (
	// MaxExpressionDepth is how deeply expressions may nest in one statement: `1 + 2 + 3` nests 3 deep
	// (+ is left-associative), `f(g(x))` 3 deep, a subquery's expressions continue its enclosing depth.
	MaxExpressionDepth = 1000
	// MaxExpressionOperators is how many operators, function calls, CASEs and subqueries one statement
	// may hold. Literals, placeholders, column references and value lists are not counted, so neither
	// long IN lists nor many-row INSERT … VALUES of literals come near it.
	MaxExpressionOperators = 50_000
	// MaxSetOperations is how many UNION, INTERSECT and EXCEPT operators one statement may hold.
	MaxSetOperations = 100
)

// statementSize is what checkStatementSize measures of a parsed statement.
type statementSize struct {
	depth, operators, setOps int
}

// measureStatement walks the statement with an explicit stack (a 250,000-term chain would otherwise
// recurse as deeply) and measures its expression depth, operators and set operations.
func measureStatement(stmt ast.SQLNode) statementSize {
	type item struct {
		node  ast.SQLNode
		depth int // expressions enclosing node
	}
	var size statementSize
	stack := []item{{stmt, 0}}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		depth := it.depth
		if e, ok := it.node.(ast.Expr); ok {
			depth++
			size.depth = max(size.depth, depth)
			if isOperator(e) {
				size.operators++
			}
		}
		if _, ok := it.node.(*ast.SetOp); ok {
			size.setOps++
		}
		// Walk visits the node itself, then each direct child: collect the children without descending.
		self := true
		_ = ast.Walk(func(child ast.SQLNode) (bool, error) {
			if self {
				self = false
				return true, nil
			}
			stack = append(stack, item{child, depth})
			return false, nil
		}, it.node)
	}
	return size
}

// isOperator reports whether an expression node is an operator (anything but a literal, a placeholder,
// a column reference, a list of values, or a signed numeric literal such as -1.5).
func isOperator(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.SQLVal, *ast.NullVal, ast.BoolVal, *ast.ColName, ast.ValTuple, ast.ListArg, *ast.Default:
		return false
	case *ast.UnaryExpr:
		_, literal := e.Expr.(*ast.SQLVal)
		return !literal
	}
	return true
}

// tooComplex begins the errors of checkStatementSize. The planbuilder reports a parser's error as a syntax
// error (1064, as MySQL reports a statement that overflows its parser); wireError gives the same code to
// the other paths (PREPARE), where GMS would send 1105.
const tooComplex = "statement too complex: "

// checkStatementSize fails a statement beyond MaxExpressionDepth, MaxExpressionOperators or
// MaxSetOperations, naming the bound and the statement's measure.
func checkStatementSize(stmt ast.SQLNode) error {
	if stmt == nil {
		return nil
	}
	s := measureStatement(stmt)
	switch {
	case s.depth > MaxExpressionDepth:
		return fmt.Errorf(tooComplex+"its expressions nest %d deep, more than the limit of %d (a chain such as a + b + … or x = 1 OR x = 2 OR … nests one level per operator: split it, or use IN (…) for a list of alternatives)",
			s.depth, MaxExpressionDepth)
	case s.operators > MaxExpressionOperators:
		return fmt.Errorf(tooComplex+"it holds %d operators and function calls, more than the limit of %d per statement: split it into several statements",
			s.operators, MaxExpressionOperators)
	case s.setOps > MaxSetOperations:
		return fmt.Errorf(tooComplex+"it holds %d UNION, INTERSECT or EXCEPT operations, more than the limit of %d per statement: split it, or load the rows into a table",
			s.setOps, MaxSetOperations)
	}
	return nil
}

// boundedParser is the MySQL parser followed by checkStatementSize. GMS parses through it everywhere (the
// server's handler, prepared statements, the planbuilder, stored routines and views), so an oversized
// statement is refused before any of GMS's planning runs.
// It also tells p of COMMIT and BEGIN, which GMS runs without analysis (see transactions.go).
type boundedParser struct {
	sql.Parser
	p *Provider
}

// statementLimits is the engine override that installs boundedParser.
func statementLimits(p *Provider) sql.EngineOverrides {
	return sql.EngineOverrides{Builder: sql.BuilderOverrides{Parser: boundedParser{sql.DefaultMySQLParser, p}}}
}

// mariaDBComment matches MariaDB's executable comments, /*M!… */, which only a MariaDB server runs (a
// mysqldump from Debian's mariadb-client begins with /*M!999999 enable the sandbox mode */): MySQL
// ignores them as comments, and so does ldpsql, whose parser would otherwise read their text as SQL.
var mariaDBComment = regexp.MustCompile(`/\*M![^*]*(\*+[^*/][^*]*)*\*+/`)

// withoutMariaDBComments blanks /*M!… */ comments, keeping every other byte where it was.
func withoutMariaDBComments(q string) string {
	if !strings.Contains(q, "/*M!") {
		return q
	}
	return mariaDBComment.ReplaceAllStringFunc(q, func(c string) string { return strings.Repeat(" ", len(c)) })
}

// parsed is what every parse of a session's statement is followed by: DDL commits the session's open
// transaction (implicitCommit, transactions.go), every user may read their own ldp_jobs rows (jobs.go), a rename
// is kept within the current database (rename.go), and the statement's size is checked.
func (p boundedParser) parsed(ctx any, stmt ast.Statement) error {
	if err := implicitCommit(ctx, stmt); err != nil {
		return err
	}
	p.p.jobsForEveryone(ctx)
	if err := checkRename(ctx, stmt); err != nil {
		return err
	}
	return checkStatementSize(stmt)
}

func (p boundedParser) ParseSimple(query string) (ast.Statement, error) {
	stmt, err := p.Parser.ParseSimple(withoutMariaDBComments(query))
	if err != nil {
		return stmt, err
	}
	if err := checkStatementSize(stmt); err != nil {
		return nil, err // nil: see ParseOneWithOptions
	}
	return stmt, nil
}

func (p boundedParser) Parse(ctx *sql.Context, query string, multi bool) (ast.Statement, string, string, error) {
	stmt, parsed, rest, err := p.Parser.Parse(ctx, withoutMariaDBComments(query), multi)
	if err != nil {
		return stmt, parsed, rest, err
	}
	if err := p.parsed(ctx, stmt); err != nil {
		return nil, "", "", err // nil: see ParseOneWithOptions
	}
	return stmt, parsed, rest, nil
}

func (p boundedParser) ParseWithOptions(ctx context.Context, query string, delimiter rune, multi bool, options ast.ParserOptions) (ast.Statement, string, string, error) {
	stmt, parsed, rest, err := p.Parser.ParseWithOptions(ctx, withoutMariaDBComments(query), delimiter, multi, options)
	if err != nil {
		return stmt, parsed, rest, err
	}
	if err := p.parsed(ctx, stmt); err != nil {
		return nil, "", "", err // nil: see ParseOneWithOptions
	}
	return stmt, parsed, rest, nil
}

func (p boundedParser) ParseOneWithOptions(ctx context.Context, query string, options ast.ParserOptions) (ast.Statement, int, error) {
	stmt, n, err := p.Parser.ParseOneWithOptions(ctx, withoutMariaDBComments(query), options)
	if err != nil {
		return stmt, n, err
	}
	if err := p.parsed(ctx, stmt); err != nil {
		// No statement with the error: GMS's handler, for a client with multi-statements on (the mysql
		// CLI), keeps a parsed statement and drops the parse error, and would run it unchecked.
		return nil, 0, err
	}
	return stmt, n, nil
}

// disconnectPollInterval is how often a running statement's client socket is checked for a hang-up.
const disconnectPollInterval = 250 * time.Millisecond

// cancelOnDisconnect wraps GMS's connection handler so that a statement stops when its client goes away,
// and so that a killed statement reports MySQL's "Query execution was interrupted" (see wireError).
//
// GMS notices a closed connection only while it streams a multi-row result (pollForClosedConnection in
// its server/handler.go, every 5 s): a statement that returns an OK packet (INSERT … SELECT, CALL) or a
// single row ran on to its end after its client had gone, still listed in SHOW PROCESSLIST. Here every
// statement runs under a context that is cancelled as soon as its client's socket reports a hang-up.
type cancelOnDisconnect struct {
	mysql.Handler
	e *Engine
}

func (e *Engine) wrapHandler(h mysql.Handler) (mysql.Handler, error) {
	return cancelOnDisconnect{h, e}, nil
}

// NewConnection tells the client in the handshake that its session starts in autocommit mode, as MySQL
// does: GMS's handshake said nothing, so pymysql (autocommit off by default) took autocommit to be off
// already, never sent SET AUTOCOMMIT = 0, and its inserts committed at once.
func (h cancelOnDisconnect) NewConnection(c *mysql.Conn) {
	h.Handler.NewConnection(c)
	c.StatusFlags |= uint16(mysql.ServerStatusAutocommit)
}

func (h cancelOnDisconnect) ConnectionClosed(c *mysql.Conn) {
	h.Handler.ConnectionClosed(c)
	h.e.forgetSession(c.ConnectionID)
}

// ComInitDB is the client's USE (the mysql CLI's \u, a driver's database in its DSN): its errors, such
// as an unknown database, go through wireError as a statement's do.
func (h cancelOnDisconnect) ComInitDB(c *mysql.Conn, schemaName string) error {
	return wireError(h.Handler.ComInitDB(c, schemaName))
}

func (h cancelOnDisconnect) ComQuery(ctx context.Context, c *mysql.Conn, query string, callback mysql.ResultSpoolFn) error {
	sent := false
	return h.e.runStatement(ctx, c, func(ctx context.Context) error {
		return h.Handler.ComQuery(ctx, c, query, withReadableInfo(func(res *sqltypes.Result, more bool) error {
			sent = true
			return callback(res, more)
		}))
	}, func() bool { return !sent })
}

func (h cancelOnDisconnect) ComMultiQuery(ctx context.Context, c *mysql.Conn, query string, callback mysql.ResultSpoolFn) (string, error) {
	var rest string
	err := h.e.runStatement(ctx, c, func(ctx context.Context) error {
		var err error
		rest, err = h.Handler.ComMultiQuery(ctx, c, query, withReadableInfo(callback))
		return err
	}, nil)
	return rest, err
}

func (h cancelOnDisconnect) ComPrepare(ctx context.Context, c *mysql.Conn, query string, prepare *mysql.PrepareData) ([]*querypb.Field, error) {
	ctx, stop := watchClient(ctx, c)
	defer stop()
	fields, err := h.Handler.ComPrepare(ctx, c, query, prepare)
	return fields, wireError(err)
}

func (h cancelOnDisconnect) ComStmtExecute(ctx context.Context, c *mysql.Conn, prepare *mysql.PrepareData, callback func(*sqltypes.Result) error) error {
	sent := false
	return h.e.runStatement(ctx, c, func(ctx context.Context) error {
		return h.Handler.ComStmtExecute(ctx, c, prepare, func(res *sqltypes.Result) error {
			sent = true
			return callback(res)
		})
	}, func() bool { return !sent })
}

// runStatement runs one statement of a client: tracked for Drain (shutdown.go), stopped when the client
// hangs up, holding the store's gate (store.go). When DuckDB had invalidated the database, it reopens
// it, and runs the statement once more if the database refused it before it did anything and nothing
// was sent to the client (retryable reports that; nil: never again).
func (e *Engine) runStatement(ctx context.Context, c *mysql.Conn, run func(context.Context) error, retryable func() bool) error {
	once := func() error {
		ctx, end, err := e.stmts.start(ctx)
		if err != nil {
			return err
		}
		defer end()
		e.gate.RLock()
		defer e.gate.RUnlock()
		ctx, stop := watchClient(ctx, c)
		defer stop()
		return run(ctx)
	}
	gen := e.store.generation()
	err := once()
	if storeInvalidated(err) {
		_ = e.recoverStore() // it logs its failure; the statement reports its own error
		// Only when the file was really reopened since the statement began: an error text that merely
		// says "invalidated" (a string in the statement) must not run it twice.
		if refusedByInvalidStore(err) && e.store.generation() != gen && retryable != nil && retryable() {
			err = once()
		}
	}
	return wireError(e.diskFullError(err))
}

// okInfoPrefix is the byte vitess writes before an OK packet's info text ('#', 35), where the protocol has
// the text's length-encoded size: MariaDB's client reads it as one, and an info shorter than 35 bytes
// (PREPARE's "Statement prepared") made it fail with "ERROR 2027 Received malformed packet".
const okInfoPrefix = '#'

// withReadableInfo pads an OK packet's info text to at least okInfoPrefix bytes with trailing spaces, so
// that the size a MariaDB or MySQL client reads never runs past the packet; longer texts already read
// whole, as clients show the info up to the packet's end.
func withReadableInfo(callback mysql.ResultSpoolFn) mysql.ResultSpoolFn {
	return func(res *sqltypes.Result, more bool) error {
		if res != nil && len(res.Fields) == 0 && res.Info != "" && len(res.Info) < okInfoPrefix {
			res.Info += strings.Repeat(" ", okInfoPrefix-len(res.Info))
		}
		return callback(res, more)
	}
}

// watchClient returns a context that is cancelled when c's client hangs up, and the function that stops
// watching. Where the socket cannot be watched (not TCP or Unix, or no support on this platform) ctx is
// returned as it is.
func watchClient(ctx context.Context, c *mysql.Conn) (context.Context, func()) {
	conn := underlyingConn(c.Conn)
	if conn == nil {
		return ctx, func() {}
	}
	if _, supported := peerClosed(conn); !supported {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(disconnectPollInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if closed, _ := peerClosed(conn); closed {
					cancel(errClientGone)
					return
				}
			}
		}
	}()
	return ctx, func() {
		close(done)
		cancel(nil)
	}
}

var errClientGone = fmt.Errorf("the client closed its connection")

// underlyingConn unwraps vitess's timeout wrapper and TLS down to the socket, or returns nil.
func underlyingConn(conn net.Conn) net.Conn {
	for i := 0; i < 4 && conn != nil; i++ {
		switch c := conn.(type) {
		case *netutil.ConnWithTimeouts:
			conn = c.Conn
		case netutil.ConnWithTimeouts:
			conn = c.Conn
		case interface{ NetConn() net.Conn }: // *tls.Conn
			conn = c.NetConn()
		default:
			return conn
		}
	}
	return nil
}
