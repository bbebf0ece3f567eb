package host

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ldpsql/ldpsql/plugins/builtin/identity/idenc"
	"github.com/ldpsql/ldpsql/plugins/builtin/pca/pcaenc"
	"github.com/ldpsql/ldpsql/plugins/internal/plugintest"
	"github.com/ldpsql/ldpsql/plugins/sdk"
)

// newHost returns a Host that the test closes, checking that every process
// it started is gone.
func newHost(t testing.TB) *Host {
	h := New(nil)
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		for _, pid := range h.pids() {
			if plugintest.Alive(pid) {
				t.Errorf("plugin process %d survived Host.Close", pid)
			}
		}
	})
	return h
}

func (h *Host) pids() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]int(nil), h.started...)
}

// pid is the process currently serving p (0 if none).
func (p *Plugin) pid() int {
	s, err := p.h.slot(p.spec.Name)
	if err != nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return 0
	}
	return s.cur.pid
}

func specFor(t testing.TB, name, bin string, artifact []byte) Spec {
	t.Helper()
	path := bins[bin]
	d, err := Digest(path)
	if err != nil {
		t.Fatal(err)
	}
	return Spec{Name: name, Path: path, SHA256: d, Artifact: artifact}
}

func get(t testing.TB, h *Host, s Spec) *Plugin {
	t.Helper()
	p, err := h.Get(context.Background(), s)
	if err != nil {
		t.Fatalf("Get(%s): %v", s.Name, err)
	}
	return p
}

// batches yields rows in batches of size k, then io.EOF.
func batches(rows [][]float32, k int) func() ([][]float32, error) {
	return func() ([][]float32, error) {
		if len(rows) == 0 {
			return nil, io.EOF
		}
		n := min(k, len(rows))
		b := rows[:n]
		rows = rows[n:]
		return b, nil
	}
}

// fitPCA fits a pca model in process on rows and returns it with its artifact, to load into a plugin.
func fitPCA(t testing.TB, params pcaenc.Params, rows [][]float32) (*pcaenc.Model, []byte) {
	t.Helper()
	m, err := pcaenc.FitRows(params, rows)
	if err != nil {
		t.Fatal(err)
	}
	art, err := m.Artifact()
	if err != nil {
		t.Fatal(err)
	}
	return m, art
}

// lowRank returns n rows of dimension dim lying on an affine subspace of
// dimension len(sd), with the given standard deviations along its axes.
func lowRank(rng *rand.Rand, n, dim int, sd []float64) [][]float32 {
	mu := make([]float64, dim)
	for i := range mu {
		mu[i] = rng.Float64()
	}
	axes := make([][]float64, len(sd))
	for k := range axes {
		axes[k] = make([]float64, dim)
		for i := range axes[k] {
			axes[k][i] = rng.NormFloat64() / math.Sqrt(float64(dim))
		}
	}
	rows := make([][]float32, n)
	for r := range rows {
		x := append([]float64(nil), mu...)
		for k, s := range sd {
			a := s * rng.NormFloat64()
			for i := range x {
				x[i] += a * axes[k][i]
			}
		}
		rows[r] = make([]float32, dim)
		for i, v := range x {
			rows[r][i] = float32(v)
		}
	}
	return rows
}

func l1(z []float32) float64 {
	s := 0.0
	for _, v := range z {
		s += math.Abs(float64(v))
	}
	return s
}

