package taskaware

import (
	"context"
	"testing"
	"time"

	"github.com/ldpsql/ldpsql/training/datasets"
)

func wdbcSplit(t testing.TB) (trX [][]float32, trY []float64, teX [][]float32, teY []float64) {
	d, err := datasets.LoadWDBC()
	if err != nil {
		t.Fatal(err)
	}
	cut := len(d.Features) * 7 / 10
	for i, f := range d.Features {
		x := make([]float32, len(f))
		for j, v := range f {
			x[j] = float32(v)
		}
		if i < cut {
			trX, trY = append(trX, x), append(trY, float64(d.Labels[i]))
		} else {
			teX, teY = append(teX, x), append(teY, float64(d.Labels[i]))
		}
	}
	return
}

func TestProbeWDBC(t *testing.T) {
	trX, trY, teX, teY := wdbcSplit(t)
	for _, design := range []string{DesignTaskAware, DesignPrivacyAgnostic, DesignTaskAgnostic} {
		c := DefaultTrainConfig()
		c.Label, c.Eps, c.Encoder, c.Design = "y", 20, EncoderMLP, design
		c.Epochs = 100
		c.TaskEpochs = 500
		start := time.Now()
		m, err := Train(context.Background(), c, trX, trY, nil)
		if err != nil {
			t.Fatal(err)
		}
		ev, _ := m.Evaluate(teX, teY, 20, 20, 1)
		clean, _ := m.Evaluate(teX, teY, 1e300, 1, 1)
		t.Logf("%s: %v task loss %.3f train %.3f Δ1 %.3f test loss %.3f acc %.3f (noise-free %.3f/%.3f)", design, time.Since(start), m.TaskLoss, m.TrainLoss, m.Delta1, ev.Loss, ev.Accuracy, clean.Loss, clean.Accuracy)
	}
}
