package vlm

import (
	"bytes"
	"context"
	"sync"
	"testing"
)

// Two trainings in one process at once (two server jobs) give the same
// weights as each alone.
func TestConcurrentTrainIndependent(t *testing.T) {
	rows := lowRank(8, 300, 20, 3, Bernoulli)
	cfgs := []Config{smallConfig(), smallConfig()}
	cfgs[0].Epochs, cfgs[1].Epochs = 2, 2
	cfgs[1].Seed = 2
	cfgs[1].EpsPretrain = 10
	alone := make([][]byte, 2)
	for i, c := range cfgs {
		m, _ := trainOrFatal(t, c, rows)
		alone[i], _ = m.MarshalBinary()
	}
	together := make([][]byte, 2)
	var wg sync.WaitGroup
	for i, c := range cfgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := Train(context.Background(), c, rows, nil)
			if err != nil {
				t.Error(err)
				return
			}
			together[i], _ = m.MarshalBinary()
		}()
	}
	wg.Wait()
	for i := range cfgs {
		if !bytes.Equal(alone[i], together[i]) {
			t.Errorf("config %d: concurrent training differs from training alone", i)
		}
	}
}
