package host

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ldpsql/ldpsql/plugins/builtin/pca/pcaenc"
)

const (
	benchRows  = 60000
	benchDim   = 784
	benchBatch = 4096
)

var (
	benchOnce  sync.Once
	benchData  [][]float32
	benchModel *pcaenc.Model
	benchArt   []byte
)

// benchSetup makes 60,000 MNIST-shaped rows (784 values in [0, 1] with some
// low-rank structure) and fits PCA (d = 8, l = 10) on the first 5,000.
func benchSetup(b *testing.B) {
	benchOnce.Do(func() {
		rng := rand.New(rand.NewPCG(11, 12))
		benchData = lowRank(rng, benchRows, benchDim, []float64{8, 6, 5, 4, 3, 2, 2, 1, 1, 1, 1, 1})
		for _, r := range benchData {
			for k := range r {
				r[k] = min(max(r[k]+0.1*float32(rng.NormFloat64()), 0), 1)
			}
		}
		var err error
		benchModel, err = pcaenc.FitRows(pcaenc.Params{D: 8, L: 10}, benchData[:5000])
		if err != nil {
			b.Fatal(err)
		}
		benchArt, _ = benchModel.Artifact()
	})
}

// BenchmarkPCAEncode encodes 60,000×784 rows with PCA (d = 8) in batches of
// 4,096, through the plugin process (matrices in shared memory, and over gRPC
// as with plugins without the capability) and in-process.
func BenchmarkPCAEncode(b *testing.B) {
	benchSetup(b)
	for _, tc := range []struct {
		name  string
		noShm bool
	}{{"plugin", false}, {"plugin_grpc", true}} {
		b.Run(tc.name, func(b *testing.B) {
			h := newHost(b)
			h.noSharedMemory = tc.noShm // plugin_grpc: the matrices go in the gRPC messages
			p := get(b, h, specFor(b, "pca", "pca", benchArt))
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				for lo := 0; lo < benchRows; lo += benchBatch {
					if _, err := p.Encode(ctx, benchData[lo:min(lo+benchBatch, benchRows)]); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(benchRows*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
	b.Run("inprocess", func(b *testing.B) {
		for b.Loop() {
			for lo := 0; lo < benchRows; lo += benchBatch {
				if _, err := benchModel.Encode(benchData[lo:min(lo+benchBatch, benchRows)]); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(benchRows*b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}

// BenchmarkPCAFit45k fits PCA (d = 8) on 45,000×784 rows streamed to the
// plugin in batches of 4,096.
func BenchmarkPCAFit45k(b *testing.B) {
	benchSetup(b)
	h := newHost(b)
	p := get(b, h, specFor(b, "pca", "pca", nil))
	ctx := context.Background()
	for b.Loop() {
		t0 := time.Now()
		if _, err := p.Fit(ctx, json.RawMessage(`{"d": 8, "l": 10}`), benchDim, batches(benchData[:45000], benchBatch)); err != nil {
			b.Fatal(err)
		}
		b.Logf("fit 45,000×784: %v", time.Since(t0))
	}
}
