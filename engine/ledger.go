package engine

import (
	"context"
	"crypto/sha256"
	gosql "database/sql"
	"database/sql/driver"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// The privacy ledger.
//
// A table becomes protected when a DBA gives it a budget (CALL ldp_set_budget). Its rows are grouped into
// privacy units, identified by a unit key (the values of the table's unit columns: its primary key unless
// the DBA named others). Every unit has the table's per-unit budget ε_total. A release of a unit's data
// (one LDP_ENCODE, FLIP_LABEL or LDP_LAPLACE value, one row's bit or label in PRIVATE_ACCURACY or
// RR_FREQUENCY — a private validation's included —, one ldp_privatize row) charges its ε to the unit,
// and the charge is recorded before the release leaves the engine. A statement whose charges would take
// any unit over its budget fails and releases nothing.
//
// In the table's default mode, 'memoise', a release is recorded with the digest of what was released
// (ReleaseDigest: the released column(s) or expression, the row within its unit, the mechanism, the
// randomiser, ε, K and the mechanism's parameters — never the value) and its bytes; asking again for
// the same release of the same unit returns the recorded release: no new noise, no new charge (repeating
// a release reveals nothing new). Because the value is not in the key, whether a release is memoised
// tells nothing about the data (a value that changed since is not released again). In 'charge' mode
// every release draws fresh noise and is charged.
//
// The ledger lives in three catalog tables, readable by a DBA only: ldp_budget (one row per protected
// table), ldp_budget_units (the ε each unit has spent, as of the last fold of the releases into it:
// ledger_fold.go; reads add the releases since) and ldp_releases (every release: what, when, by whom, at
// which ε, with the bytes that memoisation returns).
//
// Charging is atomic and committed in groups: one engine process owns the DuckDB file, and the Charge
// calls that arrive while a transaction of charges commits wait in a queue, to be checked and written
// together in the next one (group commit: one commit, one WAL flush, for all of them; while several
// clients charge, the committer waits ledgerLinger for more before each transaction). The checks run
// in the order the calls arrived, each against what its units have spent (kept in memory, read once per
// table) plus what the calls before it in the same transaction charge them,
// so concurrent statements can never over-spend a unit; a call that would take a unit over its budget
// is refused alone and writes nothing. The transaction only appends the releases (an appender); the
// fold counts them into ldp_budget_units later. A call returns
// only once the transaction holding its charges has committed, or failed, and then every call in it
// fails and nothing of theirs may be released.
//
// A statement that writes its releases into a table commits their charges with its write, in one
// transaction on the ledger's connection, instead of through the queue: see ledger_tx.go.
//
// The Go API, for code that releases data outside the SQL functions (the classifier's private
// validation, for example):
//
//	b, ok := e.Ledger.Budget(engine.TableRef{Database: "ldpsql", Table: "t"}) // is the table protected?
//	digest := engine.ReleaseDigest("col(y)", rowKey, "k-rr", "k-rr", eps, 2) // what is released, not its value
//	memo, _ := e.Ledger.Memo(ctx, b.TableRef, []engine.MemoKey{{Unit: unit, Digest: digest}}) // memoise mode only
//	err := e.Ledger.Charge(ctx, releasedBy, []engine.Charge{{Table: b.TableRef, Unit: unit, Eps: eps,
//		Function: "train_noisy_classifier", Mechanism: "k-rr", Randomiser: "warner", Digest: digest, Release: bytes}})
//
// Charge before anything derived from the releases is returned; a *BudgetError means nothing may be
// returned. A unit's key is UnitKey(its unit columns' types, their values...).

// Budget modes (ldp_budget.mode).
const (
	// BudgetMemoise returns the recorded release when the same release (the same column or expression
	// of the same row, through the same mechanism at the same ε: ReleaseDigest) is asked for again, and
	// charges nothing for it. The default.
	BudgetMemoise = "memoise"
	// BudgetCharge draws fresh noise for every release and charges every one.
	BudgetCharge = "charge"
)

// budgetSlack absorbs floating-point rounding when charges add up to exactly the budget (0.1 + 0.2).
const budgetSlack = 1e-9

const createLedgerTables = `
CREATE TABLE IF NOT EXISTS ` + CatalogSchema + `.ldp_budget (
	db VARCHAR NOT NULL,
	table_name VARCHAR NOT NULL,
	eps_total DOUBLE NOT NULL,
	mode VARCHAR NOT NULL,
	unit_columns VARCHAR NOT NULL,
	set_by VARCHAR NOT NULL,
	set_at TIMESTAMP NOT NULL,
	PRIMARY KEY (db, table_name));
COMMENT ON COLUMN ` + CatalogSchema + `.ldp_budget.unit_columns IS 'ldpsql:{"type":"json"}';
CREATE TABLE IF NOT EXISTS ` + CatalogSchema + `.ldp_budget_units (
	db VARCHAR NOT NULL,
	table_name VARCHAR NOT NULL,
	unit_key VARCHAR NOT NULL,
	spent DOUBLE NOT NULL,
	releases BIGINT NOT NULL,
	last_release_at TIMESTAMP NOT NULL);
CREATE TABLE IF NOT EXISTS ` + CatalogSchema + `.ldp_releases (
	id BIGINT NOT NULL,
	db VARCHAR NOT NULL,
	table_name VARCHAR NOT NULL,
	unit_key VARCHAR NOT NULL,
	function_name VARCHAR NOT NULL,
	mechanism VARCHAR NOT NULL,
	randomiser VARCHAR NOT NULL,
	eps DOUBLE NOT NULL,
	input_digest VARCHAR NOT NULL,
	released_value BLOB,
	released_by VARCHAR NOT NULL,
	released_at TIMESTAMP NOT NULL,
	memo_key BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS ` + CatalogSchema + `.budget_fold (folded_through BIGINT NOT NULL);
`

// A ledger from before the fold counted every release in ldp_budget_units as it committed: all of
// them are folded.
const initBudgetFold = `INSERT INTO ` + CatalogSchema + `.budget_fold
SELECT m FROM (SELECT coalesce(max(id), 0) AS m FROM ` + CatalogSchema + `.ldp_releases)
WHERE NOT EXISTS (SELECT 1 FROM ` + CatalogSchema + `.budget_fold)`

// LedgerTables are the catalog tables of the ledger; SQL clients other than a DBA may not read them.
var LedgerTables = []string{"ldp_budget", "ldp_budget_units", "ldp_releases"}

// TableRef names a table: its database and its name.
type TableRef struct{ Database, Table string }

func (t TableRef) String() string { return t.Database + "." + t.Table }

func (t TableRef) key() string {
	return strings.ToLower(t.Database) + "\x00" + strings.ToLower(t.Table)
}

// Budget is a protected table's privacy budget (one row of ldp_budget).
type Budget struct {
	TableRef
	// EpsTotal is every unit's budget: the most ε all releases of one unit may add up to.
	EpsTotal float64
	// Mode is BudgetMemoise or BudgetCharge.
	Mode string
	// UnitColumns identify a unit: the table's primary key unless the DBA named others.
	UnitColumns []string
	SetBy       string
	SetAt       time.Time
}

// Charge is one release to record: ε charged to one unit of a protected table.
type Charge struct {
	Table TableRef
	// Unit is the unit's key, UnitKey(the unit columns' types, their values...).
	Unit string
	// Eps is the ε of the release, > 0.
	Eps float64
	// Function, Mechanism and Randomiser describe the release for ldp_releases (e.g. "LDP_ENCODE",
	// "my_pca", "laplace"; "FLIP_LABEL", "k-rr", "k-rr").
	Function, Mechanism, Randomiser string
	// Digest is ReleaseDigest of what was released; with Unit it is the memoisation key.
	Digest string
	// Release is the released value, returned by Memo for a later identical release; nil records the
	// release without making it memoisable.
	Release []byte
}

// MemoKey identifies a memoised release: a unit and the digest of what was released (ReleaseDigest).
type MemoKey struct{ Unit, Digest string }

// ErrNotProtected is returned when charging a table that has no budget.
var ErrNotProtected = errors.New("table has no privacy budget")

// BudgetError is the error of a Charge that would take units over their budget; nothing was charged.
type BudgetError struct {
	Table TableRef
	// Over is how many units would go over their budget, of the Units the charge touched in Table.
	Over, Units int
	// Remaining is the least budget left among the units that would go over, of Total per unit.
	Remaining, Total float64
	// Largest is the largest ε the charge asked of one unit.
	Largest float64
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("ldp budget exceeded: %d of %d units of table %s would go over their budget "+
		"(remaining ε %s of %s; this statement charges up to ε %s per unit); nothing was released",
		e.Over, e.Units, e.Table, fmtEps(e.Remaining), fmtEps(e.Total), fmtEps(e.Largest))
}

func fmtEps(x float64) string {
	if math.Abs(x) < 1e-12 {
		x = 0
	}
	return strconv.FormatFloat(x, 'g', 6, 64)
}

// Ledger is the privacy-budget ledger of one engine (see the comment at the top of this file).
type Ledger struct {
	db *gosql.DB

	mu     sync.Mutex // serialises every write: a transaction of charges, SetBudget
	conn   *gosql.Conn
	nextID int64
	closed bool
	// spent is what each unit of each table charged so far has spent (by TableRef.key(), then unit),
	// as committed. It changes only under mu and spentMu both (once a transaction
	// committed, or when read), so the commit path reads it under mu alone, and
	// Check under spentMu alone, without waiting for a transaction in flight.
	spent   map[string]map[string]float64
	spentMu sync.RWMutex
	// batches counts the transactions of charges committed.
	batches int64
	// folded is the id of the last release counted in ldp_budget_units (budget_fold.folded_through, as
	// committed); the releases after it are counted on read (budgetUnitsSQL) until the next fold.
	folded      atomic.Int64
	folds       int64 // folds committed since the ledger opened
	stopFold    chan struct{}
	closeFold   sync.Once
	foldStopped chan struct{}

	queue groupCommit[*chargeRequest] // Charge calls waiting for the next transaction

	cacheMu sync.RWMutex
	budgets map[string]Budget     // by TableRef.key()
	memo    map[string]*memoIndex // memoisable releases recorded per table (memo_index.go)
}

func newLedger(db *gosql.DB) (*Ledger, error) {
	interval, err := foldInterval()
	if err != nil {
		return nil, err
	}
	if _, err := db.Exec(createLedgerTables + initBudgetFold); err != nil {
		return nil, fmt.Errorf("creating the ledger tables: %w", err)
	}
	l := &Ledger{db: db, stopFold: make(chan struct{}), foldStopped: make(chan struct{})}
	if err := l.load(); err != nil {
		return nil, err
	}
	go l.foldPeriodically(interval)
	return l, nil
}

// load reads what the ledger keeps in memory from its tables: the budgets, how many memoisable
// releases each table has (its memo index is built when first needed), the next release id; what
// units have spent is read when a table is first charged. mu is held, or the ledger is new.
func (l *Ledger) load() error {
	budgets, memo := map[string]Budget{}, map[string]*memoIndex{}
	db := l.db
	rows, err := db.Query(`SELECT db, table_name, eps_total, mode, unit_columns, set_by, set_at FROM ` + CatalogSchema + `.ldp_budget`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var b Budget
		var cols string
		if err := rows.Scan(&b.Database, &b.Table, &b.EpsTotal, &b.Mode, &cols, &b.SetBy, &b.SetAt); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(cols), &b.UnitColumns); err != nil {
			return fmt.Errorf("ldp_budget of %s: unit_columns %q: %w", b.TableRef, cols, err)
		}
		budgets[b.key()] = b
	}
	if err := rows.Err(); err != nil {
		return err
	}
	counts, err := db.Query(`SELECT db, table_name, count(*) FROM ` + CatalogSchema + `.ldp_releases WHERE released_value IS NOT NULL GROUP BY ALL`)
	if err != nil {
		return err
	}
	defer counts.Close()
	for counts.Next() {
		var t TableRef
		var n int64
		if err := counts.Scan(&t.Database, &t.Table, &n); err != nil {
			return err
		}
		memo[t.key()] = &memoIndex{n: n}
	}
	if err := counts.Err(); err != nil {
		return err
	}
	var nextID int64
	if err := db.QueryRow(`SELECT coalesce(max(id), 0) + 1 FROM ` + CatalogSchema + `.ldp_releases`).Scan(&nextID); err != nil {
		return err
	}
	l.nextID = nextID
	var folded int64
	if err := db.QueryRow(`SELECT folded_through FROM ` + CatalogSchema + `.budget_fold`).Scan(&folded); err != nil {
		return fmt.Errorf("reading the ledger's fold watermark: %w", err)
	}
	l.folded.Store(folded)
	// Best effort: reads are exact without it (ledger_fold.go), and a full disk must not stop the
	// ledger from opening.
	_ = l.foldLocked()
	l.forgetSpent() // under spentMu: Check reads the map without mu
	l.cacheMu.Lock()
	l.budgets, l.memo = budgets, memo
	l.cacheMu.Unlock()
	return nil
}

