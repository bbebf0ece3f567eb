package main

import (
	"context"
	gosql "database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/udf"
)

// bench load: many clients at once over the MySQL protocol, each running a mix of statements, with the
// latency of every statement kept, and at the end an audit of the privacy ledger against what the
// successful charged statements should have cost.

// loadKind is one kind of statement of the load mix.
type loadKind struct {
	name string
	// eps is what one statement charges each unit it releases (0: not charged).
	eps float64
	// query returns the statement to run: over units [lo, lo+n) of the protected table, or for the
	// plain kinds over rows of the unprotected one; next is a fresh id for an INSERT.
	query func(lo, n int, next int64) (string, []any)
}

// The ε of the charged kinds are powers of two, so every unit's sum of charges is exact in float64 in
// whatever order they are added, and the audit can compare for equality.
var loadKinds = []loadKind{
	{name: "select", query: func(lo, n int, _ int64) (string, []any) {
		return "SELECT id, y, x FROM events WHERE id BETWEEN ? AND ?", []any{lo, lo + n - 1}
	}},
	{name: "insert", query: func(_, _ int, next int64) (string, []any) {
		return "INSERT INTO events (id, y, x) VALUES (?, ?, ?)", []any{next, next % 10, float64(next) / 4}
	}},
	{name: "flip_label", eps: 0.5, query: func(lo, n int, _ int64) (string, []any) {
		return "SELECT id, FLIP_LABEL(y, 0.5, 10) FROM people WHERE id BETWEEN ? AND ?", []any{lo, lo + n - 1}
	}},
	{name: "rr_frequency", eps: 0.25, query: func(lo, n int, _ int64) (string, []any) {
		return "SELECT RR_FREQUENCY(y, 0.25, 10, 3) FROM people WHERE id BETWEEN ? AND ?", []any{lo, lo + n - 1}
	}},
	{name: "laplace", eps: 0.5, query: func(lo, n int, _ int64) (string, []any) {
		return "SELECT id, LDP_LAPLACE(x, 0.5, 0, 100) FROM people WHERE id BETWEEN ? AND ?", []any{lo, lo + n - 1}
	}},
}

func loadKindNames() string {
	names := make([]string, len(loadKinds))
	for i, k := range loadKinds {
		names[i] = k.name
	}
	return strings.Join(names, ", ")
}

// parseMix parses --mix: kind=weight pairs, or kinds alone (weight 1), separated by commas.
func parseMix(s string) ([]float64, error) {
	weights := make([]float64, len(loadKinds))
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, w, hasW := strings.Cut(part, "=")
		weight := 1.0
		if hasW {
			var err error
			if weight, err = strconv.ParseFloat(w, 64); err != nil || weight < 0 || math.IsInf(weight, 0) {
				return nil, fmt.Errorf("--mix %q: the weight of %s must be a number ≥ 0", s, name)
			}
		}
		i := slices.IndexFunc(loadKinds, func(k loadKind) bool { return k.name == name })
		if i < 0 {
			return nil, fmt.Errorf("--mix %q: unknown kind %q (kinds: %s)", s, name, loadKindNames())
		}
		weights[i] = weight
	}
	total := 0.0
	for _, w := range weights {
		total += w
	}
	if total == 0 {
		return nil, fmt.Errorf("--mix %q: no kind has a weight > 0 (kinds: %s)", s, loadKindNames())
	}
	return weights, nil
}

// loadClient is what one client measured.
type loadClient struct {
	latencies [][]time.Duration // by kind, of the successful statements
	errors    []int             // by kind
	firstErr  []error           // by kind
	spent     []float64         // by unit of the protected table: what its successful statements charged
	releases  []int64           // by unit: how many releases they made
}

// loadOptions are bench load's flags.
type loadOptions struct {
	clients, units, releaseRows, ledgerRows, duckThreads int
	duration                                             time.Duration
	weights                                              []float64
	budget                                               float64
	keep, cpuProfile                                     string
}

func benchLoadCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench load", "Run --clients clients at once for --duration over the MySQL protocol on loopback against a fresh\nserver in a temporary directory, each running a random mix of statements: plain SELECTs and single-row\nautocommit INSERTs on an unprotected table, and FLIP_LABEL, RR_FREQUENCY and LDP_LAPLACE releases of\n--release-rows units of a protected table in 'charge' mode (every release charged). Reports per kind\nthe statements, statements/s, p50 and p99 latency and errors, then audits the privacy ledger: every\nunit's ε spent must equal what the successful statements charged it, exactly.\nKinds: "+loadKindNames()+".",
		`  ldpsql bench load
  ldpsql bench load --clients 8 --duration 10s --mix insert
  ldpsql bench load --mix laplace --ledger-rows 1000000
`, stderr)
	o, err := parseLoadFlags(fs, args)
	if err != nil {
		return err
	}
	logrus.SetLevel(logrus.WarnLevel)
	path := o.keep
	if path == "" {
		dir, err := os.MkdirTemp("", "ldpsql-bench-load-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "bench.duckdb")
	} else if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("--db %s exists: bench load needs a fresh file", path)
	}
	e, err := openEngine(path, udf.Config{}, engine.WithDuckDBThreads(o.duckThreads))
	if err != nil {
		return err
	}
	defer e.Close()
	if err := loadSetup(e, o.units, o.budget, o.ledgerRows); err != nil {
		return fmt.Errorf("setting up: %w", err)
	}

	// interpolateParams: the text protocol, one round trip per statement, as most clients send.
	db, _, stop, err := serveLoopback(e, "interpolateParams=true")
	if err != nil {
		return err
	}
	defer stop()
	db.SetMaxOpenConns(o.clients)
	db.SetMaxIdleConns(o.clients)

	var mixDesc []string
	for i, w := range o.weights {
		if w > 0 {
			mixDesc = append(mixDesc, fmt.Sprintf("%s %g", loadKinds[i].name, w))
		}
	}
	fmt.Fprintf(stdout, "ldpsql %s bench load: %d clients × %s over the MySQL protocol on loopback (DuckDB file %s)\n", version, o.clients, o.duration, path)
	fmt.Fprintf(stdout, "mix: %s; releases of %d of %d units, 'charge' mode, budget ε %g per unit; %d ledger rows before; DuckDB threads %d\n",
		strings.Join(mixDesc, ", "), o.releaseRows, o.units, o.budget, o.ledgerRows, o.duckThreads)
	fmt.Fprintf(stdout, "load average before: %s\n\n", loadAverage())

	run, err := runLoad(e, db, o)
	if err != nil {
		return err
	}
	printLoadReport(stdout, e, o, run)
	fmt.Fprintf(stdout, "load average after: %s\n\n", loadAverage())
	return auditLoad(stdout, e, run.results, o.units, o.budget)
}

// parseLoadFlags parses and checks bench load's flags.
func parseLoadFlags(fs *flag.FlagSet, args []string) (loadOptions, error) {
	clients := fs.Int("clients", 16, "concurrent clients, one connection each")
	duration := fs.Duration("duration", 30*time.Second, "how long the clients run")
	mix := fs.String("mix", "select,insert,flip_label,rr_frequency,laplace", "kinds of statement and their weights (kind=weight, comma separated)")
	units := fs.Int("units", 10_000, "units (rows) of the protected table, and rows of the unprotected one")
	releaseRows := fs.Int("release-rows", 10, "units one release or SELECT reads")
	budget := fs.Float64("budget", 1e9, "ε budget per unit of the protected table (statements over it are refused, and counted as errors)")
	ledgerRows := fs.Int("ledger-rows", 0, "releases recorded in the ledger before the run (of another protected table, over a tenth as many units)")
	keep := fs.String("db", "", "DuckDB file to create and keep (default: a temporary one, removed)")
	duckThreads := fs.Int("duckdb-threads", engine.DefaultServerDuckDBThreads, "DuckDB threads, as serve --duckdb-threads (0: one per core)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run (server and clients, one process) to this file")
	if err := fs.Parse(args); err != nil {
		return loadOptions{}, err
	}
	weights, err := parseMix(*mix)
	if err != nil {
		return loadOptions{}, err
	}
	switch {
	case *clients < 1:
		return loadOptions{}, fmt.Errorf("--clients %d must be at least 1", *clients)
	case *duration <= 0:
		return loadOptions{}, fmt.Errorf("--duration %s must be > 0", *duration)
	case *releaseRows < 1 || *units < *releaseRows:
		return loadOptions{}, fmt.Errorf("--release-rows %d must be at least 1 and at most --units %d", *releaseRows, *units)
	case *duckThreads < 0:
		return loadOptions{}, fmt.Errorf("--duckdb-threads %d must be ≥ 0", *duckThreads)
	case *ledgerRows < 0:
		return loadOptions{}, fmt.Errorf("--ledger-rows %d must be ≥ 0", *ledgerRows)
	case !(*budget > 0) || math.IsInf(*budget, 0):
		return loadOptions{}, fmt.Errorf("--budget %v must be a finite number > 0", *budget)
	}
	return loadOptions{clients: *clients, units: *units, releaseRows: *releaseRows, ledgerRows: *ledgerRows, duckThreads: *duckThreads,
		duration: *duration, weights: weights, budget: *budget, keep: *keep, cpuProfile: *cpuProfile}, nil
}

