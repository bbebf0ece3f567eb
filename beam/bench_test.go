package beam

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ldpsql/ldpsql/client"
	"github.com/ldpsql/ldpsql/internal/cputime"
	"github.com/ldpsql/ldpsql/internal/rowfile"
	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/plugins/builtin/pca/pcaenc"
	"github.com/ldpsql/ldpsql/training/datasets"
)

// BenchmarkPrismFashionMNIST runs a whole job on Prism in process, as `ldpsql etl privatize` does (#21,
// item 5): the 60,000 Fashion-MNIST training rows (id, 784 features as a list, label) in 4 Parquet
// files, released with a PCA mechanism to d = 8 (ℓ1 radius 20, fitted on the test split, as
// ldp_fit_mechanism('pca8', 'pca', 'fashion_mnist_test', 'features', '{"d": 8, "l": 20}') fits it), ε = 4,
// λ = 0.7, K = 10, written to one Parquet file. Besides rows/s (wall clock) it reports rows/cpu-s,
// rows per second of the process's CPU time (Unix only), which a machine shared with other work slows
// far less. It needs Fashion-MNIST ($LDPSQL_DATA or ../shared/data) and is skipped without it.
//
//	LDPSQL_DATA=../shared/data go test -run XXX -bench PrismFashionMNIST -benchtime 3x -cpu 1,2 ./beam/
func BenchmarkPrismFashionMNIST(b *testing.B) {
	train, _, err := datasets.LoadFashionMNIST("train")
	if err != nil {
		b.Skip("Fashion-MNIST:", err)
	}
	test, _, err := datasets.LoadFashionMNIST("test")
	if err != nil {
		b.Skip("Fashion-MNIST:", err)
	}
	p, err := pcaenc.FitRows(pcaenc.Params{D: 8, L: 20}, test.Pixels)
	if err != nil {
		b.Fatal(err)
	}
	art, _ := p.Artifact()
	mech, err := client.Marshal(client.File{Name: "pca8", Plugin: "pca", InputDim: 784, OutputDim: 8,
		Set: client.SetOf(mechanisms.L1Ball{D: 8, Radius: 20}), Artifact: art, Params: json.RawMessage(`{"d": 8, "l": 20}`),
		TrainedOn: "fashion_mnist_test", Rows: int64(len(test.Pixels)), ExportedAt: time.Unix(0, 0).UTC()})
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	const parts = 4
	n := len(train.Pixels)
	for part := range parts {
		sink, err := rowfile.Create(filepath.Join(dir, fmt.Sprintf("part-%d.parquet", part)), []rowfile.Column{
			{Name: "id", Kind: rowfile.KindScalar}, {Name: "features", Kind: rowfile.KindVector, Width: 784}, {Name: "label", Kind: rowfile.KindInt}})
		if err != nil {
			b.Fatal(err)
		}
		for i := part * n / parts; i < (part+1)*n/parts; i++ {
			if err := sink.Write(strconv.Itoa(i), train.Pixels[i], train.Labels[i]); err != nil {
				b.Fatal(err)
			}
		}
		if err := sink.Finish(nil); err != nil {
			b.Fatal(err)
		}
	}
	spec := Spec{Mechanism: mech, Eps: 4, Label: "label", K: 10, Lambda: 0.7}
	b.ResetTimer()
	cpu0 := cputime.Process()
	for i := range b.N {
		sum, err := Run(context.Background(), Job{In: filepath.Join(dir, "part-*.parquet"), Cols: Columns{ID: "id", Label: "label"},
			Spec: spec, Out: Output{Dir: filepath.Join(dir, fmt.Sprintf("out%d", i))}})
		if err != nil {
			b.Fatal(err)
		}
		if sum.Rows != n || sum.Bad != 0 {
			b.Fatalf("released %d rows, %d bad; want %d, 0", sum.Rows, sum.Bad, n)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "rows/s")
	if cpu := cputime.Process() - cpu0; cpu > 0 {
		b.ReportMetric(float64(b.N*n)/cpu.Seconds(), "rows/cpu-s")
	}
}
