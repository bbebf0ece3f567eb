package engine

import (
	"context"
	gosql "database/sql"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// These tests run transactions through the MySQL server over loopback (go-sql-driver/mysql), each
// session on its own connection, and through in-process sessions.

// txServer serves a fresh in-memory engine on a loopback port; db opens a client pool on it.
func txServer(t *testing.T) (*Engine, func() *gosql.DB) {
	t.Helper()
	e, err := Open(MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.Serve(ServerConfig{Listener: ln})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(func() { s.Close(); e.Close() })
	open := func() *gosql.DB {
		db, err := gosql.Open("mysql", "root@tcp("+ln.Addr().String()+")/"+DefaultDatabase)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	return e, open
}

// session is one client connection: its statements run in one server session.
type session struct {
	t    *testing.T
	conn *gosql.Conn
}

func newTxSession(t *testing.T, db *gosql.DB) *session {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &session{t, c}
}

func (s *session) exec(q string) {
	s.t.Helper()
	if _, err := s.conn.ExecContext(context.Background(), q); err != nil {
		s.t.Fatalf("%s: %v", q, err)
	}
}

func (s *session) fails(q string) error {
	s.t.Helper()
	_, err := s.conn.ExecContext(context.Background(), q)
	if err == nil {
		s.t.Fatalf("%s succeeded", q)
	}
	return err
}

func (s *session) count(q string) int64 {
	s.t.Helper()
	var n int64
	if err := s.conn.QueryRowContext(context.Background(), q).Scan(&n); err != nil {
		s.t.Fatalf("%s: %v", q, err)
	}
	return n
}

func (s *session) wantCount(q string, want int64) {
	s.t.Helper()
	if n := s.count(q); n != want {
		s.t.Fatalf("%s = %d, want %d", q, n, want)
	}
}

// A transaction's writes are visible to itself (scans, COUNT(*), index lookups), to no other session
// until COMMIT, and gone after ROLLBACK.
func TestTransactionRollbackAndCommit(t *testing.T) {
	_, open := txServer(t)
	db := open()
	a, b := newTxSession(t, db), newTxSession(t, db)
	a.exec("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
	a.exec("INSERT INTO t VALUES (1, 10)")

	a.exec("BEGIN")
	a.exec("INSERT INTO t VALUES (2, 20), (3, 30)")
	a.exec("UPDATE t SET v = 11 WHERE id = 1")
	a.wantCount("SELECT count(*) FROM t", 3)
	a.wantCount("SELECT v FROM t WHERE id = 1", 11)
	a.wantCount("SELECT sum(v) FROM t", 61)
	b.wantCount("SELECT count(*) FROM t", 1)
	b.wantCount("SELECT v FROM t WHERE id = 1", 10)
	a.exec("ROLLBACK")
	a.wantCount("SELECT count(*) FROM t", 1)
	a.wantCount("SELECT v FROM t WHERE id = 1", 10)
	a.exec("ROLLBACK") // nothing pending: succeeds, as in MySQL

	a.exec("START TRANSACTION")
	a.exec("INSERT INTO t VALUES (4, 40)")
	a.exec("DELETE FROM t WHERE id = 1")
	b.wantCount("SELECT count(*) FROM t WHERE id = 4", 0)
	a.exec("COMMIT")
	b.wantCount("SELECT count(*) FROM t WHERE id = 4", 1)
	b.wantCount("SELECT count(*) FROM t", 1)

	// Snapshot: a transaction keeps seeing what it first saw, whatever commits meanwhile.
	a.exec("BEGIN")
	a.wantCount("SELECT count(*) FROM t", 1)
	b.exec("INSERT INTO t VALUES (5, 50)")
	a.wantCount("SELECT count(*) FROM t", 1)
	a.exec("COMMIT")
	a.wantCount("SELECT count(*) FROM t", 2)
}

// With autocommit = 0 every statement is in a transaction until COMMIT or ROLLBACK.
func TestTransactionAutocommitOff(t *testing.T) {
	_, open := txServer(t)
	db := open()
	a, b := newTxSession(t, db), newTxSession(t, db)
	a.exec("CREATE TABLE t (id INT PRIMARY KEY)")
	a.exec("SET autocommit = 0")
	a.exec("INSERT INTO t VALUES (1)")
	b.wantCount("SELECT count(*) FROM t", 0)
	a.exec("COMMIT")
	b.wantCount("SELECT count(*) FROM t", 1)
	a.exec("INSERT INTO t VALUES (2)")
	a.wantCount("SELECT count(*) FROM t", 2)
	a.exec("ROLLBACK")
	a.wantCount("SELECT count(*) FROM t", 1)
	a.exec("INSERT INTO t VALUES (3)")
	a.exec("SET autocommit = 1")
	a.wantCount("SELECT count(*) FROM t", 2) // GMS commits at the end of the statement after SET
	b.wantCount("SELECT count(*) FROM t", 2)
}

// DDL commits what is pending before it runs, as in MySQL, and ends BEGIN.
func TestTransactionDDLCommitsImplicitly(t *testing.T) {
	_, open := txServer(t)
	db := open()
	a, b := newTxSession(t, db), newTxSession(t, db)
	a.exec("CREATE TABLE t (id INT PRIMARY KEY)")
	a.exec("BEGIN")
	a.exec("INSERT INTO t VALUES (1)")
	a.exec("CREATE TABLE u (id INT PRIMARY KEY)")
	b.wantCount("SELECT count(*) FROM t", 1)
	a.exec("INSERT INTO t VALUES (2)") // out of BEGIN: autocommitted
	a.exec("ROLLBACK")
	b.wantCount("SELECT count(*) FROM t", 2)

	a.exec("BEGIN")
	a.exec("INSERT INTO t VALUES (3)")
	a.exec("DROP TABLE t") // commits the INSERT, then drops the table it wrote
	b.wantCount("SELECT count(*) FROM information_schema.tables WHERE table_name = 't'", 0)
}

// A write–write conflict is ER_LOCK_DEADLOCK naming the table; the loser's transaction is rolled back,
// the winner's write stays.
func TestTransactionWriteConflict(t *testing.T) {
	_, open := txServer(t)
	db := open()
	a, b := newTxSession(t, db), newTxSession(t, db)
	a.exec("CREATE TABLE acct (id INT PRIMARY KEY, v INT)")
	a.exec("INSERT INTO acct VALUES (1, 100)")

	a.exec("BEGIN")
	b.exec("BEGIN")
	a.exec("UPDATE acct SET v = v + 1 WHERE id = 1")
	err := b.fails("UPDATE acct SET v = v + 2 WHERE id = 1")
	wantConflict(t, err, "acct")
	a.exec("COMMIT")
	b.fails("SELECT * FROM acct") // b's transaction was rolled back: it says so until ROLLBACK
	b.exec("ROLLBACK")
	b.wantCount("SELECT v FROM acct WHERE id = 1", 101)

	// Two inserts of one key: the later COMMIT loses.
	a.exec("BEGIN")
	b.exec("BEGIN")
	a.exec("INSERT INTO acct VALUES (2, 1)")
	b.exec("INSERT INTO acct VALUES (2, 2)")
	a.exec("COMMIT")
	wantConflict(t, b.fails("COMMIT"), "acct")
	b.wantCount("SELECT v FROM acct WHERE id = 2", 1)
	b.exec("INSERT INTO acct VALUES (3, 3)") // out of the failed transaction: autocommitted
	a.wantCount("SELECT count(*) FROM acct", 3)
}

func wantConflict(t *testing.T, err error, table string) {
	t.Helper()
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1213 || string(me.SQLState[:]) != "40001" || !strings.Contains(me.Message, "`"+table+"`") && !strings.Contains(me.Message, `"`+table+`"`) {
		t.Fatalf("want ER_LOCK_DEADLOCK (1213, 40001) naming %s, got %v", table, err)
	}
}

// A statement that fails after it wrote in a transaction rolls the whole transaction back (DuckDB
// cannot undo one statement); the session is told so until ROLLBACK, and COMMIT keeps nothing.
func TestTransactionFailedWriteRollsBack(t *testing.T) {
	_, open := txServer(t)
	db := open()
	a := newTxSession(t, db)
	a.exec("CREATE TABLE t (id INT PRIMARY KEY)")
	a.exec("BEGIN")
	a.exec("INSERT INTO t VALUES (1)")
	a.fails("INSERT INTO t VALUES (2), (1)")
	if err := a.fails("SELECT count(*) FROM t"); !strings.Contains(err.Error(), "rolled back") {
		t.Fatalf("a read after the failure: %v", err)
	}
	if err := a.fails("COMMIT"); !strings.Contains(err.Error(), "rolled back") {
		t.Fatalf("COMMIT after the failure: %v", err)
	}
	a.wantCount("SELECT count(*) FROM t", 0)
}

// A client that disconnects in a transaction, or is killed, has it rolled back.
func TestTransactionDisconnectRollsBack(t *testing.T) {
	e, open := txServer(t)
	b := newTxSession(t, open())
	b.exec("CREATE TABLE t (id INT PRIMARY KEY)")
	for _, end := range []string{"disconnect", "kill"} {
		one := open()
		one.SetMaxOpenConns(1)
		a := newTxSession(t, one)
		a.exec("BEGIN")
		a.exec("INSERT INTO t VALUES (1)")
		var id int64
		if err := a.conn.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		if end == "kill" {
			if _, err := b.conn.ExecContext(context.Background(), fmt.Sprintf("KILL %d", id)); err != nil {
				t.Fatal(err)
			}
		} else {
			_ = a.conn.Raw(func(dc any) error { return dc.(interface{ Close() error }).Close() })
		}
		deadline := time.Now().Add(10 * time.Second)
		for open := 1; open > 0; {
			open = 0
			e.Provider.open.Range(func(any, any) bool { open++; return true })
			if time.Now().After(deadline) {
				t.Fatalf("%s: the transaction is still open", end)
			}
			time.Sleep(20 * time.Millisecond)
		}
		b.wantCount("SELECT count(*) FROM t", 0)
	}
}

// SAVEPOINT: ROLLBACK TO succeeds when there is nothing to undo, and says why it cannot otherwise.
func TestTransactionSavepoints(t *testing.T) {
	_, open := txServer(t)
	a := newTxSession(t, open())
	a.exec("CREATE TABLE t (id INT PRIMARY KEY)")
	a.exec("BEGIN")
	a.exec("SAVEPOINT sp")
	a.wantCount("SELECT count(*) FROM t", 0)
	a.exec("ROLLBACK TO SAVEPOINT sp")
	a.exec("INSERT INTO t VALUES (1)")
	if err := a.fails("ROLLBACK TO SAVEPOINT sp"); !strings.Contains(err.Error(), "only ROLLBACK of the whole transaction") {
		t.Fatalf("ROLLBACK TO after a write: %v", err)
	}
	var me *mysql.MySQLError
	if err := a.fails("ROLLBACK TO SAVEPOINT nosuch"); !errors.As(err, &me) || me.Number != 1305 {
		t.Fatalf("an unknown savepoint: %v", err)
	}
	a.exec("RELEASE SAVEPOINT sp")
	a.wantCount("SELECT count(*) FROM t", 1) // the failed ROLLBACK TO left the transaction as it was
	a.exec("COMMIT")
	a.wantCount("SELECT count(*) FROM t", 1)
}

// In-process sessions have transactions too: database/sql's Tx over Engine.DB, and a Context's session.
func TestTransactionInProcess(t *testing.T) {
	e, err := Open(MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	db := e.DB()
	if _, err := db.Exec("CREATE TABLE t (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("INSERT INTO t VALUES (1), (2)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil || n != 2 {
		t.Fatalf("inside the transaction: %d, %v", n, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil || n != 0 {
		t.Fatalf("after ROLLBACK: %d, %v", n, err)
	}

	ctx := e.NewContext(context.Background())
	for _, q := range []string{"BEGIN", "INSERT INTO t VALUES (3)", "COMMIT", "BEGIN", "INSERT INTO t VALUES (4)"} {
		if _, _, err := e.Query(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	other := e.NewContext(context.Background())
	if _, rows, err := e.Query(other, "SELECT count(*) FROM t"); err != nil || rows[0][0] != int64(1) {
		t.Fatalf("another session sees %v, %v", rows, err)
	}
	// Engine.Close (deferred) rolls back what an in-process session left open.
}

// ALTER TABLE … DISABLE/ENABLE KEYS, which mysqldump writes, is accepted.
func TestDisableKeysAccepted(t *testing.T) {
	e, err := Open(MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := e.NewContext(context.Background())
	for _, q := range []string{"CREATE TABLE t (a INT PRIMARY KEY)", "ALTER TABLE t DISABLE KEYS", "ALTER TABLE t ENABLE KEYS"} {
		if _, _, err := e.Query(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