// loadRun is what a run of the clients measured, with the server's transaction counters before it.
type loadRun struct {
	results                  []*loadClient
	elapsed, cpu             time.Duration
	cpuKnown                 bool
	txBefore, insertTxBefore int64
}

// runLoad runs o.clients clients on their own connections until o.duration has passed.
func runLoad(e *engine.Engine, db *gosql.DB, o loadOptions) (loadRun, error) {
	conns := make([]*gosql.Conn, o.clients)
	for i := range conns {
		var err error
		if conns[i], err = db.Conn(context.Background()); err != nil {
			return loadRun{}, err
		}
		defer conns[i].Close()
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return loadRun{}, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return loadRun{}, err
		}
		defer pprof.StopCPUProfile()
	}
	run := loadRun{txBefore: e.Ledger.Transactions(), insertTxBefore: e.InsertTransactions()}
	cpuBefore, cpuKnown := processCPU()
	nextID := atomic.Int64{}
	nextID.Store(int64(o.units))
	run.results = make([]*loadClient, o.clients)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(o.duration)
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run.results[c] = runLoadClient(conns[c], uint64(c), o.weights, o.units, o.releaseRows, deadline, &nextID)
		}()
	}
	wg.Wait()
	run.elapsed = time.Since(start)
	cpuAfter, _ := processCPU()
	run.cpu, run.cpuKnown = cpuAfter-cpuBefore, cpuKnown
	return run, nil
}

// printLoadReport prints, per kind of statement, the count, rate, p50 and p99 latency and errors, then
// the statements per ledger and insert transaction and the CPU time per statement.
func printLoadReport(stdout io.Writer, e *engine.Engine, o loadOptions, run loadRun) {
	elapsed := run.elapsed
	fmt.Fprintf(stdout, "%-14s %8s %9s %9s %9s %7s\n", "kind", "count", "q/s", "p50 ms", "p99 ms", "errors")
	var all, charged, inserts []time.Duration
	allErrs, chargedErrs := 0, 0
	var firstErrs []string
	for k, kind := range loadKinds {
		if o.weights[k] == 0 {
			continue
		}
		var lat []time.Duration
		errs := 0
		for _, r := range run.results {
			lat = append(lat, r.latencies[k]...)
			errs += r.errors[k]
			if r.firstErr[k] != nil && len(firstErrs) < 5 {
				firstErrs = append(firstErrs, fmt.Sprintf("%s: %v", kind.name, r.firstErr[k]))
			}
		}
		printLoadRow(stdout, kind.name, lat, errs, elapsed)
		all, allErrs = append(all, lat...), allErrs+errs
		if kind.name == "insert" {
			inserts = lat
		}
		if kind.eps > 0 {
			charged, chargedErrs = append(charged, lat...), chargedErrs+errs
		}
	}
	printLoadRow(stdout, "all", all, allErrs, elapsed)
	if len(charged)+chargedErrs > 0 {
		printLoadRow(stdout, "charged", charged, chargedErrs, elapsed)
	}
	for _, s := range firstErrs {
		fmt.Fprintf(stdout, "  first error of %s\n", s)
	}
	if n := len(charged); n > 0 {
		tx := e.Ledger.Transactions() - run.txBefore
		fmt.Fprintf(stdout, "ledger: %d transactions for %d charged statements (%.1f per transaction)\n", tx, n, float64(n)/float64(max(tx, 1)))
	}
	if n := len(inserts); n > 0 {
		tx := e.InsertTransactions() - run.insertTxBefore
		fmt.Fprintf(stdout, "inserts: %d transactions for %d INSERTs (%.1f per transaction)\n", tx, n, float64(n)/float64(max(tx, 1)))
	}
	if n := len(all) + allErrs; run.cpuKnown && n > 0 {
		// On a loaded machine the rates above measure the share of the CPU the run got; the CPU time
		// each statement took is what the code costs.
		cpu := run.cpu
		fmt.Fprintf(stdout, "CPU: %.2f s user+system over %s (%.2f cores), %.0f µs per statement (server and clients: one process)\n",
			cpu.Seconds(), elapsed.Round(time.Millisecond), cpu.Seconds()/elapsed.Seconds(), float64(cpu.Microseconds())/float64(n))
	}
}