func TestPCAFitLoadEncodeDecode(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	rng := rand.New(rand.NewPCG(1, 2))
	const dim = 40
	aux := lowRank(rng, 3000, dim, []float64{5, 3, 2})

	p := get(t, h, specFor(t, "pca", "pca", nil))
	d, err := p.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "pca" || d.ProtocolVersion != sdk.ProtocolVersion || !d.CanFit || !d.HasDecoder || d.Ready() {
		t.Fatalf("unfitted description %+v", d)
	}
	if _, err := p.Encode(ctx, aux[:1]); !errors.Is(err, ErrNoModel) {
		t.Fatalf("Encode without a model: %v, want ErrNoModel", err)
	}
	if _, err := p.Fit(ctx, json.RawMessage(`{"d": 3, "l": 1e6, "oops": 1}`), dim, batches(aux, 500)); err == nil || !strings.Contains(err.Error(), "oops") {
		t.Fatalf("Fit with an unknown parameter: %v", err)
	}
	art, err := p.Fit(ctx, json.RawMessage(`{"d": 3, "l": 1e6}`), dim, batches(aux, 500))
	if err != nil {
		t.Fatal(err)
	}
	m, err := pcaenc.Load(art)
	if err != nil {
		t.Fatal(err)
	}
	if m.N != len(aux) || m.D != 3 || m.InputDim != dim {
		t.Fatalf("model n=%d d=%d dim=%d", m.N, m.D, m.InputDim)
	}
	for i := range m.Components { // orthonormal rows
		for j := range m.Components {
			dot := 0.0
			for k := range dim {
				dot += m.Components[i][k] * m.Components[j][k]
			}
			want := 0.0
			if i == j {
				want = 1
			}
			if math.Abs(dot-want) > 1e-9 {
				t.Errorf("components %d·%d = %v, want %v", i, j, dot, want)
			}
		}
	}
	if !(m.Variances[0] >= m.Variances[1] && m.Variances[1] >= m.Variances[2]) {
		t.Errorf("variances not decreasing: %v", m.Variances)
	}

	pid0 := p.pid()
	q := get(t, h, specFor(t, "pca", "pca", art))
	if q.pid() == pid0 {
		t.Fatal("a new artifact did not start a new process")
	}
	if _, err := p.Describe(ctx); !errors.Is(err, ErrReplaced) {
		t.Fatalf("old handle: %v, want ErrReplaced", err)
	}
	d, err = q.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.InputDim != dim || d.OutputDim != 3 || d.OutputSet.Kind != sdk.L1BallSet || d.OutputSet.Radius != 1e6 {
		t.Fatalf("fitted description %+v", d)
	}
	test := lowRank(rand.New(rand.NewPCG(1, 2)), 200, dim, []float64{5, 3, 2}) // same subspace, same mean
	z, err := q.Encode(ctx, test)
	if err != nil {
		t.Fatal(err)
	}
	local, err := m.Encode(test)
	if err != nil {
		t.Fatal(err)
	}
	for i := range z {
		for j := range z[i] {
			if z[i][j] != local[i][j] {
				t.Fatalf("row %d: plugin %v, in-process %v", i, z[i], local[i])
			}
		}
	}
	x, err := q.Decode(ctx, z)
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for i := range x {
		for k := range x[i] {
			worst = max(worst, math.Abs(float64(x[i][k]-test[i][k])))
		}
	}
	if worst > 1e-4 {
		t.Errorf("rank-3 data, d=3: reconstruction error %v", worst)
	}
}

func TestPCAEncodeStaysInBall(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	rng := rand.New(rand.NewPCG(3, 4))
	const dim = 30
	_, art := fitPCA(t, pcaenc.Params{D: 5, L: 1}, lowRank(rng, 500, dim, []float64{3, 2, 1, 1, 1, 0.5}))
	p := get(t, h, specFor(t, "pca", "pca", art))
	var adv [][]float32
	for _, s := range []float32{0, 1, -1, 1e3, -1e6, 1e30, math.MaxFloat32, -math.MaxFloat32} {
		x := make([]float32, dim)
		for i := range x {
			x[i] = float32(max(-math.MaxFloat32, min(math.MaxFloat32, float64(s)*rng.NormFloat64())))
		}
		adv = append(adv, x)
		y := make([]float32, dim)
		for i := range y {
			y[i] = s
		}
		adv = append(adv, y)
	}
	z, err := p.Encode(ctx, adv)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range z {
		if n := l1(v); !(n <= 1) {
			t.Errorf("row %d: ‖Encode(x)‖₁ = %v > l = 1", i, n)
		}
	}
	if _, err := p.Encode(ctx, [][]float32{make([]float32, dim-1)}); err == nil || !strings.Contains(err.Error(), "has 29 values") {
		t.Errorf("short row: %v", err)
	}
	bad := make([]float32, dim)
	bad[3] = float32(math.Inf(1))
	if _, err := p.Encode(ctx, [][]float32{bad}); !errors.Is(err, ErrNonFiniteInput) {
		t.Errorf("infinite input: %v, want the host's refusal", err)
	}
}

