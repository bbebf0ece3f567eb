package engine

import (
	"context"
	gosql "database/sql"
	"database/sql/driver"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"
)

// BenchmarkInsert measures INSERT throughput into a DuckDB-file-backed table through GMS:
//
//	go test -run '^$' -bench Insert -benchtime 10x ./engine/
//
// multi_row_10k: one INSERT ... VALUES statement of 10,000 rows (parsing included);
// insert_select_100k: INSERT INTO ... SELECT of 100,000 rows (the storage path alone).
func BenchmarkInsert(b *testing.B) {
	e, err := Open(filepath.Join(b.TempDir(), "bench.duckdb"))
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	q := func(query string) {
		if _, _, err := e.Query(e.NewContext(context.Background()), query); err != nil {
			b.Fatal(err)
		}
	}
	q("CREATE TABLE t (id BIGINT PRIMARY KEY, y INT, x DOUBLE, s VARCHAR(20))")
	q("CREATE TABLE src (id BIGINT PRIMARY KEY, y INT, x DOUBLE, s VARCHAR(20))")
	if _, err := e.DuckDB.Exec(`INSERT INTO ldpsql.src SELECT range, (range % 10)::INTEGER, range / 3.0, 'row ' || range FROM range(100000)`); err != nil {
		b.Fatal(err)
	}
	next, batch := int64(0), 0
	b.Run("multi_row_10k", func(b *testing.B) {
		const rows = 10_000
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			var sb strings.Builder
			sb.WriteString("INSERT INTO t VALUES ")
			for r := 0; r < rows; r++ {
				if r > 0 {
					sb.WriteString(",")
				}
				fmt.Fprintf(&sb, "(%d, %d, %d.5, 'row %d')", next, next%10, next, next)
				next++
			}
			stmt := sb.String()
			b.StartTimer()
			q(stmt)
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("insert_select_100k", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			batch++
			q(fmt.Sprintf("INSERT INTO t SELECT id + %d, y, x, s FROM src", 1_000_000_000*batch))
		}
		b.ReportMetric(100_000*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}

// BenchmarkPointLookup1M measures WHERE id = ? on 1M rows with the primary-key pushdown (the filter runs
// in DuckDB on its ART index) against the same table without a key (GMS scans and filters every row, as
// every table did before the pushdown):
//
//	go test -run '^$' -bench PointLookup1M ./engine/
func BenchmarkPointLookup1M(b *testing.B) {
	e, err := Open(MemoryPath)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	for _, ddl := range []string{
		"CREATE TABLE keyed (id BIGINT PRIMARY KEY, v INT)",
		"CREATE TABLE unkeyed (id BIGINT, v INT)",
	} {
		if _, _, err := e.Query(e.NewContext(context.Background()), ddl); err != nil {
			b.Fatal(err)
		}
	}
	for _, tbl := range []string{"keyed", "unkeyed"} {
		if _, err := e.DuckDB.Exec(`INSERT INTO ldpsql.` + tbl + ` SELECT range, (range % 1000)::INTEGER FROM range(1000000)`); err != nil {
			b.Fatal(err)
		}
	}
	for _, tc := range []struct{ name, table string }{{"primary_key", "keyed"}, {"full_scan", "unkeyed"}} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				id := (i * 7919) % 1_000_000
				_, rows, err := e.Query(e.NewContext(context.Background()), fmt.Sprintf("SELECT v FROM %s WHERE id = %d", tc.table, id))
				if err != nil || len(rows) != 1 {
					b.Fatalf("%v %v", rows, err)
				}
			}
		})
	}
}