func printLoadRow(w io.Writer, name string, lat []time.Duration, errs int, elapsed time.Duration) {
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return math.NaN()
		}
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	fmt.Fprintf(w, "%-14s %8d %9.1f %9.1f %9.1f %7d\n", name, len(lat), float64(len(lat))/elapsed.Seconds(), pct(0.50), pct(0.99), errs)
}

// loadSetup creates the unprotected table events and the protected table people (units rows each),
// and, for ledgerRows > 0, a ledger that already holds that many releases of another protected table.
func loadSetup(e *engine.Engine, units int, budget float64, ledgerRows int) error {
	for _, q := range []string{
		"CREATE TABLE events (id BIGINT PRIMARY KEY, y INT, x DOUBLE)",
		"CREATE TABLE people (id BIGINT PRIMARY KEY, y INT, x DOUBLE)",
		"CREATE TABLE archive (id BIGINT PRIMARY KEY, y INT)",
	} {
		if _, _, err := e.Query(e.NewContext(context.Background()), q); err != nil {
			return err
		}
	}
	for _, t := range []string{"events", "people"} {
		if _, err := e.DuckDB.Exec(fmt.Sprintf(`INSERT INTO ldpsql.%s SELECT range, (range %% 10)::INTEGER, (range %% 100)::DOUBLE FROM range(%d)`, t, units)); err != nil {
			return err
		}
	}
	ctx := e.NewContext(context.Background())
	if _, _, err := e.Query(ctx, fmt.Sprintf("CALL ldp_set_budget('people', %s, 'charge')", strconv.FormatFloat(budget, 'g', -1, 64))); err != nil {
		return err
	}
	if ledgerRows == 0 {
		return nil
	}
	if _, _, err := e.Query(ctx, "CALL ldp_set_budget('archive', 1e9, 'charge')"); err != nil {
		return err
	}
	// Straight into the catalog tables, as if earlier statements had charged them. Their ids are
	// negative, so they never collide with the ids the open ledger hands out from 1.
	archiveUnits := max(1, ledgerRows/10)
	if _, err := e.DuckDB.Exec(fmt.Sprintf(`
		INSERT INTO ldpsql_catalog.ldp_releases
		SELECT -range - 1, 'ldpsql', 'archive', (range %% %d)::VARCHAR, 'FLIP_LABEL', 'k-rr', 'k-rr', 1, '', NULL, 'root', now(), 0
		FROM range(%d);
		INSERT INTO ldpsql_catalog.ldp_budget_units
		SELECT 'ldpsql', 'archive', unit_key, count(*), count(*), now() FROM ldpsql_catalog.ldp_releases
		WHERE table_name = 'archive' GROUP BY unit_key`, archiveUnits, ledgerRows)); err != nil {
		return err
	}
	return nil
}

// runLoadClient runs statements on conn until the deadline, choosing each one's kind by weight.
func runLoadClient(conn *gosql.Conn, seed uint64, weights []float64, units, n int, deadline time.Time, nextID *atomic.Int64) *loadClient {
	r := &loadClient{
		latencies: make([][]time.Duration, len(loadKinds)),
		errors:    make([]int, len(loadKinds)),
		firstErr:  make([]error, len(loadKinds)),
		spent:     make([]float64, units),
		releases:  make([]int64, units),
	}
	rng := rand.New(rand.NewPCG(seed, 42))
	total := 0.0
	for _, w := range weights {
		total += w
	}
	ctx := context.Background()
	for time.Now().Before(deadline) {
		pick, k := rng.Float64()*total, 0
		for k < len(weights)-1 && (weights[k] == 0 || pick >= weights[k]) {
			pick -= weights[k]
			k++
		}
		kind := loadKinds[k]
		lo := rng.IntN(units - n + 1)
		var next int64
		if kind.name == "insert" {
			next = nextID.Add(1)
		}
		q, args := kind.query(lo, n, next)
		start := time.Now()
		err := drainConn(ctx, conn, q, args)
		took := time.Since(start)
		if err != nil {
			r.errors[k]++
			if r.firstErr[k] == nil {
				r.firstErr[k] = err
			}
			continue
		}
		r.latencies[k] = append(r.latencies[k], took)
		if kind.eps > 0 {
			for u := lo; u < lo+n; u++ {
				r.spent[u] += kind.eps
				r.releases[u]++
			}
		}
	}
	return r
}

