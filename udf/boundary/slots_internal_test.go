package boundary

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/dolthub/go-mysql-server/sql"
)

// evalInSlots gives every evaluation its slot: a batch takes n slots whatever the evaluations cost, a
// late one is replaced by the late value, and while it still runs the next rows are not evaluated.
func TestEvalInSlotsTakesFixedTime(t *testing.T) {
	ctx := sql.NewContext(context.Background())
	const slot = 40 * time.Millisecond
	cost := []time.Duration{0, 0, 100 * time.Millisecond, 0, 0, 0, 0, 0}
	start := time.Now()
	out, _, err := evalInSlots(ctx, slot, len(cost), func(i int) int {
		time.Sleep(cost[i])
		return i
	}, -1)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	// Row 2 runs 100 ms from 80 ms, past its slot's end (120 ms): late. It still runs when row 3's slot
	// starts (120 ms), so row 3 is not evaluated; by row 7's (280 ms) it has long ended.
	if out[0] != 0 || out[1] != 1 || out[2] != -1 || out[3] != -1 || out[7] != 7 {
		t.Fatalf("values %v, want 0, 1, -1 (late), -1 (not evaluated), …, 7", out)
	}
	if n := time.Duration(len(cost)) * slot; took < n || took > n+40*time.Millisecond {
		t.Errorf("%d slots of %v took %v, want %v", len(cost), slot, took, n)
	}
}

// The batch's running time does not depend on what the evaluations cost, cheap or late.
func TestEvalInSlotsTimeIsIndependentOfCost(t *testing.T) {
	ctx := sql.NewContext(context.Background())
	const slot = 20 * time.Millisecond
	run := func(cost time.Duration) time.Duration {
		start := time.Now()
		if _, _, err := evalInSlots(ctx, slot, 4, func(int) int { time.Sleep(cost); return 1 }, -1); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	// Never shorter than its slots, on any run; not longer beyond scheduling slack on the fastest of
	// three: load only adds time (one run took 129 ms for 80 under a load average of 14).
	for _, cost := range []time.Duration{0, 10 * time.Millisecond, 100 * time.Millisecond} {
		fastest := time.Duration(math.MaxInt64)
		for range 3 {
			took := run(cost)
			if took < 4*slot {
				t.Errorf("evaluations of %v: 4 slots took %v, less than %v", cost, took, 4*slot)
			}
			fastest = min(fastest, took)
			time.Sleep(100 * time.Millisecond) // let a late evaluation end
		}
		if fastest > 4*slot+30*time.Millisecond {
			t.Errorf("evaluations of %v: 4 slots took %v at the fastest of 3, want %v", cost, fastest, 4*slot)
		}
	}
}

// A cancelled statement stops at once.
func TestEvalInSlotsStopsWhenCancelled(t *testing.T) {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	ctx := sql.NewContext(c)
	start := time.Now()
	if _, _, err := evalInSlots(ctx, 10*time.Millisecond, 1000, func(int) int { return 1 }, -1); err == nil {
		t.Fatal("a cancelled evaluation returned no error")
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("cancelled after 30 ms, returned after %v", took)
	}
}
