package clm

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/ldpsql/ldpsql/training/datasets"
	"github.com/ldpsql/ldpsql/training/nn"
	"github.com/ldpsql/ldpsql/training/nn/graph"
)

// BenchmarkEpoch45k times a CLM epoch on 45,000 Fashion-MNIST images with the defaults and image views
// (d 32, hidden 512/256, head 128/64, batch 128: 2 × 128 views a step). #14's target: at most 3× a VLM
// epoch. Compare them interleaved, on one machine:
//
//	for i in 1 2 3; do
//	  go test -tags openblas -run XXX -bench Epoch45k -benchtime 1x ./training/clm/
//	  go test -tags openblas -run XXX -bench 'Epoch45k$' -benchtime 1x ./training/vlm/
//	done
func BenchmarkEpoch45k(b *testing.B) {
	imgs, from, err := datasets.LoadFashionMNIST("train")
	if err != nil {
		b.Skip(err)
	}
	rows := imgs.Pixels[:45000]
	b.Logf("Fashion-MNIST from %s; BLAS %s", from, graph.BLAS)
	cfg := Config{ImageShape: []int{28, 28}, Epochs: b.N}
	cpu0 := cpuTime()
	b.ResetTimer()
	if _, err := Train(context.Background(), cfg, rows, func(p nn.Progress) {
		b.Logf("epoch %d: loss %.3f, %.0f rows/s", p.Epoch, p.Loss, p.RowsPerSec)
	}); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/epoch")
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/epoch")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