// BenchmarkCollatedKeyLookup measures WHERE name = ? on 10^5 rows whose primary key is a
// case-insensitive VARCHAR (utf8mb4_0900_ai_ci), against the same key declared COLLATE utf8mb4_bin (a
// plain ART lookup):
//
//	go test -run '^$' -bench CollatedKeyLookup ./engine/
//
// ascii: every key is printable ASCII, and the lookup is answered from the key's index on
// lower(strip_accents(name)); accented_1pct: 1% of the keys have an accent, which DuckDB finds by a scan
// for every lookup (index.go, collatedPoint); accented_value: the value looked up has an accent, so
// every row is read and compared by GMS's collation.
func BenchmarkCollatedKeyLookup(b *testing.B) {
	e, err := Open(MemoryPath)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	const rows = 100_000
	for _, ddl := range []string{
		"CREATE TABLE ascii (name VARCHAR(40) PRIMARY KEY, v INT)",
		"CREATE TABLE accented (name VARCHAR(40) PRIMARY KEY, v INT)",
		"CREATE TABLE bin (name VARCHAR(40) COLLATE utf8mb4_bin PRIMARY KEY, v INT)",
	} {
		if _, _, err := e.Query(e.NewContext(context.Background()), ddl); err != nil {
			b.Fatal(err)
		}
	}
	for tbl, key := range map[string]string{
		"ascii":    "'User ' || range",
		"bin":      "'User ' || range",
		"accented": "CASE WHEN range % 100 = 0 THEN 'Üser ' ELSE 'User ' END || range",
	} {
		if _, err := e.DuckDB.Exec(fmt.Sprintf(`INSERT INTO ldpsql.%s SELECT %s, range::INTEGER FROM range(%d)`, tbl, key, rows)); err != nil {
			b.Fatal(err)
		}
	}
	for _, tc := range []struct{ name, table, prefix string }{
		{"ascii", "ascii", "user "}, {"accented_1pct", "accented", "USER "}, {"accented_value", "ascii", "Úser "}, {"binary_key", "bin", "User "},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				id := (i*7919)%rows | 1 // odd: never one of the accented keys
				_, got, err := e.Query(e.NewContext(context.Background()), fmt.Sprintf("SELECT v FROM %s WHERE name = '%s%d'", tc.table, tc.prefix, id))
				if err != nil || len(got) != 1 {
					b.Fatalf("%v %v", got, err)
				}
			}
		})
	}
}

// BenchmarkLedgerStatements charges as bench load's charged statements do: 16 goroutines at once, each
// call 10 releases of 10 neighbouring units of 10,000, already charged once, in 'charge' mode; the
// background fold of the releases into ldp_budget_units (ledger_fold.go) runs during it. ns/op is per call; the transactions per call show the grouping.
//
//	go test -run '^$' -bench LedgerStatements -benchtime 2000x ./engine/
func BenchmarkLedgerStatements(b *testing.B) {
	e, err := Open(filepath.Join(b.TempDir(), "bench.duckdb"))
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	tbl := TableRef{Database: "ldpsql", Table: "people"}
	if err := e.Ledger.SetBudget(ctx, Budget{TableRef: tbl, EpsTotal: 1e12, Mode: BudgetCharge, UnitColumns: []string{"id"}}); err != nil {
		b.Fatal(err)
	}
	const units, perCall, clients = 10_000, 10, 16
	release := make([]byte, 8)
	call := func(lo int) []Charge {
		out := make([]Charge, perCall)
		for i := range out {
			unit, _ := UnitKey([]sql.Type{types.Int64}, int64(lo+i))
			out[i] = Charge{Table: tbl, Unit: unit, Eps: 0.5, Function: "FLIP_LABEL", Mechanism: "k-rr", Randomiser: "k-rr",
				Digest: ReleaseDigest("col(y)", "", "k-rr", "k-rr", 0.5, 10), Release: release}
		}
		return out
	}
	for lo := 0; lo < units; lo += 1000 {
		all := make([]Charge, 0, 1000)
		for k := lo; k < lo+1000; k += perCall {
			all = append(all, call(k)...)
		}
		if err := e.Ledger.Charge(ctx, "root", all); err != nil {
			b.Fatal(err)
		}
	}
	txBefore := e.Ledger.Transactions()
	b.ResetTimer()
	var wg sync.WaitGroup
	per := (b.N + clients - 1) / clients
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 1))
			for i := 0; i < per; i++ {
				if err := e.Ledger.Charge(ctx, "analyst", call(rng.IntN(units-perCall+1))); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	calls := per * clients
	b.ReportMetric(float64(calls)/b.Elapsed().Seconds(), "calls/s")
	b.ReportMetric(float64(calls)/float64(max(1, e.Ledger.Transactions()-txBefore)), "calls/tx")
}