// reopenStore runs reopen (which replaces the DuckDB instance: store.go) with no transaction of
// charges running and the ledger's connection closed, then reads the ledger again from its tables: a
// transaction whose commit failed may or may not be in the file, and the file is the truth.
func (l *Ledger) reopenStore(reopen func() error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		_ = l.conn.Close()
		l.conn = nil
	}
	if err := reopen(); err != nil {
		return err
	}
	return l.load()
}

// Ledger returns the ledger of the engine this provider belongs to.
func (p *Provider) Ledger() *Ledger { return p.ledger }

// AnyProtected reports whether any table has a budget; while none has, the ledger governs nothing.
func (l *Ledger) AnyProtected() bool {
	l.cacheMu.RLock()
	defer l.cacheMu.RUnlock()
	return len(l.budgets) > 0
}

// Budget returns the budget of table t, if it is protected.
func (l *Ledger) Budget(t TableRef) (Budget, bool) {
	l.cacheMu.RLock()
	defer l.cacheMu.RUnlock()
	b, ok := l.budgets[t.key()]
	return b, ok
}

// Transactions returns how many DuckDB transactions of charges the ledger has committed since it
// opened (each holds the charges of one or more Charge calls).
func (l *Ledger) Transactions() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.batches
}

// Budgets lists every protected table's budget, by database and table.
func (l *Ledger) Budgets() []Budget {
	l.cacheMu.RLock()
	out := make([]Budget, 0, len(l.budgets))
	for _, b := range l.budgets {
		out = append(out, b)
	}
	l.cacheMu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
}