func TestIdentityFitClipAndChunks(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	rng := rand.New(rand.NewPCG(5, 6))
	const dim = 1000 // 1000 columns: 1032 rows per message, so 2500 rows take 3
	aux := make([][]float32, 300)
	for i := range aux {
		aux[i] = make([]float32, dim)
		for k := range aux[i] {
			aux[i][k] = float32(k) + float32(rng.Float64())
		}
	}
	p := get(t, h, specFor(t, "id", "identity", nil))
	art, err := p.Fit(ctx, nil, dim, batches(aux, 64))
	if err != nil {
		t.Fatal(err)
	}
	m, err := idenc.Load(art)
	if err != nil {
		t.Fatal(err)
	}
	p = get(t, h, specFor(t, "id", "identity", art))
	d, _ := p.Describe(ctx)
	if d.OutputSet.Kind != sdk.BoxSet || d.InputDim != dim || d.OutputDim != dim {
		t.Fatalf("description %+v", d.OutputSet.Kind)
	}
	for k := range dim {
		lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
		for _, r := range aux {
			lo, hi = min(lo, r[k]), max(hi, r[k])
		}
		if d.OutputSet.Lo[k] != float64(lo) || d.OutputSet.Hi[k] != float64(hi) || m.Lo[k] != lo {
			t.Fatalf("feature %d: box [%v, %v], want [%v, %v]", k, d.OutputSet.Lo[k], d.OutputSet.Hi[k], lo, hi)
		}
	}
	rows := make([][]float32, 2500)
	for i := range rows {
		rows[i] = make([]float32, dim)
		for k := range rows[i] {
			rows[i][k] = float32(k) + float32(3*rng.Float64()-1)
		}
	}
	if chunkRows(dim, dim) >= len(rows)/2 {
		t.Fatalf("test needs several chunks; chunk is %d rows", chunkRows(dim, dim))
	}
	z, err := p.Encode(ctx, rows)
	if err != nil {
		t.Fatal(err)
	}
	if len(z) != len(rows) {
		t.Fatalf("%d rows out for %d in", len(z), len(rows))
	}
	for i := range rows {
		if !d.OutputSet.Contains(z[i]) {
			t.Fatalf("row %d outside the box", i)
		}
		for k := range rows[i] {
			if want := min(max(rows[i][k], m.Lo[k]), m.Hi[k]); z[i][k] != want {
				t.Fatalf("row %d feature %d: %v, want %v", i, k, z[i][k], want)
			}
		}
	}
	// Decode (the identity: a copy) answers as much as it is sent, in chunks.
	x, err := p.Decode(ctx, z)
	if err != nil || len(x) != len(z) {
		t.Fatalf("Decode: %d rows, %v", len(x), err)
	}
	for i := range z {
		if !slices.Equal(x[i], z[i]) {
			t.Fatalf("Decode row %d differs", i)
		}
	}
	// Fit errors: from the row source, and from the plugin.
	boom := errors.New("boom")
	if _, err := p.Fit(ctx, nil, dim, func() ([][]float32, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("Fit with a failing row source: %v", err)
	}
	if _, err := p.Fit(ctx, json.RawMessage(`{"d": 2}`), dim, batches(aux, 64)); err == nil || !strings.Contains(err.Error(), "takes none") {
		t.Errorf("Fit with parameters: %v", err)
	}
	if _, err := p.Fit(ctx, nil, dim, batches(nil, 1)); err == nil || !strings.Contains(err.Error(), "no rows") {
		t.Errorf("Fit on nothing: %v", err)
	}
	if _, err := p.Encode(ctx, rows[:1]); err != nil { // still healthy
		t.Errorf("Encode after failed fits: %v", err)
	}
}

func TestDigestMismatchRefused(t *testing.T) {
	h := newHost(t)
	s := specFor(t, "pca", "pca", nil)
	right := s.SHA256
	s.SHA256 = strings.Repeat("0", 64)
	_, err := h.Get(context.Background(), s)
	var dm *DigestMismatchError
	if !errors.Is(err, ErrDigestMismatch) || !errors.As(err, &dm) || dm.Got != right || dm.Want != s.SHA256 {
		t.Fatalf("Get with a wrong digest: %v", err)
	}
	if !strings.Contains(err.Error(), right) || !strings.Contains(err.Error(), "refusing to run it") {
		t.Errorf("unclear message: %v", err)
	}
	if pids := h.pids(); len(pids) != 0 {
		t.Errorf("the binary ran: pids %v", pids)
	}
	if _, err := Handshake(context.Background(), s.Path, s.SHA256); !errors.Is(err, ErrDigestMismatch) {
		t.Errorf("Handshake with a wrong digest: %v", err)
	}
	for _, bad := range []Spec{
		{Name: "x", Path: "relative/pca", SHA256: right},
		{Name: "x", Path: s.Path, SHA256: "abc"},
		{Name: "", Path: s.Path, SHA256: right},
	} {
		if _, err := h.Get(context.Background(), bad); err == nil {
			t.Errorf("Get(%+v) accepted", bad)
		}
	}
}

func TestHandshake(t *testing.T) {
	for _, name := range []string{"pca", "identity"} {
		s := specFor(t, name, name, nil)
		d, err := Handshake(context.Background(), s.Path, strings.ToUpper(s.SHA256))
		if err != nil {
			t.Fatal(err)
		}
		if d.Name != name || d.ProtocolVersion != sdk.ProtocolVersion || !d.CanFit || d.Ready() {
			t.Errorf("%s: %+v", name, d)
		}
	}
}

func TestNotAPlugin(t *testing.T) {
	h := newHost(t)
	for _, path := range []string{"/bin/true", bins["notplugin"]} {
		if _, err := os.Stat(path); err != nil {
			continue
		}
		digest, err := Digest(path)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = h.Get(context.Background(), Spec{Name: "np", Path: path, SHA256: digest})
		if !errors.Is(err, ErrHandshake) || !strings.Contains(err.Error(), "did not start as an ldpsql encoder plugin") {
			t.Errorf("%s: %v", path, err)
		}
		if time.Since(start) > 5*time.Second {
			t.Errorf("%s: took %v to fail", path, time.Since(start))
		}
		t.Logf("%s: %v", path, err)
	}
	dir := t.TempDir()
	if _, err := h.Get(context.Background(), Spec{Name: "np", Path: dir, SHA256: strings.Repeat("a", 64)}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory: %v", err)
	}

	// A binary that never completes the handshake is killed at StartTimeout.
	script := dir + "/silent"
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec /bin/sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	digest, _ := Digest(script)
	start := time.Now()
	_, err := h.Get(context.Background(), Spec{Name: "silent", Path: script, SHA256: digest, StartTimeout: 500 * time.Millisecond})
	if !errors.Is(err, ErrHandshake) || !strings.Contains(err.Error(), "timeout while waiting for plugin to start") {
		t.Errorf("silent binary: %v", err)
	}
	if el := time.Since(start); el > 4*time.Second {
		t.Errorf("start timeout took %v", el)
	}
	for _, pid := range h.pids() {
		if plugintest.Alive(pid) {
			t.Errorf("process %d left after a failed start", pid)
		}
	}
}

func TestCrashMidBatchThenRestart(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	p := get(t, h, specFor(t, "crash", "crash", nil))
	ok := [][]float32{{1, 2}, {3, 4}}
	if _, err := p.Encode(ctx, ok); err != nil {
		t.Fatal(err)
	}
	pid := p.pid()
	rows := [][]float32{{1, 1}, {2, 2}, {-1, 0}, {3, 3}}
	_, err := p.Encode(ctx, rows)
	if !errors.Is(err, ErrCrashed) || !strings.Contains(err.Error(), "crashing on purpose at row 2") {
		t.Fatalf("Encode that crashes: %v", err)
	}
	t.Log(err)
	if plugintest.Alive(pid) {
		t.Errorf("crashed process %d still there", pid)
	}
	z, err := p.Encode(ctx, ok)
	if err != nil {
		t.Fatalf("Encode after the crash: %v", err)
	}
	if z[1][1] != 4 || p.pid() == pid || p.pid() == 0 {
		t.Errorf("after restart: %v, pid %d (was %d)", z, p.pid(), pid)
	}
}

func TestHangTimesOutKillsAndRestarts(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	s := specFor(t, "hang", "hang", nil)
	s.CallTimeout = 300 * time.Millisecond
	p := get(t, h, s)
	pid := p.pid()
	start := time.Now()
	_, err := p.Encode(ctx, [][]float32{{-1, 0}})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("Encode that hangs: %v", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("timeout took %v", el)
	}
	if plugintest.Alive(pid) {
		t.Errorf("hung process %d was not killed", pid)
	}
	if _, err := p.Encode(ctx, [][]float32{{1, 2}}); err != nil {
		t.Fatalf("Encode after the timeout: %v", err)
	}
	if p.pid() == pid {
		t.Error("not restarted")
	}
	// The caller's own deadline does not kill the process.
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	pid = p.pid()
	if _, err := p.Encode(cctx, [][]float32{{-1, 0}}); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTimeout) {
		t.Fatalf("Encode with a short caller deadline: %v", err)
	}
	if !plugintest.Alive(pid) || p.pid() != pid {
		t.Error("the caller's deadline killed the process")
	}
}