// BenchmarkDuckDBGroupCommit measures DuckDB alone doing what the insert queue does for 8 single-row
// INSERTs: one transaction per op (BEGIN, 8 rows, COMMIT) on a file with a primary key, attached as the
// engine attaches it, with no GMS and no wire. It reports the wall time per transaction (ns/op), the
// process's CPU per transaction and the rows per second:
//
//	go test -run '^$' -bench DuckDBGroupCommit -benchtime 1000x ./engine/
//
// appender: the queue's path (appendRows) with BEGIN and COMMIT as text; appender_prepared: with them
// prepared, as the queue runs them; values: one INSERT … VALUES of 8 rows instead of the appender;
// two_connections: appender_prepared on two connections at once (b.N transactions in all), one
// appending while the other commits.
func BenchmarkDuckDBGroupCommit(b *testing.B) {
	const rows = 8
	path := filepath.Join(b.TempDir(), "bench.duckdb")
	store, err := newStoreConnector("ATTACH IF NOT EXISTS "+quoteString(path)+" AS "+StoreCatalog, "USE "+StoreCatalog, "SET threads = 1")
	if err != nil {
		b.Fatal(err)
	}
	db := gosql.OpenDB(store)
	defer db.Close()
	if _, err := db.Exec(`CREATE SCHEMA s; CREATE TABLE s.t (id BIGINT PRIMARY KEY, y INT, x DOUBLE);
		INSERT INTO s.t SELECT range, (range % 10)::INTEGER, range / 3.0 FROM range(10000); CHECKPOINT`); err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	next.Store(1_000_000)
	// commits runs n transactions on a connection of its own.
	commits := func(b *testing.B, n int, prepared, appender bool) {
		ctx := context.Background()
		var c insertConn
		if err := c.open(ctx, db); err != nil {
			b.Error(err)
			return
		}
		defer c.close()
		exec := func(stmt *gosql.Stmt, text string) error {
			if prepared {
				_, err := stmt.ExecContext(ctx)
				return err
			}
			_, err := c.conn.ExecContext(ctx, text)
			return err
		}
		for range n {
			if err := exec(c.begin, "BEGIN TRANSACTION"); err != nil {
				b.Error(err)
				return
			}
			first := next.Add(rows) - rows
			if appender {
				err = appendRows(c.conn, "s", "t", rows, func(i int) []driver.Value { return []driver.Value{first + int64(i), int32(1), 2.0} })
			} else {
				values := make([]string, rows)
				for i := range values {
					values[i] = fmt.Sprintf("(%d, 1, 2.0)", first+int64(i))
				}
				_, err = c.conn.ExecContext(ctx, "INSERT INTO s.t VALUES "+strings.Join(values, ", "))
			}
			if err == nil {
				err = exec(c.commit, "COMMIT")
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	}
	run := func(name string, conns int, prepared, appender bool) {
		b.Run(name, func(b *testing.B) {
			var before, after syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
			b.ResetTimer()
			var wg sync.WaitGroup
			for k := range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					commits(b, b.N/conns+boolInt(k < b.N%conns), prepared, appender)
				}()
			}
			wg.Wait()
			b.StopTimer()
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
			cpu := after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano()
			b.ReportMetric(float64(cpu)/1e3/float64(b.N), "CPU-µs/tx")
			b.ReportMetric(rows*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
	run("appender", 1, false, true)
	run("appender_prepared", 1, true, true)
	run("values", 1, true, false)
	run("two_connections", 2, true, true)
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}
