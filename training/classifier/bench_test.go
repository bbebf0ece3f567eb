package classifier

import (
	"context"
	"math"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/ldpsql/ldpsql/training/nn"
)

// cpuTime is the process's user+system CPU time: reported next to the wall
// time because the benchmarks run on shared machines, where wall time
// includes waiting for a CPU.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchMarginal times one epoch (N/BatchSize Adam steps, each exact over
// all M auxiliary points) of the marginal objective; setup (the table) is
// not timed.
func benchMarginal(b *testing.B, n, m, d, k int, budget int64, epsY float64) {
	spec := synthSpec{K: k, D: d, M: m, N: n, Means: randomMeans(1, k, d, 2), Sigma: 1, L: 10, EpsX: 5.6, EpsY: epsY, Seed: 1}
	data := spec.make()
	cfg := DefaultConfig()
	cfg.MemoryBudget = budget
	cfg = cfg.withDefaults()
	sizes, _ := netSizes(d, cfg.Hidden, k)
	nt := newNet(sizes)
	nt.init(rand.New(rand.NewPCG(1, streamInit)))
	std := nn.FitStandardiser(data.aux, d)
	tr, err := newMarginalTrainer(context.Background(), cfg, nt, std, data.train, MarginalData{})
	if err != nil {
		b.Fatal(err)
	}
	rows := allRows(n)
	grad := make([]float64, len(nt.params))
	opt := nn.NewAdam[float32, float64](len(nt.params), cfg.LR)
	b.ResetTimer()
	c0 := cpuTime()
	for range b.N {
		for b0 := 0; b0 < n; b0 += cfg.BatchSize {
			tr.lossGrad(nt, rows[b0:min(n, b0+cfg.BatchSize)], grad)
			opt.Step(nt.params, grad)
		}
	}
	b.ReportMetric((cpuTime()-c0).Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(n)*float64(m)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpairs/s")
}

// BenchmarkMarginalEpoch is one epoch at the thesis's MNIST scale: N =
// 13,500 privatised rows, M = 45,000 auxiliary latents, d = 8, K = 10,
// hidden {50}, batch 128 (106 steps). "table" precomputes the 2.4 GB N×M
// table (the default 4 GiB budget), "stream" computes each row's terms per
// step in blocks (budget < 0: no table), "logspace" uses R = identity
// (ε_y = ∞), which needs the log-space kernel.
func BenchmarkMarginalEpoch(b *testing.B) {
	b.Run("table", func(b *testing.B) { benchMarginal(b, 13500, 45000, 8, 10, 0, 2.4) })
	b.Run("stream", func(b *testing.B) { benchMarginal(b, 13500, 45000, 8, 10, -1, 2.4) })
	b.Run("logspace/table", func(b *testing.B) { benchMarginal(b, 13500, 45000, 8, 10, 0, math.Inf(1)) })
	b.Run("logspace/stream", func(b *testing.B) { benchMarginal(b, 13500, 45000, 8, 10, -1, math.Inf(1)) })
}

func BenchmarkMarginalEpochSmall(b *testing.B) {
	b.Run("table", func(b *testing.B) { benchMarginal(b, 2000, 5000, 8, 10, 0, 2.4) })
	b.Run("stream", func(b *testing.B) { benchMarginal(b, 2000, 5000, 8, 10, -1, 2.4) })
	b.Run("logspace/stream", func(b *testing.B) { benchMarginal(b, 2000, 5000, 8, 10, -1, math.Inf(1)) })
}

// BenchmarkMarginalSetup times preparing the training split at the MNIST
// scale: every row's nearest auxiliary point (both paths), and the N×M
// table ("table" only).
func BenchmarkMarginalSetup(b *testing.B) {
	spec := synthSpec{K: 10, D: 8, M: 45000, N: 13500, Means: randomMeans(1, 10, 8, 2), Sigma: 1, L: 10, EpsX: 5.6, EpsY: 2.4, Seed: 1}
	data := spec.make()
	std := nn.FitStandardiser(data.aux, 8)
	nt := newNet([]int{8, 50, 10})
	pr := newPrior(nt, std, data.aux, data.r)
	for _, table := range []bool{true, false} {
		name := map[bool]string{true: "table", false: "stream"}[table]
		b.Run(name, func(b *testing.B) {
			c0 := cpuTime()
			for range b.N {
				if _, err := newMset(context.Background(), pr, data.train.Noisy, data.train.Labels, data.b, table, nn.Workers()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((cpuTime()-c0).Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}

func benchForward(b *testing.B, n, d, k int) {
	r := rand.New(rand.NewPCG(1, 2))
	x := make([][]float32, n)
	y := make([]int, n)
	for i := range x {
		x[i] = make([]float32, d)
		for j := range x[i] {
			x[i][j] = float32(r.NormFloat64())
		}
		y[i] = r.IntN(k)
	}
	cfg := DefaultConfig()
	sizes, _ := netSizes(d, cfg.Hidden, k)
	nt := newNet(sizes)
	nt.init(rand.New(rand.NewPCG(1, streamInit)))
	tr := newForwardTrainer(nt, nn.FitStandardiser(x, d), ForwardData{X: x, Labels: y, R: KRRMatrix(1, k)}, ForwardData{}, cfg.BatchSize)
	rows := allRows(n)
	grad := make([]float64, len(nt.params))
	opt := nn.NewAdam[float32, float64](len(nt.params), cfg.LR)
	b.ResetTimer()
	c0 := cpuTime()
	for range b.N {
		for b0 := 0; b0 < n; b0 += cfg.BatchSize {
			tr.lossGrad(nt, rows[b0:min(n, b0+cfg.BatchSize)], grad)
			opt.Step(nt.params, grad)
		}
	}
	b.ReportMetric((cpuTime()-c0).Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkForwardEpoch is one epoch of the forward objective on 13,500
// rows: 8-dim latents and 784-dim noisy pixels.
func BenchmarkForwardEpoch(b *testing.B) {
	b.Run("d=8", func(b *testing.B) { benchForward(b, 13500, 8, 10) })
	b.Run("d=784", func(b *testing.B) { benchForward(b, 13500, 784, 10) })
}

var sinkF32 float32

func BenchmarkFastExp(b *testing.B) {
	xs := make([]float32, 4096)
	for i := range xs {
		xs[i] = -float32(i%80) - 0.37
	}
	b.Run("fexp", func(b *testing.B) {
		s := float32(0)
		for i := range b.N {
			s += fexp(xs[i&4095])
		}
		sinkF32 = s
	})
	b.Run("math.Exp", func(b *testing.B) {
		s := float32(0)
		for i := range b.N {
			s += float32(math.Exp(float64(xs[i&4095])))
		}
		sinkF32 = s
	})
}

// BenchmarkStreamKernel times the streamed kernels on one row against
// 45,000 auxiliary points (d = 8): ns/pair is the cost of one pair's
// distance, exponential and sum (or axpy).
func BenchmarkStreamKernel(b *testing.B) {
	const m, d = 45000, 8
	at, z := streamCase(rand.New(rand.NewPCG(1, 2)), m, d, 1)
	q := make([]float32, m)
	fill(q, 0.5)
	h := make([]float32, m)
	var c0 time.Duration
	pairs := func(b *testing.B) {
		b.ReportMetric((cpuTime()-c0).Seconds()*1e9/float64(b.N)/m, "cpu-ns/pair")
	}
	b.Run("probSum", func(b *testing.B) {
		var acc [8]float64
		c0 = cpuTime()
		for range b.N {
			at.probSum(z, 0, 0.28, q, 0, m, &acc)
		}
		pairs(b)
	})
	b.Run("probAxpy", func(b *testing.B) {
		c0 = cpuTime()
		for range b.N {
			for m0 := 0; m0 < m; m0 += auxChunk {
				at.probAxpy(z, 0, 0.28, 1e-3, h, m0, min(auxChunk, m-m0))
			}
		}
		pairs(b)
	})
	b.Run("tableDot", func(b *testing.B) {
		e := make([]float32, m)
		fill(e, 0.25)
		var acc [8]float64
		c0 = cpuTime()
		for range b.N {
			dot8(e, q, &acc)
		}
		pairs(b)
	})
}