func TestLiarOutputsReturnedAsIsButShapesChecked(t *testing.T) {
	// The liar offers shared memory unless its artifact says "off": every lie
	// is told both ways.
	for _, tc := range []struct {
		transport string
		artifact  []byte
		bad       map[float32]string
	}{
		{"grpc", []byte(`{"radius": 1, "shm": "off"}`), map[float32]string{3: "1 rows of 2 values for 2 rows", 4: "2 rows of 3 values", 5: "needs 4 values (16 bytes), got 11 bytes"}},
		{"shm", nil, map[float32]string{3: "1 rows of 2 values (8 bytes) at offset 64 of region", 4: "2 rows of 3 values", 5: "2×2 matrix of 15 bytes"}},
	} {
		t.Run(tc.transport, func(t *testing.T) { testLiar(t, tc.artifact, tc.transport == "shm", tc.bad) })
	}
}

func testLiar(t *testing.T, artifact []byte, wantShm bool, bad map[float32]string) {
	ctx := context.Background()
	h := newHost(t)
	p := get(t, h, specFor(t, "liar", "liar", artifact))
	if got := p.sharedMemory(); got != wantShm {
		t.Fatalf("shared memory in use: %v, want %v", got, wantShm)
	}
	d, err := p.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.OutputSet.Kind != sdk.L1BallSet || d.OutputSet.Radius != 1 || d.HasDecoder || d.CanFit {
		t.Fatalf("description %+v", d)
	}
	row := func(mode float32) [][]float32 { return [][]float32{{mode, 0, 0, 0}, {0, 0, 0, 0}} }

	z, err := p.Encode(ctx, row(0))
	if err != nil || len(z) != 2 || !d.OutputSet.Contains(z[0]) {
		t.Fatalf("honest answer: %v, %v", z, err)
	}
	z, err = p.Encode(ctx, row(1))
	if err != nil || !math.IsNaN(float64(z[0][0])) || d.OutputSet.Contains(z[0]) {
		t.Errorf("NaN answer: %v, %v (want it returned as is)", z, err)
	}
	z, err = p.Encode(ctx, row(2))
	if err != nil || z[0][0] != 1e30 || d.OutputSet.Contains(z[0]) {
		t.Errorf("answer outside the ball: %v, %v (want it returned as is)", z, err)
	}
	for mode, want := range bad {
		if _, err := p.Encode(ctx, row(mode)); !errors.Is(err, ErrBadOutput) || !strings.Contains(err.Error(), want) {
			t.Errorf("mode %v: %v, want ErrBadOutput (%s)", mode, err, want)
		}
	}
	if _, err := p.Encode(ctx, row(6)); err == nil || !strings.Contains(err.Error(), "I do not like these rows") {
		t.Errorf("plugin error: %v", err)
	}
	if _, err := p.Encode(ctx, [][]float32{{0, 0, 0}}); err == nil || !strings.Contains(err.Error(), "row 0 has 3 values, the plugin takes 4") {
		t.Errorf("short input row: %v", err)
	}
	if _, err := p.Decode(ctx, [][]float32{{0, 0}}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Decode: %v", err)
	}
	if _, err := p.Fit(ctx, nil, 4, batches(nil, 1)); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Fit: %v", err)
	}
	if _, err := p.Encode(ctx, row(0)); err != nil {
		t.Errorf("bad answers must not kill the process: %v", err)
	}

	if wantShm {
		return
	}
	// Descriptions are checked too.
	if _, err := h.Get(ctx, specFor(t, "liar2", "liar", []byte(`{"radius": -1, "protocol": 1}`))); !errors.Is(err, ErrBadOutput) || !strings.Contains(err.Error(), "radius") {
		t.Errorf("negative radius: %v", err)
	}
	if _, err := h.Get(ctx, specFor(t, "liar3", "liar", []byte(`{"radius": Infinity}`))); err == nil {
		t.Errorf("bad artifact accepted")
	}
	if _, err := h.Get(ctx, specFor(t, "liar4", "liar", []byte(`{"radius": 1, "protocol": 2}`))); !errors.Is(err, ErrHandshake) || !strings.Contains(err.Error(), "protocol version 2") {
		t.Errorf("protocol 2: %v", err)
	}
}

