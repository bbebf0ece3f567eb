package host

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/plugins/builtin/pca/pcaenc"
	"github.com/ldpsql/ldpsql/plugins/internal/plugintest"
	"github.com/ldpsql/ldpsql/plugins/internal/shm"
)

// pool returns the shared-memory pool of the process currently serving p
// (nil if none, or if it has no pool).
func (p *Plugin) pool() *shmPool {
	s, err := p.h.slot(p.spec.Name)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || s.cur.rpc == nil {
		return nil
	}
	return s.cur.rpc.shm
}

// sharedMemory reports whether p's calls go through shared memory.
func (p *Plugin) sharedMemory() bool {
	pool := p.pool()
	if pool == nil {
		return false
	}
	pool.mu.Lock()
	defer pool.mu.Unlock()
	return !pool.disabled && !pool.closed
}

// hostMappings counts this process's mappings of plugin regions.
func hostMappings(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "memfd:ldpsql-plugin-")
}

func needShm(t testing.TB) {
	t.Helper()
	if !shm.Supported {
		t.Skip("no shared memory on this platform")
	}
}

// Through shared memory, results are bit for bit those over gRPC and in
// process, for Encode and Decode, in several chunks; the regions are
// unmapped when the Host closes.
func TestSharedMemoryMatchesGRPC(t *testing.T) {
	needShm(t)
	ctx := context.Background()
	const dim = 784
	m, art := fitPCA(t, pcaenc.Params{D: 8, L: 10}, lowRank(rand.New(rand.NewPCG(3, 4)), 2000, dim, []float64{4, 3, 2, 1}))
	rows := lowRank(rand.New(rand.NewPCG(5, 6)), 3000, dim, []float64{4, 3, 2, 1}) // 3 chunks
	want, _ := m.Encode(rows)
	wantX, _ := m.Decode(want)

	before := hostMappings(t)
	results := map[bool][][][]float32{}
	for _, noShm := range []bool{false, true} {
		h := New(nil)
		h.noSharedMemory = noShm
		p := get(t, h, specFor(t, "pca", "pca", art))
		z, err := p.Encode(ctx, rows)
		if err != nil {
			t.Fatal(err)
		}
		x, err := p.Decode(ctx, z)
		if err != nil {
			t.Fatal(err)
		}
		if p.sharedMemory() == noShm {
			t.Errorf("noSharedMemory=%v: shared memory in use: %v", noShm, p.sharedMemory())
		}
		if got := hostMappings(t) - before; (got > 0) == noShm || got > maxRegions {
			t.Errorf("noSharedMemory=%v: %d regions mapped", noShm, got)
		}
		results[noShm] = [][][]float32{z, x}
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		if got := hostMappings(t); got != before {
			t.Errorf("noSharedMemory=%v: %d regions still mapped after Close", noShm, got-before)
		}
	}
	for _, noShm := range []bool{false, true} {
		z, x := results[noShm][0], results[noShm][1]
		for i := range rows {
			for j := range want[i] {
				if math.Float32bits(z[i][j]) != math.Float32bits(want[i][j]) {
					t.Fatalf("noSharedMemory=%v: row %d: %v, in-process %v", noShm, i, z[i], want[i])
				}
			}
			for k := range wantX[i] {
				if math.Float32bits(x[i][k]) != math.Float32bits(wantX[i][k]) {
					t.Fatalf("noSharedMemory=%v: decoded row %d differs at %d: %v, in-process %v", noShm, i, k, x[i][k], wantX[i][k])
				}
			}
		}
	}
}

// A plugin without the capability (here the liar, told to leave it out of
// its description, as a plugin built with an older SDK does) and one that
// offers it but refuses to map regions are both served over gRPC.
func TestSharedMemoryFallbackToGRPC(t *testing.T) {
	needShm(t)
	ctx := context.Background()
	before := hostMappings(t)
	for _, tc := range []struct{ name, artifact string }{
		{"without the capability", `{"radius": 1, "shm": "off"}`},
		{"refusing regions", `{"radius": 1, "shm": "refuse"}`},
	} {
		h := newHost(t)
		p := get(t, h, specFor(t, "liar", "liar", []byte(tc.artifact)))
		for range 3 {
			z, err := p.Encode(ctx, [][]float32{{2, 0, 0, 0}, {0, 0, 0, 0}})
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if z[0][0] != 1e30 || z[1][1] != -1e30 {
				t.Fatalf("%s: %v", tc.name, z)
			}
		}
		if p.sharedMemory() {
			t.Errorf("%s: shared memory in use", tc.name)
		}
		if got := hostMappings(t) - before; got != 0 {
			t.Errorf("%s: %d regions mapped", tc.name, got)
		}
		if pool := p.pool(); pool != nil && pool.inUse() != 0 {
			t.Errorf("%s: %d regions counted", tc.name, pool.inUse())
		}
	}
}

