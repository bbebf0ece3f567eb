package main

import (
	"context"
	gosql "database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"
	"github.com/go-sql-driver/mysql"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/udf"
)

// A session is where a subcommand's statements run: the DuckDB file opened in this process (--db) or a
// running `ldpsql serve` reached over the MySQL protocol (--addr). The subcommands that work both ways
// (sql, train, dataset load, load, export) are written once against it.
type session interface {
	// query runs one statement. For a statement that returns rows it calls row with the column names
	// and each row (the slice is the caller's to keep) and returns the column names; otherwise it
	// returns no columns and the number of rows affected. row may be nil.
	query(ctx context.Context, stmt string, row func(cols []string, vals []any) error) (cols []string, affected int64, err error)
	// insertRows inserts rows of values for cols into table, batch by batch as next returns them (nil at
	// the end). Values are Go values (integers, floats, strings, []byte, nil); the server converts
	// them to the columns' types as an INSERT would.
	insertRows(ctx context.Context, table string, cols []string, next func() ([][]any, error)) (int64, error)
	// where says what the session talks to, for messages.
	where() string
	close() error
}

// result is a whole query result in memory.
type result struct {
	cols     []string
	rows     [][]any
	affected int64
}

// queryAll runs one statement and collects its rows.
func queryAll(ctx context.Context, s session, stmt string) (*result, error) {
	r := &result{}
	var err error
	r.cols, r.affected, err = s.query(ctx, stmt, func(_ []string, row []any) error {
		r.rows = append(r.rows, row)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// firstValue is the first column of the first row, nil if there is none.
func (r *result) firstValue() any {
	if len(r.rows) == 0 || len(r.rows[0]) == 0 {
		return nil
	}
	return r.rows[0][0]
}

// print prints the result as a MySQL-client style table, or the number of rows affected.
func (r *result) print(w io.Writer) {
	if len(r.cols) == 0 {
		fmt.Fprintf(w, "Query OK, %d row(s) affected\n", r.affected)
		return
	}
	printRows(w, r.cols, r.rows)
}

// target is the --db / --addr / --user / --password flags of a subcommand that works both in process
// and against a server.
type target struct {
	fs       *flag.FlagSet
	db       *string
	addr     *string
	user     *string
	password *string
}

// addTargetFlags defines the flags on fs; dbHelp describes --db for this command.
func addTargetFlags(fs *flag.FlagSet, dbHelp string) *target {
	return &target{
		fs:       fs,
		db:       fs.String("db", engine.DefaultPath, dbHelp+"; opened in this process, so not while a server has it open (use --addr then)"),
		addr:     fs.String("addr", "", "`HOST:PORT` of a running ldpsql serve to talk to over the MySQL protocol, instead of opening --db"),
		user:     fs.String("user", "root", "user to connect as, with --addr"),
		password: fs.String("password", "", "password, with --addr (default $LDPSQL_PASSWORD, which keeps it out of the process list)"),
	}
}

// open opens the session the flags name; call it after fs.Parse.
func (t *target) open(ctx context.Context) (session, error) {
	set := map[string]bool{}
	t.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["addr"] && set["db"] {
		return nil, fmt.Errorf("--addr and --db cannot be used together: --db opens the DuckDB file in this process, --addr talks to the server that has it open")
	}
	if !set["addr"] {
		if set["user"] || set["password"] {
			return nil, fmt.Errorf("--user and --password go with --addr (a --db file is opened as root, in this process)")
		}
		e, err := openEngine(*t.db, udf.Config{})
		if err != nil {
			return nil, err
		}
		return newEmbedded(e), nil
	}
	if *t.addr == "" {
		return nil, fmt.Errorf("--addr is empty: give the HOST:PORT that `ldpsql serve` printed")
	}
	password := *t.password
	if !set["password"] {
		password = os.Getenv("LDPSQL_PASSWORD")
	}
	return dialServer(ctx, *t.addr, *t.user, password)
}

// embedded runs statements on an engine in this process, as root, in one SQL session.
type embedded struct {
	e    *engine.Engine
	sess sql.Session
}

func newEmbedded(e *engine.Engine) *embedded {
	return &embedded{e: e, sess: e.NewContext(context.Background()).Session}
}

func (s *embedded) where() string { return s.e.Path() }
func (s *embedded) close() error  { return s.e.Close() }

func (s *embedded) ctx(ctx context.Context) *sql.Context {
	return sql.NewContext(ctx, sql.WithSession(s.sess))
}

func (s *embedded) query(ctx context.Context, stmt string, row func([]string, []any) error) ([]string, int64, error) {
	sctx := s.ctx(ctx)
	schema, iter, _, err := s.e.GMS.Query(sctx, stmt)
	if err != nil {
		return nil, 0, err
	}
	cols := make([]string, len(schema))
	for i, c := range schema {
		cols[i] = c.Name
	}
	var affected int64
	for {
		r, err := iter.Next(sctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err == nil && len(schema) == 1 && schema[0].Name == types.OkResultColumnName && len(r) == 1 {
			if ok, isOK := r[0].(types.OkResult); isOK {
				cols, affected = nil, int64(ok.RowsAffected)
				continue
			}
		}
		if err == nil && row != nil {
			err = row(cols, []any(r))
		}
		if err != nil {
			_ = iter.Close(sctx)
			return nil, 0, err
		}
	}
	if err := iter.Close(sctx); err != nil {
		return nil, 0, err
	}
	if len(cols) == 0 {
		return nil, affected, nil
	}
	return cols, 0, nil
}

// insertRows writes through the table editor and DuckDB's appender (engine.InsertRows, one statement)
// when cols are the table's columns in order, converting each value to its column's type; otherwise
// it runs INSERT statements as a server would.
func (s *embedded) insertRows(ctx context.Context, table string, cols []string, next func() ([][]any, error)) (int64, error) {
	sctx := s.ctx(ctx)
	schema, _, err := s.e.Query(sctx, "SELECT * FROM "+quoteTable(table)+" LIMIT 0")
	if err != nil {
		return 0, err
	}
	if len(schema) != len(cols) {
		return insertStatements(ctx, s, table, cols, next)
	}
	for i, c := range schema {
		if !strings.EqualFold(c.Name, cols[i]) {
			return insertStatements(ctx, s, table, cols, next)
		}
	}
	done := 0
	return s.e.InsertRows(sctx, table, func() ([]sql.Row, error) {
		batch, err := next()
		if err != nil || batch == nil {
			return nil, err
		}
		rows := make([]sql.Row, len(batch))
		defer func() { done += len(batch) }()
		for i, vals := range batch {
			rows[i] = make(sql.Row, len(vals))
			for j, v := range vals {
				if v == nil {
					continue
				}
				c, inRange, err := schema[j].Type.Convert(sctx, v)
				if err == nil && inRange != sql.InRange {
					err = fmt.Errorf("out of range for %s", schema[j].Type)
				}
				if err != nil {
					return nil, fmt.Errorf("row %d, column %s, value %s: %w", done+i+1, schema[j].Name, truncate(fmt.Sprint(v), 40), err)
				}
				rows[i][j] = c
			}
		}
		return rows, nil
	})
}

// remote runs statements on a running `ldpsql serve` over the MySQL protocol, on one connection.
type remote struct {
	addr, user string
	db         *gosql.DB
	conn       *gosql.Conn
}

// dialServer connects and authenticates; an error is the server's (access denied) or the network's.
func dialServer(ctx context.Context, addr, user, password string) (*remote, error) {
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.User, cfg.Passwd = "tcp", addr, user, password
	cfg.Timeout = 10 * time.Second
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := gosql.OpenDB(connector)
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("connecting to %s as %s: %w", addr, user, serverError(err))
	}
	return &remote{addr: addr, user: user, db: db, conn: conn}, nil
}

func (s *remote) where() string { return s.addr + " as " + s.user }

func (s *remote) close() error {
	if s.conn == nil {
		return nil
	}
	err := errors.Join(s.conn.Close(), s.db.Close())
	s.conn, s.db = nil, nil
	return err
}

func (s *remote) query(ctx context.Context, stmt string, row func([]string, []any) error) ([]string, int64, error) {
	rows, err := s.conn.QueryContext(ctx, stmt)
	if err != nil {
		return nil, 0, serverError(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, 0, serverError(err)
	}
	if len(cols) == 0 {
		if err := rows.Close(); err != nil {
			return nil, 0, serverError(err)
		}
		// The driver keeps an OK packet's affected-row count to itself; the session's ROW_COUNT() has it.
		var affected int64
		if err := s.conn.QueryRowContext(ctx, "SELECT ROW_COUNT()").Scan(&affected); err != nil {
			return nil, 0, serverError(err)
		}
		return nil, max(affected, 0), nil
	}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, 0, serverError(err)
		}
		if row != nil {
			if err := row(cols, vals); err != nil {
				return nil, 0, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, 0, serverError(err)
	}
	return cols, 0, nil
}

func (s *remote) insertRows(ctx context.Context, table string, cols []string, next func() ([][]any, error)) (int64, error) {
	return insertStatements(ctx, s, table, cols, next)
}

// insertBatchBytes bounds one multi-row INSERT: within one 16 MiB protocol packet and well under the
// driver's 64 MiB max_allowed_packet. Every statement commits, and DuckDB checkpoints when its WAL
// passes 16 MiB, so fewer, larger statements load faster: 60,000 Fashion-MNIST rows took about twice
// as long in 1 MiB statements as in 16 MiB ones.
const insertBatchBytes = 15 << 20

// insertStatements inserts the rows with multi-row INSERT statements of at most insertBatchBytes each.
// Each statement is atomic; a failure leaves the statements before it in place.
func insertStatements(ctx context.Context, s session, table string, cols []string, next func() ([][]any, error)) (int64, error) {
	head := "INSERT INTO " + quoteTable(table) + " ("
	for i, c := range cols {
		if i > 0 {
			head += ", "
		}
		head += quoteIdent(c)
	}
	head += ") VALUES "
	var stmt strings.Builder
	var n, pending int64
	flush := func() error {
		if pending == 0 {
			return nil
		}
		if _, _, err := s.query(ctx, stmt.String(), nil); err != nil {
			return fmt.Errorf("inserting into %s (rows %d to %d): %w", table, n+1, n+pending, err)
		}
		n += pending
		pending = 0
		stmt.Reset()
		return nil
	}
	for {
		batch, err := next()
		if err != nil {
			return n, err
		}
		if batch == nil {
			break
		}
		for _, vals := range batch {
			if len(vals) != len(cols) {
				return n, fmt.Errorf("row %d has %d values for %d columns", n+pending+1, len(vals), len(cols))
			}
			if pending == 0 {
				stmt.WriteString(head)
			} else {
				stmt.WriteByte(',')
			}
			stmt.WriteByte('(')
			for j, v := range vals {
				if j > 0 {
					stmt.WriteByte(',')
				}
				if err := writeLiteral(&stmt, v); err != nil {
					return n, fmt.Errorf("row %d, column %s: %w", n+pending+1, cols[j], err)
				}
			}
			stmt.WriteByte(')')
			pending++
			if stmt.Len() >= insertBatchBytes {
				if err := flush(); err != nil {
					return n, err
				}
			}
		}
	}
	return n, flush()
}

// writeLiteral writes v as a SQL literal.
func writeLiteral(b *strings.Builder, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("NULL")
	case string:
		b.WriteString(sqlQuote(x))
	case []byte:
		// The bytes as they are, escaping only the quote and the backslash: half the size of X'…' hex
		// and scanned by the server's tokenizer in bulk.
		b.WriteString("_binary'")
		start := 0
		for i, c := range x {
			if c == '\'' || c == '\\' {
				b.Write(x[start:i])
				b.WriteByte('\\')
				start = i
			}
		}
		b.Write(x[start:])
		b.WriteByte('\'')
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int:
		b.WriteString(strconv.Itoa(x))
	case int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		fmt.Fprint(b, x)
	case float32:
		return writeFloat(b, float64(x), 32)
	case float64:
		return writeFloat(b, x, 64)
	default:
		return fmt.Errorf("no SQL literal for %T", v)
	}
	return nil
}

func writeFloat(b *strings.Builder, x float64, bits int) error {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return fmt.Errorf("%v has no SQL literal", x)
	}
	b.WriteString(strconv.FormatFloat(x, 'g', -1, bits))
	return nil
}

// serverError shows a server's error as the mysql client does, "ERROR 1045 (28000): Access denied …".
func serverError(err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return mysqlError{me}
	}
	return err
}

type mysqlError struct{ *mysql.MySQLError }

func (e mysqlError) Error() string {
	state := ""
	if e.SQLState != [5]byte{} {
		state = " (" + string(e.SQLState[:]) + ")"
	}
	return fmt.Sprintf("ERROR %d%s: %s", e.Number, state, e.Message)
}

func (e mysqlError) Unwrap() error { return e.MySQLError }

// quoteIdent quotes a name with backticks.
func quoteIdent(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// quoteTable quotes table or db.table.
func quoteTable(name string) string {
	if db, t, ok := strings.Cut(name, "."); ok {
		return quoteIdent(db) + "." + quoteIdent(t)
	}
	return quoteIdent(name)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// int64Value reads an integer as the embedded engine (Go integer types) or the driver ([]byte text,
// int64) returns it.
func int64Value(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case int:
		return int64(x), true
	case int16:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint64:
		return int64(x), x <= math.MaxInt64
	case uint32:
		return int64(x), true
	case []byte:
		n, err := strconv.ParseInt(string(x), 10, 64)
		return n, err == nil
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	}
	return 0, false
}

// float64Value reads a number as either side returns it.
func float64Value(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case []byte:
		f, err := strconv.ParseFloat(string(x), 64)
		return f, err == nil
	case string:
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil
	}
	if n, ok := int64Value(v); ok {
		return float64(n), true
	}
	return 0, false
}

// stringValue reads text as either side returns it; NULL is "".
func stringValue(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []byte:
		return string(x)
	}
	return formatValue(v)
}
