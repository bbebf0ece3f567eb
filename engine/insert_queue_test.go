package engine

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dolthub/vitess/go/mysql"
)

func engineTable(t *testing.T, e *Engine, name string) *Table {
	t.Helper()
	ctx := e.NewContext(context.Background())
	db, err := e.Provider.Database(ctx, DefaultDatabase)
	if err != nil {
		t.Fatal(err)
	}
	tbl, ok, err := db.(*Database).GetTableInsensitive(ctx, name)
	if err != nil || !ok {
		t.Fatalf("table %s: %v", name, err)
	}
	return tbl.(*Table)
}

// One statement's bad row (a duplicate key, a NULL in a NOT NULL column) fails the shared transaction;
// every statement is then committed alone, so only the bad ones fail and the others' rows are there.
func TestInsertQueueFailsOnlyTheBadStatement(t *testing.T) {
	e := openT(t, filepath.Join(t.TempDir(), "db.duckdb"))
	defer e.Close()
	mustQuery(t, e, "CREATE TABLE g (id BIGINT PRIMARY KEY, y INT NOT NULL)")
	mustQuery(t, e, "CREATE TABLE h (id BIGINT PRIMARY KEY)")
	mustQuery(t, e, "INSERT INTO g VALUES (1, 1)")
	g, h := engineTable(t, e, "g"), engineTable(t, e, "h")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	batch := []*groupedInsert{
		{ctx: context.Background(), t: g, rows: [][]driver.Value{{int64(2), int32(2)}}},
		{ctx: context.Background(), t: g, rows: [][]driver.Value{{int64(1), int32(9)}}}, // duplicate key
		{ctx: context.Background(), t: h, rows: [][]driver.Value{{int64(7)}, {int64(8)}}},
		{ctx: context.Background(), t: g, rows: [][]driver.Value{{int64(3), nil}}}, // NOT NULL
		{ctx: cancelled, t: g, rows: [][]driver.Value{{int64(5), int32(5)}}},       // cancelled before its commit
		{ctx: context.Background(), t: g, rows: [][]driver.Value{{int64(4), int32(4)}}},
	}
	for _, ins := range batch {
		ins.done = make(chan error, 1)
	}
	e.Provider.inserts.commitBatch(batch)
	var got []string
	for _, ins := range batch {
		err := <-ins.done
		got = append(got, fmt.Sprint(err != nil))
		if err != nil && ins.ctx.Err() == nil && !strings.Contains(err.Error(), "constraint") {
			t.Errorf("rows %v: %v, want a constraint error", ins.rows, err)
		}
	}
	if s := strings.Join(got, " "); s != "false true false true true false" {
		t.Fatalf("failed: %s, want false true false true true false (only the duplicate, the NULL and the cancelled)", s)
	}
	if r := rowsString(mustQuery(t, e, "SELECT id, y FROM g ORDER BY id")); r != "1 1\n2 2\n4 4\n" {
		t.Fatalf("g:\n%s", r)
	}
	if r := rowsString(mustQuery(t, e, "SELECT id FROM h ORDER BY id")); r != "7\n8\n" {
		t.Fatalf("h:\n%s", r)
	}
}

// A transaction of the queue appends through one appender per table, however many statements (each
// with a Table value of its own) it holds.
func TestInsertQueueOneAppenderPerTable(t *testing.T) {
	e := openT(t, MemoryPath)
	defer e.Close()
	mustQuery(t, e, "CREATE TABLE g (id BIGINT PRIMARY KEY)")
	mustQuery(t, e, "CREATE TABLE h (id BIGINT PRIMARY KEY)")
	var batch []*groupedInsert
	for i, name := range []string{"g", "h", "g", "g", "h"} {
		batch = append(batch, &groupedInsert{ctx: context.Background(), t: engineTable(t, e, name),
			rows: [][]driver.Value{{int64(i)}}, done: make(chan error, 1)})
	}
	before := e.Provider.inserts.appenders.Load()
	e.Provider.inserts.commitBatch(batch)
	for _, ins := range batch {
		if err := <-ins.done; err != nil {
			t.Fatal(err)
		}
	}
	if n := e.Provider.inserts.appenders.Load() - before; n != 2 {
		t.Fatalf("%d appenders for 5 statements into 2 tables, want 2", n)
	}
	if g, h := rowsString(mustQuery(t, e, "SELECT id FROM g ORDER BY id")), rowsString(mustQuery(t, e, "SELECT id FROM h ORDER BY id")); g != "0\n2\n3\n" || h != "1\n4\n" {
		t.Fatalf("g:\n%sh:\n%s", g, h)
	}
}