// drainConn runs a statement and reads every row it returns.
func drainConn(ctx context.Context, conn *gosql.Conn, q string, args []any) error {
	rows, err := conn.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
	}
	return rows.Err()
}

// auditLoad checks the ledger of people against what the clients' successful statements charged:
// every unit's spent and releases in ldp_budget_units, and the sum of its releases in ldp_releases. It
// folds the releases of the run into ldp_budget_units first, and reads that table itself: the fold's
// result is what it audits.
func auditLoad(w io.Writer, e *engine.Engine, results []*loadClient, units int, budget float64) error {
	if err := e.Ledger.Fold(); err != nil {
		return fmt.Errorf("ledger audit: %w", err)
	}
	wantSpent := make([]float64, units)
	wantReleases := make([]int64, units)
	for _, r := range results {
		for u := range wantSpent {
			wantSpent[u] += r.spent[u]
			wantReleases[u] += r.releases[u]
		}
	}
	type got struct {
		spent, releasesSum float64
		releases, recorded int64
	}
	gotBy := map[int]*got{}
	rows, err := e.DuckDB.Query(`
		SELECT coalesce(u.unit_key, r.unit_key), coalesce(u.spent, 0), coalesce(u.releases, 0), coalesce(r.eps, 0), coalesce(r.n, 0)
		FROM (SELECT unit_key, spent, releases FROM ldpsql_catalog.ldp_budget_units WHERE db = 'ldpsql' AND table_name = 'people') u
		FULL JOIN (SELECT unit_key, sum(eps) AS eps, count(*) AS n FROM ldpsql_catalog.ldp_releases
			WHERE db = 'ldpsql' AND table_name = 'people' GROUP BY unit_key) r ON r.unit_key = u.unit_key`)
	if err != nil {
		return fmt.Errorf("ledger audit: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var g got
		if err := rows.Scan(&key, &g.spent, &g.releases, &g.releasesSum, &g.recorded); err != nil {
			return fmt.Errorf("ledger audit: %w", err)
		}
		u, err := strconv.Atoi(key)
		if err != nil || u < 0 || u >= units {
			return fmt.Errorf("ledger audit: a unit %q that people does not have", key)
		}
		gotBy[u] = &g
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ledger audit: %w", err)
	}
	var wrong []string
	var totalEps float64
	var totalReleases int64
	for u := range units {
		g := gotBy[u]
		if g == nil {
			g = &got{}
		}
		totalEps += wantSpent[u]
		totalReleases += wantReleases[u]
		if g.spent != wantSpent[u] || g.releasesSum != wantSpent[u] || g.releases != wantReleases[u] || g.recorded != wantReleases[u] || g.spent > budget {
			wrong = append(wrong, fmt.Sprintf("unit %d: charged ε %g in %d releases by the successful statements; ldp_budget_units says ε %g in %d, ldp_releases ε %g in %d",
				u, wantSpent[u], wantReleases[u], g.spent, g.releases, g.releasesSum, g.recorded))
		}
	}
	if len(wrong) > 0 {
		sort.Strings(wrong)
		fmt.Fprintf(w, "ledger audit: FAILED, %d of %d units differ:\n", len(wrong), units)
		for _, s := range wrong[:min(len(wrong), 10)] {
			fmt.Fprintf(w, "  %s\n", s)
		}
		return errors.New("the ledger does not match the successful charged statements")
	}
	fmt.Fprintf(w, "ledger audit: exact — %d units of people charged ε %g in %d releases, as the successful statements charged them\n",
		units, totalEps, totalReleases)
	return nil
}

// loadAverage is /proc/loadavg's first three fields, where there is one.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
