package main

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ldpsql/ldpsql/plugins/host"
	"github.com/ldpsql/ldpsql/plugins/sdk"
)

// TestAsPlugin builds this example, registers it the way the host does
// (digest, handshake) and encodes through the plugin process.
func TestAsPlugin(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "mean-pool")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	digest, err := host.Digest(bin)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, err := host.Handshake(ctx, bin, digest)
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "mean-pool" || d.InputDim != 784 || d.OutputDim != 49 || d.OutputSet.Kind != sdk.L1BallSet || d.OutputSet.Radius != Radius || !d.HasDecoder || d.CanFit {
		t.Fatalf("description %+v", d)
	}

	h := host.New(nil)
	defer h.Close()
	p, err := h.Get(ctx, host.Spec{Name: "mean-pool", Path: bin, SHA256: digest})
	if err != nil {
		t.Fatal(err)
	}
	small, big := make([]float32, InputDim), make([]float32, InputDim)
	for k := range small {
		small[k] = float32(k/Group) / 1000 // group j has mean j/1000: ‖·‖₁ = 1.176
		big[k] = 1                         // every mean is 1: ‖·‖₁ = 49, scaled to 10
	}
	z, err := p.Encode(ctx, [][]float32{small, big})
	if err != nil {
		t.Fatal(err)
	}
	for j := range z[0] {
		if math.Abs(float64(z[0][j])-float64(j)/1000) > 1e-6 {
			t.Fatalf("mean of group %d: %v", j, z[0][j])
		}
	}
	if !d.OutputSet.Contains(z[1]) {
		t.Errorf("clipped row outside the ball")
	}
	x, err := p.Decode(ctx, z[:1])
	if err != nil {
		t.Fatal(err)
	}
	if x[0][100] != z[0][100/Group] {
		t.Errorf("decode %v", x[0][:20])
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatal(err)
	}
}

// TestEncodeInProcess tests the encoder without a process.
func TestEncodeInProcess(t *testing.T) {
	x := make([]float32, InputDim)
	for k := range x {
		x[k] = -3
	}
	z, err := meanPool{}.Encode([][]float32{x})
	if err != nil {
		t.Fatal(err)
	}
	if !(meanPool{}).Describe().OutputSet.Contains(z[0]) {
		t.Error("outside the ball")
	}
	x[5] = float32(math.NaN())
	if _, err := (meanPool{}).Encode([][]float32{x}); err == nil {
		t.Error("NaN accepted")
	}
	if err := (meanPool{}).Describe().Validate(); err != nil {
		t.Error(err)
	}
}