// The liar answers correctly through shared memory, then keeps overwriting
// its result in the region with 1e30 and NaN. The host copied the result out
// before returning it: the values, and what the randomiser makes of them
// after clipping, do not change.
func TestSharedMemoryWritesAfterReplyChangeNothing(t *testing.T) {
	needShm(t)
	ctx := context.Background()
	h := newHost(t)
	p := get(t, h, specFor(t, "liar", "liar", nil))
	if !p.sharedMemory() {
		t.Fatal("the liar's calls do not go through shared memory")
	}
	d, _ := p.Describe(ctx)
	set := mechanisms.L1Ball{D: d.OutputDim, Radius: d.OutputSet.Radius}
	clip := func(z [][]float32) [][]float64 {
		out := make([][]float64, len(z))
		for i, r := range z {
			x := []float64{float64(r[0]), float64(r[1])}
			c, err := set.Clip(x)
			if err != nil {
				t.Fatalf("clipping %v: %v", r, err)
			}
			out[i] = c
		}
		return out
	}

	const n = 64
	rows := make([][]float32, n)
	for i := range rows {
		rows[i] = []float32{0, 1, 2, 3}
	}
	rows[0][0] = 7 // mode 7: answer, then scribble over the answer
	z, err := p.Encode(ctx, rows)
	if err != nil {
		t.Fatal(err)
	}
	clipped := clip(z)
	for i := range z {
		if z[i][0] != 0.5 || z[i][1] != -0.25 {
			t.Fatalf("row %d: %v, want [0.5 -0.25]", i, z[i])
		}
	}

	// Wait until the liar has overwritten its result in the region (the
	// region is idle in the pool, and still mapped by both sides).
	pool := p.pool()
	deadline := time.Now().Add(5 * time.Second)
	for {
		pool.mu.Lock()
		var mem []byte
		if len(pool.free) == 1 {
			mem = pool.free[0].Mem
		}
		pool.mu.Unlock()
		if mem == nil {
			t.Fatal("the region is not back in the pool")
		}
		out, err := shm.Floats(mem, shm.AlignUp(4*4*n), 2*n)
		if err != nil {
			t.Fatal(err)
		}
		if math.IsNaN(float64(out[0])) || out[1] == 1e30 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the liar never overwrote its result: %v", out[:4])
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)

	for i := range z {
		if z[i][0] != 0.5 || z[i][1] != -0.25 {
			t.Fatalf("row %d changed after the call: %v", i, z[i])
		}
	}
	again := clip(z)
	for i := range again {
		if again[i][0] != clipped[i][0] || again[i][1] != clipped[i][1] || !set.Contains(again[i]) {
			t.Fatalf("row %d: clipped %v after the writes, %v before", i, again[i], clipped[i])
		}
	}
	// As the udf package releases it: clipped into the set, then noised.
	rnd, err := mechanisms.NewRandomiser("laplace", set, 50)
	if err != nil {
		t.Fatal(err)
	}
	src := mechanisms.CryptoSource()
	for i := range z {
		rel, err := rnd.Randomise([]float64{float64(z[i][0]), float64(z[i][1])}, src)
		if err != nil {
			t.Fatal(err)
		}
		if math.IsNaN(rel[0]) || math.IsNaN(rel[1]) || math.Abs(rel[0])+math.Abs(rel[1]) > 3 {
			t.Fatalf("row %d released as %v", i, rel)
		}
	}
}

