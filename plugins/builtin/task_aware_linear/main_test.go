package main

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/ldpsql/ldpsql/plugins/host"
	"github.com/ldpsql/ldpsql/plugins/internal/plugintest"
	"github.com/ldpsql/ldpsql/plugins/sdk"
	"github.com/ldpsql/ldpsql/training/datasets"
	"github.com/ldpsql/ldpsql/training/taskaware"
)

// wdbc returns the 569 WDBC rows, min-max scaled to [0, 1].
func wdbc(t *testing.T) [][]float32 {
	t.Helper()
	w, err := datasets.LoadWDBC()
	if err != nil {
		t.Fatal(err)
	}
	n := len(w.Features[0])
	rows := make([][]float32, len(w.Features))
	for j := range n {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, r := range w.Features {
			lo, hi = min(lo, r[j]), max(hi, r[j])
		}
		for i, r := range w.Features {
			if rows[i] == nil {
				rows[i] = make([]float32, n)
			}
			rows[i][j] = float32((r[j] - lo) / (hi - lo))
		}
	}
	return rows
}

// batches streams rows in batches of 100, as the host's Fit does.
func batches(rows [][]float32) func() ([][]float32, error) {
	i := 0
	return func() ([][]float32, error) {
		if i >= len(rows) {
			return nil, io.EOF
		}
		j := min(i+100, len(rows))
		b := rows[i:j]
		i = j
		return b, nil
	}
}

type stream struct{ next func() ([][]float32, error) }

func (s stream) Next() ([][]float32, error) { return s.next() }

const params = `{"weights": [2,2,2,2,2,2,2,2,2,2,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1], "eps": 20, "z": 3}`

func TestPluginInProcess(t *testing.T) {
	p := newPlugin()
	if d := p.Describe(); d.Ready() || !d.HasDecoder || !d.CanFit || d.Name != Name {
		t.Fatalf("before Load: %+v", d)
	}
	if _, err := p.Encode([][]float32{{1}}); err == nil {
		t.Fatal("Encode before Load succeeded")
	}
	if _, err := p.Fit(json.RawMessage(`{"eps": 5}`), 30, stream{batches(nil)}); err == nil || !strings.Contains(err.Error(), `give the task`) {
		t.Fatalf("Fit without a task: %v", err)
	}
	rows := wdbc(t)
	art, err := p.Fit(json.RawMessage(params), 30, stream{batches(rows)})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Load(art); err != nil {
		t.Fatal(err)
	}
	m, _ := taskaware.Load(art)
	d := p.Describe()
	if d.InputDim != 30 || d.OutputDim != m.Z || d.OutputSet.Kind != sdk.L1BallSet || d.OutputSet.Radius != m.Delta1/2 || d.Validate() != nil {
		t.Fatalf("after Load: %+v", d)
	}
	z, err := p.Encode(rows)
	if err != nil {
		t.Fatal(err)
	}
	for _, zi := range z {
		if !d.OutputSet.Contains(zi) {
			t.Fatalf("output %v outside the declared set", zi)
		}
	}
}

// Fit, Encode and Decode through the host, in a plugin process: the artifact is the in-process fit's,
// the encodings and decodings are bit for bit the in-process model's, every encoding (huge inputs
// included) lies in the declared ball, and the extreme vertices are Δ1 = 2·radius apart, so the
// host's Laplace scale 2·radius/ε is Δ1/ε.
func TestPluginThroughHost(t *testing.T) {
	dir := t.TempDir()
	bins, err := plugintest.Build(dir, "./plugins/builtin/task_aware_linear")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if pids := plugintest.Processes(dir); len(pids) > 0 {
			t.Errorf("plugin processes left: %v", pids)
		}
	}()
	path := bins["task_aware_linear"]
	digest, err := host.Digest(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d0, err := host.Handshake(ctx, path, digest)
	if err != nil {
		t.Fatal(err)
	}
	if d0.Name != Name || d0.Version != Version || d0.Ready() || !d0.HasDecoder || !d0.CanFit {
		t.Fatalf("handshake description %+v", d0)
	}
	h := host.New(nil)
	defer h.Close()
	fitter, err := h.Get(ctx, host.Spec{Name: "fit", Path: path, SHA256: digest})
	if err != nil {
		t.Fatal(err)
	}
	rows := wdbc(t)
	art, err := fitter.Fit(ctx, json.RawMessage(params), 30, batches(rows))
	if err != nil {
		t.Fatal(err)
	}
	pp, _ := taskaware.ParseParams([]byte(params))
	m, err := taskaware.FitRows(pp, rows)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := m.Artifact()
	if string(art) != string(want) {
		t.Fatal("the plugin's artifact differs from the in-process fit's")
	}
	if _, err := fitter.Fit(ctx, json.RawMessage(`{"weights": [1], "eps": 5}`), 30, batches(rows)); err == nil ||
		!strings.Contains(err.Error(), "weights has 1 values, the features have 30") {
		t.Fatalf("a wrong weights length: %v", err)
	}

	p, err := h.Get(ctx, host.Spec{Name: "ta", Path: path, SHA256: digest, Artifact: art})
	if err != nil {
		t.Fatal(err)
	}
	d, err := p.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.InputDim != 30 || d.OutputDim != m.Z || d.OutputSet.Kind != sdk.L1BallSet || d.OutputSet.Radius != m.Radius {
		t.Fatalf("description %+v", d)
	}
	ex, ey := m.Extremes()
	in := append([][]float32{}, rows...)
	x32, y32, huge := make([]float32, 30), make([]float32, 30), make([]float32, 30)
	for j := range ex {
		x32[j], y32[j] = float32(ex[j]), float32(ey[j])
		huge[j] = float32([]float64{math.MaxFloat32, -1e30}[j%2])
	}
	in = append(in, x32, y32, huge)
	got, err := p.Encode(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	local, _ := m.Encode(in)
	for i := range got {
		if !d.OutputSet.Contains(got[i]) {
			t.Fatalf("row %d: %v outside the ℓ1 ball of radius %v", i, got[i], d.OutputSet.Radius)
		}
		for k := range got[i] {
			if math.Float32bits(got[i][k]) != math.Float32bits(local[i][k]) {
				t.Fatalf("row %d: plugin %v, in process %v", i, got[i], local[i])
			}
		}
	}
	a, b := got[len(rows)], got[len(rows)+1]
	dist := 0.0
	for k := range a {
		dist += math.Abs(float64(a[k]) - float64(b[k]))
	}
	if math.Abs(dist-2*d.OutputSet.Radius) > 1e-5*dist {
		t.Fatalf("the extreme vertices encode %v apart, the declared diameter is %v", dist, 2*d.OutputSet.Radius)
	}
	dec, err := p.Decode(ctx, got[:5])
	if err != nil {
		t.Fatal(err)
	}
	wdec, _ := m.Decode(got[:5])
	for i := range dec {
		for j := range dec[i] {
			if math.Float32bits(dec[i][j]) != math.Float32bits(wdec[i][j]) {
				t.Fatalf("decode row %d: plugin %v, in process %v", i, dec[i], wdec[i])
			}
		}
	}
	t.Logf("Z = %d, radius %.4g, noise scale at ε = %v: %.4g", m.Z, m.Radius, m.Eps, m.NoiseScale)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
}
