//go:build loadtest

package integration

import (
	"bufio"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The load test is not part of the default run:
//
//	go test -tags loadtest -run TestLoadLDPEncode -v ./integration/ [-args -load.duration 60s -load.clients 16]

var (
	loadDuration = flag.Duration("load.duration", 60*time.Second, "how long the clients run")
	loadClients  = flag.Int("load.clients", 16, "concurrent MySQL clients")
)

var debugRE = regexp.MustCompile(`debug endpoints on (http://\S+)/debug/pprof/`)

// goroutines reads the server's goroutine count from its profiling endpoint.
func goroutines(t *testing.T, base string) int {
	t.Helper()
	resp, err := http.Get(base + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil && err != io.EOF {
		t.Fatal(err)
	}
	var n int
	if _, err := fmt.Sscanf(line, "goroutine profile: total %d", &n); err != nil {
		t.Fatalf("goroutine profile header %q: %v", line, err)
	}
	return n
}

// children lists the pids whose parent is pid (the plugin processes of a server).
func children(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 {
			if ppid, _ := strconv.Atoi(fields[1]); ppid == pid {
				out = append(out, child)
			}
		}
	}
	sort.Ints(out)
	return out
}

// TestLoadLDPEncode runs 16 concurrent MySQL clients calling LDP_ENCODE for 60 seconds on loopback and
// requires zero errors, no leaked plugin processes and no leaked goroutines; it reports p50/p99 latency.
func TestLoadLDPEncode(t *testing.T) {
	srv := startServer(t, filepath.Join(t.TempDir(), "load.duckdb"), "--debug-addr", "127.0.0.1:0")
	m := debugRE.FindStringSubmatch(srv.stdoutText())
	if m == nil {
		t.Fatalf("no debug address in the server's output:\n%s", srv.stdoutText())
	}
	debug := m[1]
	db := srv.connect("root", "")
	db.SetMaxOpenConns(*loadClients)
	db.SetMaxIdleConns(*loadClients)
	fillAux(t, db, "aux", 2000)
	mustExec(t, db, `CALL ldp_fit_mechanism('pca_load', 'pca', 'aux', 'f', '{"d": 4, "l": 5}')`)
	mustExec(t, db, "SELECT LDP_ENCODE(f, 2.0, 'pca_load') FROM aux WHERE id = 1")
	// Half the clients release from a protected table (memoise mode), through the ledger.
	fillAux(t, db, "paux", 2000)
	mustExec(t, db, "CALL ldp_set_budget('paux', 1000000)")

	time.Sleep(time.Second)
	g0 := goroutines(t, debug)
	p0 := children(t, srv.cmd.Process.Pid)
	t.Logf("before: %d goroutines, plugin processes %v", g0, p0)

	var mu sync.Mutex
	var latencies []time.Duration
	var errs []error
	stop := time.Now().Add(*loadDuration)
	var wg sync.WaitGroup
	for c := 0; c < *loadClients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			conn, err := db.Conn(t.Context())
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			defer conn.Close()
			rng := rand.New(rand.NewSource(int64(c)))
			var mine []time.Duration
			table := "aux"
			if c%2 == 1 {
				table = "paux"
			}
			for time.Now().Before(stop) {
				var q string
				var args []any
				if rng.Intn(4) == 0 { // a batch of rows through the batching path
					lo := rng.Intn(1900)
					q, args = "SELECT LDP_ENCODE(f, 2.0, 'pca_load') FROM "+table+" WHERE id BETWEEN ? AND ?", []any{lo, lo + 99}
				} else { // one row
					q, args = "SELECT LDP_ENCODE_JSON(f, 1.5, 'pca_load', 'duchi') FROM "+table+" WHERE id = ?", []any{rng.Intn(2000)}
				}
				start := time.Now()
				rows, err := conn.QueryContext(t.Context(), q, args...)
				n := 0
				if err == nil {
					for rows.Next() {
						var b []byte
						if err = rows.Scan(&b); err != nil || len(b) == 0 {
							err = fmt.Errorf("row %d: %v (%d bytes)", n, err, len(b))
							break
						}
						n++
					}
					if err == nil {
						err = rows.Err()
					}
					rows.Close()
				}
				mine = append(mine, time.Since(start))
				if err == nil && n == 0 {
					err = fmt.Errorf("%s %v: no rows", q, args)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			mu.Unlock()
		}(c)
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Errorf("%d errors, the first: %v", len(errs), errs[0])
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	q := func(p float64) time.Duration { return latencies[int(p*float64(len(latencies)-1))] }
	t.Logf("%d clients, %s: %d queries (%.0f/s), %d errors; latency p50 %s, p99 %s, max %s",
		*loadClients, *loadDuration, len(latencies), float64(len(latencies))/loadDuration.Seconds(), len(errs),
		q(0.50).Round(10*time.Microsecond), q(0.99).Round(10*time.Microsecond), latencies[len(latencies)-1].Round(time.Millisecond))

	var units int
	var spent float64
	if err := db.QueryRow("SELECT COUNT(*), SUM(spent) FROM ldpsql_catalog.ldp_budget_units").Scan(&units, &spent); err != nil {
		t.Fatal(err)
	}
	t.Logf("ledger: %d units of paux charged, %.1f ε in all (memoised repeats are free)", units, spent)
	if units == 0 || units > 2000 || spent > float64(units)*3.5+1e-9 {
		t.Errorf("ledger after the load: %d units, %.1f ε spent; want at most 2,000 units and 2 + 1.5 ε each", units, spent)
	}

	// Close the clients' connections, let the server wind down, and compare.
	db.Close()
	var g1 int
	for i := 0; i < 20; i++ {
		time.Sleep(500 * time.Millisecond)
		if g1 = goroutines(t, debug); g1 <= g0+2 {
			break
		}
	}
	p1 := children(t, srv.cmd.Process.Pid)
	t.Logf("after: %d goroutines, plugin processes %v", g1, p1)
	if g1 > g0+2 {
		t.Errorf("goroutines: %d before the load, %d after it", g0, g1)
	}
	if fmt.Sprint(p0) != fmt.Sprint(p1) {
		t.Errorf("plugin processes changed: %v before, %v after", p0, p1)
	}
	_ = sql.ErrNoRows
}