// Every field of a shared-memory answer is checked against the request: a
// result claimed outside the region, over the input, in another region or
// with sizes that overflow is refused (ErrBadOutput), the region is dropped,
// and the process goes on serving.
func TestSharedMemoryBadAnswersRefused(t *testing.T) {
	needShm(t)
	ctx := context.Background()
	h := newHost(t)
	p := get(t, h, specFor(t, "liar", "liar", nil))
	pid := p.pid()
	before := hostMappings(t)
	for mode, want := range map[float32]string{
		3:  "1 rows of 2 values",
		4:  "2 rows of 3 values",
		5:  "matrix of 15 bytes",
		8:  "do not fit a 1048576-byte region",
		9:  "at offset 0 of region",
		10: "2 rows of 2 values (16 bytes) at offset 64 of region",
		11: "4294967295×4294967295 matrix",
		12: "at offset 18446744073709551612 do not fit",
	} {
		_, err := p.Encode(ctx, [][]float32{{mode, 0, 0, 0}, {0, 0, 0, 0}})
		if !errors.Is(err, ErrBadOutput) || !strings.Contains(err.Error(), want) {
			t.Errorf("mode %v: %v, want ErrBadOutput (%s)", mode, err, want)
		}
		if n := p.pool().inUse(); n != 0 {
			t.Errorf("mode %v: %d regions kept after a bad answer", mode, n)
		}
		if got := hostMappings(t); got > before {
			t.Errorf("mode %v: %d more regions mapped", mode, got-before)
		}
	}
	z, err := p.Encode(ctx, [][]float32{{0, 0, 0, 0}})
	if err != nil || z[0][0] != 0 || p.pid() != pid || !p.sharedMemory() {
		t.Fatalf("after the bad answers: %v, %v, pid %d (was %d)", z, err, p.pid(), pid)
	}
}

// A plugin that crashes or hangs mid-call leaves no region mapped in the
// host, and the restarted process gets regions of its own.
func TestSharedMemoryCrashAndHangLeaveNoMappings(t *testing.T) {
	needShm(t)
	ctx := context.Background()
	before := hostMappings(t)
	h := newHost(t)
	crash := get(t, h, specFor(t, "crash", "crash", nil))
	spec := specFor(t, "hang", "hang", nil)
	spec.CallTimeout = 500 * time.Millisecond
	hang := get(t, h, spec)
	for _, p := range []*Plugin{crash, hang} {
		if _, err := p.Encode(ctx, [][]float32{{1, 2}}); err != nil {
			t.Fatal(err)
		}
		if !p.sharedMemory() {
			t.Fatalf("%s: no shared memory", p.Name())
		}
	}
	if got := hostMappings(t) - before; got != 2 {
		t.Fatalf("%d regions mapped for two plugins", got)
	}
	for _, tc := range []struct {
		p    *Plugin
		want error
	}{{crash, ErrCrashed}, {hang, ErrTimeout}} {
		pid := tc.p.pid()
		if _, err := tc.p.Encode(ctx, [][]float32{{-1, 0}, {1, 2}}); !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v, want %v", tc.p.Name(), err, tc.want)
		}
		if plugintest.Alive(pid) {
			t.Fatalf("%s: process %d still there", tc.p.Name(), pid)
		}
	}
	if got := hostMappings(t) - before; got != 0 {
		t.Fatalf("%d regions still mapped after the crash and the timeout", got)
	}
	for _, p := range []*Plugin{crash, hang} {
		z, err := p.Encode(ctx, [][]float32{{1, 2}})
		if err != nil || z[0][1] != 2 || !p.sharedMemory() {
			t.Fatalf("%s after a restart: %v, %v", p.Name(), z, err)
		}
	}
	if got := hostMappings(t) - before; got != 2 {
		t.Fatalf("%d regions mapped after the restarts", got)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if got := hostMappings(t) - before; got != 0 {
		t.Fatalf("%d regions still mapped after Close", got)
	}
}

// When the caller gives up on a call, the plugin may still be at work on its
// region: the region is dropped, not reused, and the next call gets another.
func TestSharedMemoryCallerCancelDropsRegion(t *testing.T) {
	needShm(t)
	ctx := context.Background()
	h := newHost(t)
	spec := specFor(t, "hang", "hang", nil)
	spec.CallTimeout = time.Minute
	p := get(t, h, spec)
	if _, err := p.Encode(ctx, [][]float32{{1, 2}}); err != nil {
		t.Fatal(err)
	}
	pool := p.pool()
	pool.mu.Lock()
	first := pool.free[0].id
	pool.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := p.Encode(cctx, [][]float32{{-1, 0}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Encode past the caller's deadline: %v", err)
	}
	if n := pool.inUse(); n != 0 {
		t.Fatalf("%d regions kept after the caller gave up", n)
	}
	z, err := p.Encode(ctx, [][]float32{{3, 4}})
	if err != nil || z[0][0] != 3 || z[0][1] != 4 {
		t.Fatalf("next call: %v, %v", z, err)
	}
	pool.mu.Lock()
	next := pool.free[0].id
	pool.mu.Unlock()
	if next == first {
		t.Fatalf("region %d reused after a call that was given up", first)
	}
}
