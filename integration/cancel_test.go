package integration

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// victim is one connection of the pool, pinned so that its id is known.
type victim struct {
	conn *sql.Conn
	id   int64
}

func pinConn(t *testing.T, db *sql.DB) victim {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var id int64
	if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return victim{c, id}
}

// procState is the Command and Info of connection id in SHOW PROCESSLIST ("" when it is not listed).
func procState(ctx context.Context, root *sql.DB, id int64) (command, info string, err error) {
	rows, err := root.QueryContext(ctx, "SHOW PROCESSLIST")
	if err != nil {
		return "", "", err
	}
	defer rows.Close()
	for rows.Next() {
		var pid int64
		var user, host, cmd, state string
		var db, inf sql.NullString
		var secs int64
		if err := rows.Scan(&pid, &user, &host, &db, &cmd, &secs, &state, &inf); err != nil {
			return "", "", err
		}
		if pid == id {
			command, info = cmd, inf.String
		}
	}
	return command, info, rows.Err()
}

// waitFor polls SHOW PROCESSLIST until cond holds for connection id, failing the test by ctx's deadline.
func waitFor(ctx context.Context, t *testing.T, root *sql.DB, id int64, what string, cond func(cmd, info string) bool) {
	t.Helper()
	for {
		cmd, info, err := procState(ctx, root, id)
		if err == nil && cond(cmd, info) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("connection %d: %s: not seen before the deadline (last: command %q, info %.60q, err %v)", id, what, cmd, info, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// longStatements are statements that run far longer than any test deadline here: a CPU-bound cross join
// of 10⁹ rows answering one row, the same streaming rows (none match), the same as an INSERT … SELECT
// (an OK result), and SLEEP.
var longStatements = []struct{ name, query string }{
	{"count", "SELECT COUNT(*) FROM n a, n b, n c WHERE a.i * b.i + c.i = -1"},
	{"rows", "SELECT a.i FROM n a, n b, n c WHERE a.i * b.i + c.i = -1"},
	{"insert-select", "INSERT INTO sink SELECT a.i FROM n a, n b, n c WHERE a.i * b.i + c.i = -1"},
	{"sleep", "SELECT SLEEP(100)"},
}

// cancelServer starts a server with the 1,000-row table n and the empty table sink.
func cancelServer(t *testing.T) (*server, *sql.DB) {
	srv := startServer(t, filepath.Join(t.TempDir(), "cancel.duckdb"))
	root := srv.connect("root", "")
	mustExec(t, root, "CREATE TABLE n (i INT PRIMARY KEY)")
	var vals []string
	for i := 0; i < 1000; i++ {
		vals = append(vals, fmt.Sprintf("(%d)", i))
	}
	mustExec(t, root, "INSERT INTO n VALUES "+strings.Join(vals, ","))
	mustExec(t, root, "CREATE TABLE sink (i INT)")
	return srv, root
}

// start runs q on v in the background under ctx, reading any rows, and returns its outcome's channel.
func (v victim) start(ctx context.Context, q string) <-chan error {
	done := make(chan error, 1)
	go func() {
		rows, err := v.conn.QueryContext(ctx, q)
		if err == nil {
			for rows.Next() {
			}
			err = rows.Err()
			rows.Close()
		}
		done <- err
	}()
	return done
}

func running(cmd, info string) bool { return cmd == "Query" && info != "" }
func notRunning(cmd, _ string) bool { return cmd != "Query" }

// A 50,000-term expression is refused at once with the bound's error, as a query and as a prepared
// statement; before the bound it planned for minutes (quadratic in GMS's planbuilder), through KILL
// QUERY and the client's disconnect.
func TestHugeExpressionRefused(t *testing.T) {
	srv := startServer(t, filepath.Join(t.TempDir(), "huge.duckdb"))
	root := srv.connect("root", "")
	huge := "SELECT 1" + strings.Repeat(" + 1", 50_000-1)
	for _, prepared := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var err error
		if prepared { // an argument makes the driver prepare the statement on the server
			err = root.QueryRowContext(ctx, huge+" + ?", 1).Scan(new(int64))
		} else {
			err = root.QueryRowContext(ctx, huge).Scan(new(int64))
		}
		cancel()
		wantMySQLError(t, fmt.Sprintf("50,000 terms (prepared %v)", prepared), err, 1064)
		if err == nil || !strings.Contains(err.Error(), "statement too complex") || !strings.Contains(err.Error(), "limit of 1000") {
			t.Errorf("50,000 terms (prepared %v): %v, want the depth bound named", prepared, err)
		}
	}
	var one int
	if err := root.QueryRow("SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("after the refusals: SELECT 1 = %d, %v", one, err)
	}
}

// KILL QUERY from root stops another connection's long statement: its client gets ER_QUERY_INTERRUPTED
// (1317), the process list shows the connection idle, and the connection still works. KILL stops the
// connection as well.
func TestKillStopsStatement(t *testing.T) {
	srv, root := cancelServer(t)
	for _, st := range longStatements {
		for _, kill := range []string{"KILL QUERY", "KILL"} {
			t.Run(st.name+"/"+kill, func(t *testing.T) {
				v := pinConn(t, srv.connect("root", ""))
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				done := v.start(ctx, st.query)
				waitFor(ctx, t, root, v.id, "statement running", running)
				time.Sleep(300 * time.Millisecond) // past planning, into the rows
				mustExec(t, root, fmt.Sprintf("%s %d", kill, v.id))
				var err error
				select {
				case err = <-done:
				case <-ctx.Done():
					t.Fatalf("%s %d: the statement still runs at the deadline", kill, v.id)
				}
				if kill == "KILL QUERY" {
					wantMySQLError(t, "the killed statement", err, 1317)
				} else if err == nil {
					t.Errorf("the statement of a killed connection succeeded")
				}
				waitFor(ctx, t, root, v.id, "statement gone", notRunning)
				if kill == "KILL QUERY" {
					var one int
					if err := v.conn.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
						t.Errorf("the connection after KILL QUERY: %v", err)
					}
				} else {
					// The killed connection closes asynchronously: wait for it to leave the list.
					cmd, _, err := procState(ctx, root, v.id)
					for err == nil && cmd != "" && ctx.Err() == nil {
						time.Sleep(50 * time.Millisecond)
						cmd, _, err = procState(ctx, root, v.id)
					}
					if err != nil || cmd != "" {
						t.Errorf("after KILL %d the connection is still listed (%q, %v)", v.id, cmd, err)
					}
				}
			})
		}
	}
}

// A client that disconnects mid-statement has its statement stopped within a second or so, whatever the
// statement returns. GMS on its own noticed only while streaming rows, every 5 s: an INSERT … SELECT ran
// to its end.
func TestDisconnectStopsStatement(t *testing.T) {
	srv, root := cancelServer(t)
	for _, st := range longStatements {
		t.Run(st.name, func(t *testing.T) {
			v := pinConn(t, srv.connect("root", ""))
			qctx, disconnect := context.WithCancel(context.Background())
			defer disconnect()
			done := v.start(qctx, st.query)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			waitFor(ctx, t, root, v.id, "statement running", running)
			disconnect() // the driver closes the socket of a query whose context ends
			<-done
			gone, cancelGone := context.WithTimeout(context.Background(), 4*time.Second)
			defer cancelGone()
			waitFor(gone, t, root, v.id, "statement gone after the disconnect", func(cmd, _ string) bool { return cmd == "" })
		})
	}
}

// KILL as MySQL has it: a user kills their own connections' statements without any privilege (the
// mysql client's Ctrl-C sends KILL QUERY from a second connection), another user's only with SUPER or
// CONNECTION_ADMIN (1095), and an id that is no connection is 1094.
func TestKillOwnConnection(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "data.duckdb"))
	root := s.connect("root", "")
	analyst := s.readmeAnalyst(root)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	connOf := func(db *sql.DB) (*sql.Conn, int64) {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var id int64
		if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		return c, id
	}
	busy, busyID := connOf(analyst)
	defer busy.Close()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		var v int
		done <- busy.QueryRowContext(ctx, "SELECT SLEEP(30)").Scan(&v)
	}()
	time.Sleep(300 * time.Millisecond)
	if _, err := analyst.ExecContext(ctx, fmt.Sprintf("KILL QUERY %d", busyID)); err != nil {
		t.Fatalf("the analyst's KILL QUERY of their own statement: %v", err)
	}
	if err := <-done; err == nil || time.Since(start) > 20*time.Second {
		t.Errorf("the killed SLEEP(30): %v after %v", err, time.Since(start))
	}
	rootConn, rootID := connOf(root)
	defer rootConn.Close()
	if _, err := analyst.ExecContext(ctx, fmt.Sprintf("KILL %d", rootID)); err == nil || !strings.Contains(err.Error(), "1095") {
		t.Errorf("the analyst's KILL of root's connection: %v; want error 1095", err)
	}
	if err := rootConn.PingContext(ctx); err != nil {
		t.Errorf("root's connection after the refused KILL: %v", err)
	}
	if _, err := analyst.ExecContext(ctx, "KILL 987654"); err == nil || !strings.Contains(err.Error(), "1094") {
		t.Errorf("KILL of no connection: %v; want error 1094", err)
	}
	if _, err := root.ExecContext(ctx, fmt.Sprintf("KILL QUERY %d", busyID)); err != nil {
		t.Errorf("root's KILL QUERY of the analyst's connection: %v", err)
	}
}
