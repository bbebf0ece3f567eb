package main

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ldpsql/ldpsql/plugins/host"
	"github.com/ldpsql/ldpsql/plugins/internal/plugintest"
	"github.com/ldpsql/ldpsql/plugins/sdk"
	"github.com/ldpsql/ldpsql/training/vlm"
)

// trainSmall trains a small VLM on rows in [0, 1] and returns it.
func trainSmall(t *testing.T) (*vlm.Model, [][]float32) {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 1))
	rows := make([][]float32, 500)
	for i := range rows {
		a, b := r.Float64(), r.Float64()
		rows[i] = make([]float32, 12)
		for j := range rows[i] {
			rows[i][j] = float32((a*float64(j%3) + b*float64(j%4)) / 5)
		}
	}
	m, err := vlm.Train(context.Background(), vlm.Config{D: 3, L: 5, Hidden: []int{16, 8}, Epochs: 2, Seed: 3}, rows, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m, rows
}

func TestPluginInProcess(t *testing.T) {
	p := newPlugin()
	d := p.Describe()
	if d.Ready() || d.OutputSet.Kind != sdk.NoSet || !d.HasDecoder || d.CanFit || d.Name != Name {
		t.Fatalf("before Load: %+v", d)
	}
	if _, err := p.Encode([][]float32{{1}}); err == nil {
		t.Fatal("Encode before Load succeeded")
	}
	if _, err := p.Decode([][]float32{{1}}); err == nil {
		t.Fatal("Decode before Load succeeded")
	}
	if err := p.Load([]byte("not an artifact")); err == nil {
		t.Fatal("Load accepted garbage")
	}
	m, rows := trainSmall(t)
	art, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Load(art); err != nil {
		t.Fatal(err)
	}
	d = p.Describe()
	if d.InputDim != 12 || d.OutputDim != 3 || d.OutputSet.Kind != sdk.L1BallSet || d.OutputSet.Radius != 5 || d.Validate() != nil {
		t.Fatalf("after Load: %+v", d)
	}
	z, err := p.Encode(rows[:4])
	if err != nil {
		t.Fatal(err)
	}
	for _, zi := range z {
		if !d.OutputSet.Contains(zi) {
			t.Fatalf("output %v outside the declared set", zi)
		}
	}
}

func TestPluginThroughHost(t *testing.T) {
	dir := t.TempDir()
	bins, err := plugintest.Build(dir, "./plugins/builtin/vlm")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if pids := plugintest.Processes(dir); len(pids) > 0 {
			t.Errorf("plugin processes left: %v", pids)
		}
	}()
	path := bins["vlm"]
	digest, err := host.Digest(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Registration handshake: no model yet, so no output set.
	d0, err := host.Handshake(ctx, path, digest)
	if err != nil {
		t.Fatal(err)
	}
	if d0.Name != Name || d0.Version != Version || d0.Ready() || !d0.HasDecoder || d0.CanFit {
		t.Fatalf("handshake description %+v", d0)
	}

	m, rows := trainSmall(t)
	art, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	h := host.New(nil)
	defer h.Close()
	p, err := h.Get(ctx, host.Spec{Name: "vlm-test", Path: path, SHA256: digest, Artifact: art})
	if err != nil {
		t.Fatal(err)
	}
	d, err := p.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.InputDim != 12 || d.OutputDim != 3 || d.OutputSet.Kind != sdk.L1BallSet || d.OutputSet.Radius != 5 {
		t.Fatalf("description %+v", d)
	}
	// Encode through the plugin equals Encode in process (bit for bit when
	// both use the same BLAS: plugintest builds the plugin without build
	// tags) and lies in the ball; also for huge inputs.
	exact := !strings.HasPrefix(vlm.BLAS, "openblas")
	same := func(a, b float32) bool {
		if exact {
			return math.Float32bits(a) == math.Float32bits(b)
		}
		return math.Abs(float64(a-b)) <= 1e-5*(1+math.Abs(float64(b)))
	}
	in := append([][]float32{}, rows...)
	huge := make([]float32, 12)
	for i := range huge {
		huge[i] = float32([]float64{math.MaxFloat32, -1e30}[i%2])
	}
	in = append(in, huge)
	got, err := p.Encode(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	want, err := m.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(in) {
		t.Fatalf("%d outputs for %d rows", len(got), len(in))
	}
	for i := range got {
		if !d.OutputSet.Contains(got[i]) {
			t.Fatalf("row %d: %v outside the ℓ1 ball", i, got[i])
		}
		for k := range got[i] {
			if !same(got[i][k], want[i][k]) {
				t.Fatalf("row %d: plugin %v, in process %v", i, got[i], want[i])
			}
		}
	}
	// Decode: 12 values in [0, 1] per latent, equal to the in-process decoder.
	lat := [][]float32{{0, 0, 0}, {3, -40, 1e20}}
	x, err := p.Decode(ctx, lat)
	if err != nil {
		t.Fatal(err)
	}
	wx, _ := m.Decode(lat)
	for i := range x {
		if len(x[i]) != 12 {
			t.Fatalf("decoded row %d has %d values", i, len(x[i]))
		}
		for k, v := range x[i] {
			if !(v >= 0 && v <= 1) || !same(v, wx[i][k]) {
				t.Fatalf("decoded row %d: %v, in process %v", i, x[i], wx[i])
			}
		}
	}
	// A NaN input is refused by the plugin with its own error.
	bad := append([]float32(nil), rows[0]...)
	bad[5] = float32(math.NaN())
	if _, err := p.Encode(ctx, [][]float32{bad}); err == nil || !strings.Contains(err.Error(), "finite") {
		t.Fatalf("NaN row: %v", err)
	}
	// A corrupted artifact fails to load.
	corrupt := append([]byte(nil), art...)
	corrupt[len(corrupt)/2] ^= 1
	if _, err := h.Get(ctx, host.Spec{Name: "vlm-bad", Path: path, SHA256: digest, Artifact: corrupt}); err == nil {
		t.Fatal("corrupted artifact loaded")
	} else {
		t.Logf("corrupted artifact: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
}