// SetBudget protects a table, or changes its budget, mode or unit columns. What its units have spent is
// kept: lowering EpsTotal below a unit's spending exhausts that unit.
func (l *Ledger) SetBudget(ctx context.Context, b Budget) error {
	if math.IsNaN(b.EpsTotal) || math.IsInf(b.EpsTotal, 0) || b.EpsTotal <= 0 {
		return fmt.Errorf("eps_total = %v must be a finite number > 0", b.EpsTotal)
	}
	if b.Mode == "" {
		b.Mode = BudgetMemoise
	}
	if b.Mode != BudgetMemoise && b.Mode != BudgetCharge {
		return fmt.Errorf("mode %q must be '%s' or '%s'", b.Mode, BudgetMemoise, BudgetCharge)
	}
	if len(b.UnitColumns) == 0 {
		return fmt.Errorf("table %s: a budget needs unit columns (the primary key, or columns the DBA names)", b.TableRef)
	}
	if b.SetAt.IsZero() {
		b.SetAt = time.Now()
	}
	b.SetAt = b.SetAt.UTC()
	cols, _ := json.Marshal(b.UnitColumns)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("the ledger is closed")
	}
	if old, ok := l.Budget(b.TableRef); ok {
		b.TableRef = old.TableRef // keep the spelling recorded first: units are charged under it
		if !strings.EqualFold(strings.Join(old.UnitColumns, "\x00"), strings.Join(b.UnitColumns, "\x00")) {
			// Units are keyed by their columns' values: other columns would start every unit afresh.
			var charged int64
			if err := l.db.QueryRowContext(ctx, `SELECT count(*) FROM (`+budgetUnitsSQL(l.folded.Load(), tableWhere(old.TableRef))+`)`).Scan(&charged); err != nil {
				return err
			}
			if charged > 0 {
				return fmt.Errorf("the unit columns of %s (%s) cannot change: %d units have been charged under them",
					old.TableRef, strings.Join(old.UnitColumns, ", "), charged)
			}
		}
	}
	if _, err := l.db.ExecContext(ctx, `INSERT OR REPLACE INTO `+CatalogSchema+`.ldp_budget VALUES (?, ?, ?, ?, ?, ?, ?)`,
		b.Database, b.Table, b.EpsTotal, b.Mode, string(cols), b.SetBy, b.SetAt); err != nil {
		return err
	}
	l.cacheMu.Lock()
	l.budgets[b.key()] = b
	l.cacheMu.Unlock()
	return nil
}