// Concurrent single-row INSERTs in autocommit commit in shared transactions; every one acknowledged is
// in the file after a restart, and each duplicate fails alone with MySQL's 1062.
func TestConcurrentAutocommitInserts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.duckdb")
	e := openT(t, path)
	mustQuery(t, e, "CREATE TABLE w (id BIGINT PRIMARY KEY, writer INT, v VARCHAR(20))")
	const writers, each = 8, 60
	before := e.InsertTransactions()
	var wg sync.WaitGroup
	errs := make([][]error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := w*each + i
				if i == each/2 {
					id = w * each // a duplicate of this writer's first row
				}
				_, _, err := e.Query(e.NewContext(context.Background()), fmt.Sprintf("INSERT INTO w VALUES (%d, %d, 'row %d')", id, w, id))
				errs[w] = append(errs[w], err)
			}
		}()
	}
	wg.Wait()
	for w := range writers {
		for i, err := range errs[w] {
			var sqlErr *mysql.SQLError
			switch {
			case i == each/2 && (!errors.As(err, &sqlErr) || sqlErr.Num != mysql.ERDupEntry):
				t.Errorf("writer %d's duplicate: %v, want error 1062", w, err)
			case i != each/2 && err != nil:
				t.Errorf("writer %d, row %d: %v", w, i, err)
			}
		}
	}
	tx := e.InsertTransactions() - before
	if tx == 0 {
		t.Fatal("no INSERT went through the insert queue")
	}
	t.Logf("%d statements in %d shared transactions", writers*each, tx)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openT(t, path)
	defer e.Close()
	want := writers * (each - 1)
	if r := mustQuery(t, e, "SELECT count(*), count(DISTINCT id), sum(CASE WHEN v = concat('row ', id) THEN 1 ELSE 0 END) FROM w"); fmt.Sprint(r[0]) != fmt.Sprintf("[%d %d %d]", want, want, want) {
		t.Fatalf("after restart: %v rows, want %d", r, want)
	}
}

// An INSERT in a client's transaction, or one larger than maxGroupedRows, is not grouped: it writes in
// its own (or the client's) transaction, all or nothing.
func TestInsertsThatAreNotGrouped(t *testing.T) {
	e := openT(t, MemoryPath)
	defer e.Close()
	mustQuery(t, e, "CREATE TABLE n (id INT PRIMARY KEY, y INT)")
	before := e.InsertTransactions()
	ctx := e.NewContext(context.Background())
	for _, q := range []string{"BEGIN", "INSERT INTO n VALUES (1, 1)", "ROLLBACK"} {
		if _, _, err := e.Query(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var values []string
	for i := range maxGroupedRows + 10 {
		values = append(values, fmt.Sprintf("(%d, %d)", i+10, i))
	}
	bad := "INSERT INTO n VALUES " + strings.Join(values, ", ") + ", (10, 0)" // its last row repeats its first
	if _, _, err := e.Query(ctx, bad); err == nil || !strings.Contains(err.Error(), "Duplicate entry") {
		t.Fatalf("large insert with a duplicate: %v", err)
	}
	mustQuery(t, e, "INSERT INTO n VALUES "+strings.Join(values, ", "))
	if tx := e.InsertTransactions() - before; tx != 0 {
		t.Fatalf("%d insert-queue transactions, want 0", tx)
	}
	if r := mustQuery(t, e, "SELECT count(*), min(id) FROM n"); fmt.Sprint(r[0]) != fmt.Sprintf("[%d 10]", maxGroupedRows+10) {
		t.Fatalf("rows: %v", r)
	}
	// A grouped statement that also deletes (REPLACE) writes its held rows first, in order.
	mustQuery(t, e, "REPLACE INTO n VALUES (10, 99), (11, 98)")
	if r := rowsString(mustQuery(t, e, "SELECT id, y FROM n WHERE id IN (10, 11) ORDER BY id")); r != "10 99\n11 98\n" {
		t.Fatalf("after REPLACE:\n%s", r)
	}
}

func TestWithDuckDBThreads(t *testing.T) {
	e, err := Open(MemoryPath, WithDuckDBThreads(1))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var threads int
	if err := e.DuckDB.QueryRow("SELECT current_setting('threads')").Scan(&threads); err != nil || threads != 1 {
		t.Fatalf("threads = %d (%v), want 1", threads, err)
	}
	d, err := Open(MemoryPath, WithDuckDBThreads(0))
	if err != nil {
		t.Fatalf("threads 0 must leave DuckDB's default: %v", err)
	}
	defer d.Close()
}
