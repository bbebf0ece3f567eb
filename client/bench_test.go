package client

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ldpsql/ldpsql/internal/cputime"
	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/training/vlm"
)

// BenchmarkPrivatiseVLM measures client-side privatisation with a published d = 8 VLM (the default
// architecture, 784 → 400 → 150 → 50 → 8) on 784-feature rows, 1,024 rows per call: #13's target is
// 50,000 rows/s on one core. Besides rows/s (wall clock), it reports rows/cpu-s, rows per second of
// the process's CPU time (Unix only), which a machine shared with other work slows far less.
//
//	go test -run XXX -bench PrivatiseVLM -cpu 1 ./client/
func BenchmarkPrivatiseVLM(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	rows := make([][]float32, 1024)
	for i := range rows {
		rows[i] = make([]float32, 784)
		for j := range rows[i] {
			rows[i][j] = r.Float32()
		}
	}
	cfg := vlm.DefaultConfig()
	cfg.Epochs, cfg.EpsPretrain = 1, 33
	m, err := vlm.Train(context.Background(), cfg, rows[:64], nil)
	if err != nil {
		b.Fatal(err)
	}
	art, _ := m.MarshalBinary()
	file, err := Marshal(File{Name: "v", Plugin: "vlm", InputDim: 784, OutputDim: 8, Set: Set{Kind: "l1_ball", Radius: cfg.L}, Artifact: art, ExportedAt: time.Unix(0, 0)})
	if err != nil {
		b.Fatal(err)
	}
	mech, err := Load(file)
	if err != nil {
		b.Fatal(err)
	}
	src := mechanisms.NewCryptoSource()
	b.ResetTimer()
	cpu0 := cputime.Process()
	for range b.N {
		if _, err := mech.Privatise(rows, mechanisms.RandomiserLaplace, 4, src); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(rows))/b.Elapsed().Seconds(), "rows/s")
	if cpu := cputime.Process() - cpu0; cpu > 0 {
		b.ReportMetric(float64(b.N*len(rows))/cpu.Seconds(), "rows/cpu-s")
	}
}