// Memo returns the recorded releases of the keys asked for in table t (the first recorded, when a unit's
// value was released more than once in 'charge' mode). Keys without one are absent from the map.
func (l *Ledger) Memo(ctx context.Context, t TableRef, keys []MemoKey) (map[MemoKey][]byte, error) {
	out := map[MemoKey][]byte{}
	b, ok := l.Budget(t)
	if !ok || len(keys) == 0 {
		return out, nil
	}
	idx, err := l.memoIndex(ctx, b.TableRef)
	if err != nil || idx == nil {
		return out, err
	}
	want := make(map[MemoKey]bool, len(keys))
	ids := make([]int64, 0, len(keys))
	l.cacheMu.RLock()
	for _, k := range keys {
		if want[k] {
			continue
		}
		if id, ok := idx.lookup(memoHash(k.Unit, k.Digest)); ok {
			want[k] = true
			ids = append(ids, id)
		}
	}
	l.cacheMu.RUnlock()
	if len(ids) == 0 {
		return out, nil // none was ever recorded: no need to ask DuckDB
	}
	// The first release of each key, read where it lies: ids grow with time, so DuckDB's min/max of id
	// per row group skips every row group without one of them, however many releases there are.
	for _, r := range idRanges(ids) {
		rows, err := l.db.QueryContext(ctx, fmt.Sprintf(`SELECT unit_key, input_digest, released_value FROM %s.ldp_releases
			WHERE id BETWEEN %d AND %d AND id IN (SELECT unnest(?::BIGINT[])) AND db = ? AND table_name = ?`, CatalogSchema, r.lo, r.hi),
			r.ids, b.Database, b.Table)
		if err != nil {
			return nil, fmt.Errorf("ldp ledger: looking up memoised releases: %w", err)
		}
		for rows.Next() {
			var k MemoKey
			var rel []byte
			if err := rows.Scan(&k.Unit, &k.Digest, &rel); err != nil {
				rows.Close()
				return nil, err
			}
			if want[k] && rel != nil {
				out[k] = rel
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Spent returns what each of units has spent in table t (0 for a unit never charged).
func (l *Ledger) Spent(ctx context.Context, t TableRef, units []string) (map[string]float64, error) {
	out := make(map[string]float64, len(units))
	for _, u := range units {
		out[u] = 0
	}
	b, ok := l.Budget(t)
	if !ok {
		return out, nil
	}
	rows, err := l.db.QueryContext(ctx, `SELECT unit_key, spent FROM (`+budgetUnitsSQL(l.folded.Load(),
		tableWhere(b.TableRef)+` AND unit_key IN (SELECT unnest($1::VARCHAR[]))`)+`)`, units)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var u string
		var s float64
		if err := rows.Scan(&u, &s); err != nil {
			return nil, err
		}
		out[u] = s
	}
	return out, rows.Err()
}

// Charge records releases: it charges every charge's ε to its unit and records the release in
// ldp_releases, durably, or, when any unit would go over its table's budget, charges nothing and returns
// a *BudgetError. Every table charged must be protected. It returns once the DuckDB transaction holding
// the charges has committed (nil) or failed (an error: nothing of this call was charged, so nothing
// derived from the releases may be returned).
//
// Concurrent calls are committed together (group commit): calls that arrive while a transaction
// commits wait in a queue, and the next transaction checks and writes all of them. Each call stays all
// or nothing against its own units' budgets: the calls of a transaction are checked in the order they
// arrived, each against what its units have spent plus what the calls before it in the same
// transaction charge them, so two calls can never together take a unit over its budget, and a call
// refused for its budget does not stop the others. When the transaction fails, every call in it fails.
func (l *Ledger) Charge(ctx context.Context, releasedBy string, charges []Charge) error {
	if len(charges) == 0 {
		return nil
	}
	req, err := l.request(ctx, releasedBy, charges)
	if err != nil {
		return err
	}
	l.queue.add(req, l.commitQueued)
	// Wait even when ctx is done: the charge may be in a transaction already, and the caller must not
	// release anything before knowing whether it committed. A transaction takes milliseconds.
	return <-req.done
}

// ledgerLinger is how long the ledger's committer waits for more Charge calls before a transaction, when
// the one before held more than one (several clients). A transaction costs about 1.4 ms of CPU whatever
// it holds (BEGIN, the appender's flush, COMMIT), and on 2 cores with 16 clients the calls that arrive
// during one were 4.6–5.4: 0.5 ms (the insert queue's groupLinger) changed neither that nor the CPU per
// statement; 2 ms raised it to 6.7–7.1 and cut the CPU per charged statement by 3–10 % (bench load
// --clients 16 --mix flip_label,rr_frequency,laplace), with 4 clients 1.7–1.8 → 2.6–2.8 per
// transaction and 8–19 % less CPU. A lone client never waits.
const ledgerLinger = 2 * time.Millisecond

// chargeRequest is one Charge call waiting in the commit queue.
type chargeRequest struct {
	ctx        context.Context
	releasedBy string
	charges    []Charge
	tables     []TableRef // of each charge: its table as ldp_budget spells it
	done       chan error // receives the call's result, once
}

// unitRef names a unit of a protected table: TableRef.key() and the unit's key.
type unitRef struct{ table, unit string }

// commitQueued commits the queued calls, a transaction at a time, until the queue is empty. One runs
// at a time (groupCommit); it takes the queue only once it holds mu, so the calls that arrive while a
// transaction commits all join the next one. When the transaction before held more than one call, it
// first waits ledgerLinger (without mu, so a write committing its own charges is not held up) for the
// calls still on their way.
func (l *Ledger) commitQueued() {
	for {
		l.queue.linger(ledgerLinger)
		l.mu.Lock()
		batch := l.queue.take()
		if batch == nil {
			l.mu.Unlock()
			return
		}
		l.commitBatch(batch)
		l.mu.Unlock()
	}
}

// commitBatch checks the calls of batch against their budgets and commits those that fit in one DuckDB
// transaction, answering every call. mu is held.
func (l *Ledger) commitBatch(batch []*chargeRequest) {
	if l.closed {
		for _, r := range batch {
			r.done <- errLedgerClosed
		}
		return
	}
	if err := l.openConn(); err != nil {
		for _, r := range batch {
			r.done <- fmt.Errorf("ldp ledger: %w; nothing was released", err)
		}
		return
	}
	var admitted []*chargeRequest
	batchEps := map[unitRef]float64{} // what the admitted calls charge each unit, in the order they were admitted
	var order []unitRef               // the units charged, in the order first charged
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.done <- fmt.Errorf("ldp ledger: %w; nothing was released", err)
			continue
		}
		sums, err := l.checkBudgets(r, batchEps, l.spentOf)
		if err != nil {
			r.done <- err
			continue
		}
		for i, c := range r.charges {
			u := unitRef{r.tables[i].key(), c.Unit}
			if _, seen := batchEps[u]; !seen {
				order = append(order, u)
				batchEps[u] = 0
			}
		}
		for u, eps := range sums {
			batchEps[u] += eps
		}
		admitted = append(admitted, r)
	}
	if len(admitted) == 0 {
		return
	}
	n, err := l.writeBatch(admitted)
	if err != nil {
		l.forgetSpent() // whether a failed COMMIT left anything behind is for DuckDB's record to say
		if _, rbErr := l.conn.ExecContext(context.Background(), "ROLLBACK"); rbErr != nil && !strings.Contains(rbErr.Error(), "no transaction is active") {
			// The connection is in an unknown state: start afresh next time.
			_ = l.conn.Close()
			l.conn = nil
		}
		for _, r := range admitted {
			with := ""
			if len(admitted) > 1 {
				with = fmt.Sprintf(" (in one transaction with %d other calls' %d)", len(admitted)-1, n-len(r.charges))
			}
			r.done <- fmt.Errorf("ldp ledger: charging %d releases%s: %w; nothing was released", len(r.charges), with, err)
		}
		return
	}
	l.committed(admitted, order, batchEps, n)
	for _, r := range admitted {
		r.done <- nil
	}
}

// committed brings the ledger's memory up to date after a transaction holding the admitted calls'
// charges (n releases) committed. mu is held.
func (l *Ledger) committed(admitted []*chargeRequest, order []unitRef, batchEps map[unitRef]float64, n int) {
	l.nextID += int64(n)
	l.batches++
	l.spentMu.Lock()
	for _, u := range order {
		l.spent[u.table][u.unit] += batchEps[u]
	}
	l.spentMu.Unlock()
	l.cacheMu.Lock()
	id := l.nextID - int64(n) // the ids writeCharges gave the releases, in this order
	for _, r := range admitted {
		for i, c := range r.charges {
			if c.Release != nil {
				k := r.tables[i].key()
				x := l.memo[k]
				if x == nil {
					x = &memoIndex{}
					l.memo[k] = x
				}
				x.add(memoHash(c.Unit, c.Digest), id)
			}
			id++
		}
	}
	l.cacheMu.Unlock()
}

// checkBudgets checks one call's charges against its units' budgets: what each unit has spent, plus
// what the calls admitted before it in the same transaction charge it (batchEps), plus what this call
// charges it, must be within the table's budget. It returns what the call charges each unit, or the
// *BudgetError of the first table (by name) with a unit that would go over. spentOf gives what the
// units of a table have spent: l.spentOf where mu is held, committedSpent where spentMu is.
func (l *Ledger) checkBudgets(r *chargeRequest, batchEps map[unitRef]float64, spentOf func(TableRef) (map[string]float64, error)) (map[unitRef]float64, error) {
	sums := map[unitRef]float64{}
	tables := map[string]TableRef{}
	for i, c := range r.charges {
		u := unitRef{r.tables[i].key(), c.Unit}
		sums[u] += c.Eps
		tables[u.table] = r.tables[i]
	}
	spent := map[string]map[string]float64{}
	checks := map[string]*BudgetError{}
	for k, t := range tables {
		b, ok := l.Budget(t)
		if !ok {
			return nil, fmt.Errorf("ldp ledger: %w: %s", ErrNotProtected, t)
		}
		var err error
		if spent[k], err = spentOf(t); err != nil {
			return nil, fmt.Errorf("ldp ledger: reading what the units of %s have spent: %w; nothing was released", t, err)
		}
		checks[k] = &BudgetError{Table: t, Total: b.EpsTotal, Remaining: math.Inf(1)}
	}
	for u, eps := range sums {
		e := checks[u.table]
		e.Units++
		e.Largest = math.Max(e.Largest, eps)
		before := spent[u.table][u.unit] + batchEps[u]
		if before+eps > e.Total+budgetSlack {
			e.Over++
			e.Remaining = math.Min(e.Remaining, math.Max(e.Total-before, 0))
		}
	}
	var refused *BudgetError
	for k, e := range checks {
		if e.Over > 0 && (refused == nil || k < refused.Table.key()) {
			refused = e
		}
	}
	if refused != nil {
		return nil, refused
	}
	return sums, nil
}

// spentOf returns what the units of protected table t have spent, read (budgetUnitsSQL) the first time and kept up to date by every commit since (mu is held): checking a charge costs no query,
// however large the ledger has grown.
func (l *Ledger) spentOf(t TableRef) (map[string]float64, error) {
	if m, ok := l.spent[t.key()]; ok {
		return m, nil
	}
	rows, err := l.conn.QueryContext(context.Background(), `SELECT unit_key, spent FROM (`+budgetUnitsSQL(l.folded.Load(), tableWhere(t))+`)`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	m := map[string]float64{}
	for rows.Next() {
		var u string
		var s float64
		if err := rows.Scan(&u, &s); err != nil {
			return nil, err
		}
		m[u] += s
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	l.spentMu.Lock()
	l.spent[t.key()] = m
	l.spentMu.Unlock()
	return m, nil
}

// errSpentNotRead is committedSpent's: the table's units have not been read yet.
var errSpentNotRead = errors.New("not read yet")

// committedSpent is spentOf for a caller that holds spentMu (read) and not mu: what the units of t
// have spent as far as committed transactions say, or errSpentNotRead.
func (l *Ledger) committedSpent(t TableRef) (map[string]float64, error) {
	if m, ok := l.spent[t.key()]; ok {
		return m, nil
	}
	return nil, errSpentNotRead
}

// forgetSpent drops what the ledger knows of the units' spending, to be read again. mu is held.
func (l *Ledger) forgetSpent() {
	l.spentMu.Lock()
	l.spent = map[string]map[string]float64{}
	l.spentMu.Unlock()
}

// openConn opens the connection charges run on. mu is held.
func (l *Ledger) openConn() error {
	if l.conn != nil {
		return nil
	}
	conn, err := l.db.Conn(context.Background())
	if err != nil {
		return err
	}
	l.conn = conn
	return nil
}

// writeBatch writes the admitted calls' releases in one transaction (writeCharges). It returns how many
// releases it wrote. The transaction runs on its own context: no one call's cancellation may undo the
// others' charges.
func (l *Ledger) writeBatch(admitted []*chargeRequest) (int, error) {
	ctx := context.Background()
	if _, err := l.conn.ExecContext(ctx, "BEGIN TRANSACTION"); err != nil {
		return 0, err
	}
	n, err := l.writeCharges(l.conn, admitted)
	if err != nil {
		return n, err
	}
	_, err = l.conn.ExecContext(ctx, "COMMIT")
	return n, err
}

// writeCharges appends the admitted calls' releases to ldp_releases on conn, inside its open
// transaction (writeBatch's, or a chargedTx's), through DuckDB's appender (no statement per row), with
// the ids from nextID on. That is the whole charge: what the units have spent is the sum of their
// releases, counted into ldp_budget_units by the next fold (ledger_fold.go). mu is held.
func (l *Ledger) writeCharges(conn *gosql.Conn, admitted []*chargeRequest) (int, error) {
	type release struct {
		r *chargeRequest
		i int
	}
	var releases []release
	for _, r := range admitted {
		for i := range r.charges {
			releases = append(releases, release{r, i})
		}
	}
	now := time.Now().UTC()
	if err := appendRows(conn, CatalogSchema, "ldp_releases", len(releases), func(k int) []driver.Value {
		r, c := releases[k].r, &releases[k].r.charges[releases[k].i]
		t := r.tables[releases[k].i]
		var rel driver.Value
		if c.Release != nil {
			rel = c.Release
		}
		return []driver.Value{l.nextID + int64(k), t.Database, t.Table, c.Unit, c.Function, c.Mechanism, c.Randomiser,
			c.Eps, c.Digest, rel, r.releasedBy, now, memoHash(c.Unit, c.Digest)}
	}); err != nil {
		return len(releases), fmt.Errorf("recording the releases: %w", err)
	}
	return len(releases), nil
}

// appendRows appends n rows to a table of the connection's default catalog through DuckDB's appender
// on conn, inside its open transaction.
func appendRows(conn *gosql.Conn, schema, table string, n int, row func(int) []driver.Value) error {
	if n == 0 {
		return nil
	}
	return conn.Raw(func(dc any) error {
		a, err := duckdb.NewAppenderFromConn(duckConn(dc), schema, table)
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if err := a.AppendRow(row(i)...); err != nil {
				_ = a.Close()
				return err
			}
		}
		return a.Close()
	})
}

// renameStatements are the statements that move a protected table's ledger rows to its new name, run
// in the transaction that renames the table (none for an unprotected table).
func (l *Ledger) renameStatements(from, to TableRef) []string {
	if l == nil {
		return nil
	}
	b, ok := l.Budget(from)
	if !ok {
		return nil
	}
	var stmts []string
	for _, t := range LedgerTables {
		stmts = append(stmts, fmt.Sprintf("UPDATE %s.%s SET table_name = %s WHERE db = %s AND table_name = %s",
			CatalogSchema, t, quoteString(to.Table), quoteString(b.Database), quoteString(b.Table)))
	}
	return stmts
}

// renamed moves a protected table's budget to its new name in the cache, after the rename committed.
func (l *Ledger) renamed(from, to TableRef) {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.spentMu.Lock()
	delete(l.spent, from.key()) // its units are read again, under the new name
	delete(l.spent, to.key())
	l.spentMu.Unlock()
	l.mu.Unlock()
	l.cacheMu.Lock()
	defer l.cacheMu.Unlock()
	b, ok := l.budgets[from.key()]
	if !ok {
		return
	}
	delete(l.budgets, from.key())
	f := l.memo[from.key()]
	delete(l.memo, from.key())
	b.Table = to.Table
	l.budgets[b.key()] = b
	if f != nil {
		l.memo[b.key()] = f
	}
}

// memoHash is ldp_releases.memo_key: 64 bits of SHA-256 of the unit and the digest, so memo lookups scan
// one integer column (Memo then compares the unit and the digest themselves).
func memoHash(unit, digest string) int64 {
	h := sha256.New()
	h.Write([]byte(unit))
	h.Write([]byte{0})
	h.Write([]byte(digest))
	var sum [sha256.Size]byte
	return int64(binary.LittleEndian.Uint64(h.Sum(sum[:0])))
}

// close releases the ledger's connection; later charges fail.
func (l *Ledger) close() error {
	l.closeFold.Do(func() {
		close(l.stopFold)
		<-l.foldStopped
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		_ = l.foldLocked() // best effort: the next open folds what this leaves
	}
	l.closed = true
	if l.conn == nil {
		return nil
	}
	err := l.conn.Close()
	l.conn = nil
	return err
}

// ReleaseDigest is the hex SHA-256 that identifies a release for memoisation by what was released,
// never by the released value: the source (the released column or columns by name, in order, or the
// digest of the expression that computed the value), the row within its unit (the row's primary key,
// UnitKey of its values, where the unit columns do not identify one row; "" where they do), the
// mechanism (name and identity: k-rr, laplace, an encoder's registration), the randomiser, ε, K (0 when
// there is none) and the mechanism's other parameters (LDP_LAPLACE's lo and hi). With the unit it is the
// memo key: a release asked for again under the same key returns the recorded release whatever the
// value is now, so whether a release is memoised depends on what the caller asked and on the record,
// never on the data. Every field is length-prefixed, so no two keys share a digest by concatenation.
//
// The digests of format v1 (ldpsql before this format) hashed the input value; ldp_releases may still
// hold them. They can never equal a v2 digest, so those releases are simply no longer returned.
func ReleaseDigest(source, row, mechanism, randomiser string, eps float64, k int, params ...float64) string {
	h := sha256.New()
	var n [8]byte
	field := func(b []byte) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte("ldpsql release v2"))
	field([]byte(source))
	field([]byte(row))
	field([]byte(mechanism))
	field([]byte(randomiser))
	binary.LittleEndian.PutUint64(n[:], math.Float64bits(eps))
	h.Write(n[:])
	binary.LittleEndian.PutUint64(n[:], uint64(int64(k)))
	h.Write(n[:])
	binary.LittleEndian.PutUint64(n[:], uint64(len(params)))
	h.Write(n[:])
	for _, p := range params {
		binary.LittleEndian.PutUint64(n[:], math.Float64bits(p))
		h.Write(n[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}