func TestConcurrentCalls(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	m, art := fitPCA(t, pcaenc.Params{D: 4, L: 5}, lowRank(rand.New(rand.NewPCG(7, 8)), 400, 20, []float64{4, 3, 2, 1}))
	s := specFor(t, "pca", "pca", art)
	rows := lowRank(rand.New(rand.NewPCG(9, 10)), 300, 20, []float64{1})
	want, _ := m.Encode(rows)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := h.Get(ctx, s) // same generation: shares the process
			if err == nil {
				var z [][]float32
				z, err = p.Encode(ctx, rows)
				if err == nil && z[299][3] != want[299][3] {
					err = errors.New("wrong answer")
				}
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := len(h.pids()); n != 1 {
		t.Errorf("%d processes for one generation", n)
	}
}

func TestCloseLeavesNoProcess(t *testing.T) {
	ctx := context.Background()
	h := New(nil)
	var ps []*Plugin
	for _, name := range []string{"pca", "identity", "crash", "hang", "liar"} {
		ps = append(ps, get(t, h, specFor(t, name, name, nil)))
	}
	// One process is busy (hung) when Close runs.
	go ps[3].Encode(ctx, [][]float32{{-1, 0}}) //nolint:errcheck
	time.Sleep(100 * time.Millisecond)
	pids := h.pids()
	if len(pids) != 5 {
		t.Fatalf("pids %v", pids)
	}
	for _, pid := range pids {
		if !plugintest.Alive(pid) {
			t.Fatalf("process %d not running", pid)
		}
	}
	start := time.Now()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close took %v", time.Since(start))
	for _, pid := range pids {
		if plugintest.Alive(pid) {
			t.Errorf("process %d survived Close", pid)
		}
	}
	if left := plugintest.Processes(binDir); len(left) > 0 {
		t.Errorf("plugin processes left: %v", left)
	}
	if _, err := ps[0].Describe(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	if _, err := h.Get(ctx, specFor(t, "pca", "pca", nil)); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestReplacedWhileBusyThenClose(t *testing.T) {
	ctx := context.Background()
	h := New(nil)
	s1 := specFor(t, "hang", "hang", nil)
	s1.CallTimeout = time.Minute
	// The same binary at another path is another generation.
	s2 := s1
	s2.Path = s1.Path + "-copy"
	data, err := os.ReadFile(s1.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s2.Path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	p1 := get(t, h, s1)
	pid1 := p1.pid()
	done := make(chan error, 1)
	go func() { _, err := p1.Encode(ctx, [][]float32{{-1, 0}}); done <- err }()
	time.Sleep(100 * time.Millisecond)
	p2 := get(t, h, s2)
	if _, err := p2.Encode(ctx, [][]float32{{1, 2}}); err != nil {
		t.Fatal(err)
	}
	if !plugintest.Alive(pid1) {
		t.Fatal("the replaced process was stopped while a call was in flight")
	}
	if _, err := p1.Encode(ctx, [][]float32{{1, 2}}); !errors.Is(err, ErrReplaced) {
		t.Errorf("new call on the replaced handle: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("in-flight call after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("in-flight call still blocked after Close")
	}
	for _, pid := range h.pids() {
		if plugintest.Alive(pid) {
			t.Errorf("process %d survived Close", pid)
		}
	}
}

func TestChunking(t *testing.T) {
	for _, tc := range []struct{ n, in, out, step, chunks int }{
		{0, 784, 8, 1, 0},
		{1, 784, 8, 1, 1},
		{1316, 784, 8, 1316, 1}, // exactly one full message
		{1317, 784, 8, 659, 2},  // split evenly, not 1316 + 1
		{4096, 784, 8, 1024, 4}, // the benchmark's batches
		{2500, 1000, 1000, 834, 3},
		{10, 1 << 22, 1, 1, 10}, // rows over the limit still go one by one
	} {
		step, chunks := chunking(tc.n, tc.in, tc.out)
		if step != tc.step || chunks != tc.chunks {
			t.Errorf("chunking(%d, %d, %d) = %d, %d; want %d, %d", tc.n, tc.in, tc.out, step, chunks, tc.step, tc.chunks)
		}
		if tc.n > 0 && (step > chunkRows(tc.in, tc.out) || (chunks-1)*step >= tc.n || chunks*step < tc.n) {
			t.Errorf("chunking(%d, %d, %d) = %d, %d: does not cover the rows within the limit", tc.n, tc.in, tc.out, step, chunks)
		}
	}
}
