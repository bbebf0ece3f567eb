package integration

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// A full disk under a running server (issue #20 item 6): the database file lives on a small tmpfs that
// the test fills. While it is full, reads go on working (also across the checkpoint that fails and makes
// DuckDB invalidate the database, which the server reopens in process), writes and charged releases
// fail with ER_DISK_FULL (1021) saying what to do, and no release reaches a client without its charge.
// Once the filler file is removed, writes succeed again with no restart, and after a restart every
// acknowledged row is there and the ledger adds up.
//
// Mounting a tmpfs needs root (CAP_SYS_ADMIN); elsewhere the test skips.
func TestDiskFullRecovery(t *testing.T) {
	vol := filepath.Join(t.TempDir(), "vol")
	if err := os.Mkdir(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", vol).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root or CAP_SYS_ADMIN): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", vol).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", vol, err, out)
		}
	})
	path := filepath.Join(vol, "full.duckdb")
	// A small WAL limit, so that commits checkpoint often: the checkpoint is the write whose failure
	// invalidates the database.
	srv := startServer(t, path, "--wal-autocheckpoint", "256KB")
	db := srv.connect("root", "")
	db.SetMaxOpenConns(8)
	mustExec(t, db, "CREATE TABLE t (id BIGINT PRIMARY KEY, x DOUBLE, pad VARCHAR(200))")
	mustExec(t, db, "CREATE TABLE p (id BIGINT PRIMARY KEY, x DOUBLE)")
	mustExec(t, db, "INSERT INTO p SELECT seq, seq / 100.0 FROM (WITH RECURSIVE s(seq) AS (SELECT 0 UNION ALL SELECT seq + 1 FROM s WHERE seq < 99) SELECT seq FROM s) q")
	mustExec(t, db, "CALL ldp_set_budget('p', 1000, 'charge')")

	var nextID atomic.Int64
	acked := int64(0)
	insert := func() error {
		const rows = 200
		first := nextID.Add(rows) - rows
		var sb strings.Builder
		sb.WriteString("INSERT INTO t VALUES ")
		for i := int64(0); i < rows; i++ {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, "(%d, %d.5, '%s')", first+i, first+i, strings.Repeat("x", 150))
		}
		_, err := db.Exec(sb.String())
		if err == nil {
			acked += rows
		}
		return err
	}
	releasesReceived := 0
	release := func() error {
		rows, err := queryAll(db, "SELECT id, LDP_LAPLACE(x, 0.5, 0, 1) FROM p WHERE id < 10")
		releasesReceived += len(rows)
		return err
	}
	for range 5 {
		if err := insert(); err != nil {
			t.Fatal(err)
		}
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}

	// Readers throughout: every read must succeed and see no fewer rows than were acknowledged before it.
	stop := make(chan struct{})
	var readErrs []string
	var reads atomic.Int64
	var readMu sync.Mutex
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				var n int64
				var sum float64
				if err := db.QueryRow("SELECT COUNT(*), COALESCE(SUM(x), 0) FROM t").Scan(&n, &sum); err != nil {
					readMu.Lock()
					readErrs = append(readErrs, err.Error())
					readMu.Unlock()
				}
				reads.Add(1)
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}

	// Fill the volume.
	filler := filepath.Join(vol, "filler")
	// The room left takes the WAL past --wal-autocheckpoint, so that a checkpoint fails too.
	fillVolume(t, filler, 384<<10)

	isDiskFull := func(err error) bool {
		var me *mysql.MySQLError
		return errors.As(err, &me) && me.Number == 1021 && strings.Contains(me.Message, "Free space")
	}
	var failed []error
	for i := 0; i < 40 && len(failed) < 6; i++ {
		if err := insert(); err != nil {
			failed = append(failed, err)
		}
		if err := release(); err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) == 0 {
		t.Fatalf("no write failed on a full volume")
	}
	for _, err := range failed {
		if !isDiskFull(err) {
			t.Errorf("a write on a full disk failed with %v, want ER_DISK_FULL (1021) saying to free space", err)
		}
	}
	t.Logf("on the full volume: %d writes failed, first: %v", len(failed), failed[0])

	// Free the space: writes resume, with no restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := insert(); err != nil {
		t.Fatalf("an INSERT after space came back: %v\n%s", err, srv.stderr)
	}
	if err := release(); err != nil {
		t.Fatalf("a charged release after space came back: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	close(stop)
	wg.Wait()
	if len(readErrs) > 0 {
		t.Errorf("%d of %d reads failed while the disk was full, first: %s", len(readErrs), reads.Load(), readErrs[0])
	}
	log := srv.stderr.String()
	t.Logf("%d reads, %d failed; the server's log:\n%s", reads.Load(), len(readErrs), log)
	if !strings.Contains(log, "reopened") {
		t.Errorf("no checkpoint failed on the full volume (nothing was reopened): the test did not exercise DuckDB's invalidation")
	}

	// After a restart: every acknowledged row; no release without its charge; spent = sum of releases.
	srv.stop()
	srv = startServer(t, path)
	db = srv.connect("root", "")
	rows := scalarInt(t, db, "SELECT COUNT(*) FROM t")
	attempted := nextID.Load()
	if rows < acked || rows > attempted {
		t.Errorf("%d rows after the restart, want at least the %d acknowledged (and at most the %d attempted)", rows, acked, attempted)
	}
	charged := scalarInt(t, db, "SELECT COUNT(*) FROM ldpsql_catalog.ldp_releases WHERE table_name = 'p'")
	if charged < int64(releasesReceived) {
		t.Errorf("clients received %d releases but only %d were charged", releasesReceived, charged)
	}
	var mismatched int64
	if err := db.QueryRow(`SELECT COUNT(*) FROM ldpsql_catalog.ldp_budget_units u
		WHERE table_name = 'p' AND ABS(spent - (SELECT SUM(eps) FROM ldpsql_catalog.ldp_releases r
			WHERE r.table_name = u.table_name AND r.unit_key = u.unit_key)) > 1e-9`).Scan(&mismatched); err != nil {
		t.Fatal(err)
	}
	if mismatched != 0 {
		t.Errorf("%d units' spent is not the sum of their releases", mismatched)
	}
	t.Logf("after the restart: %d rows (%d acknowledged, %d attempted); %d releases received, %d charged",
		rows, acked, attempted, releasesReceived, charged)
}

// fillVolume writes path until the volume it is on has only room bytes left.
func fillVolume(t *testing.T, path string, room int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !strings.Contains(err.Error(), "no space left") {
				t.Fatal(err)
			}
			st, _ := f.Stat()
			if err := f.Truncate(max(st.Size()-room, 0)); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
}
