package beam

import (
	"fmt"
	"math"
	"testing"
)

// keyRanges covers lo..hi with at most n contiguous ranges, even across the whole int64 line.
func TestKeyRanges(t *testing.T) {
	for _, c := range []struct {
		lo, hi int64
		n      int
		want   string
	}{
		{1, 10, 3, "[1 4] [5 8] [9 10]"},
		{301, 569, 3, "[301 390] [391 480] [481 569]"},
		{5, 5, 4, "[5 5]"},
		{-3, 2, 2, "[-3 -1] [0 2]"},
		{0, 2, 8, "[0 0] [1 1] [2 2]"},
		{math.MinInt64, math.MaxInt64, 2, fmt.Sprintf("[%d -1] [0 %d]", int64(math.MinInt64), int64(math.MaxInt64))},
	} {
		got := ""
		for i, p := range keyRanges(c.lo, c.hi, c.n) {
			if p.Index != i {
				t.Errorf("part %d has index %d", i, p.Index)
			}
			if got != "" {
				got += " "
			}
			got += fmt.Sprintf("[%d %d]", p.Lo, p.Hi)
		}
		if got != c.want {
			t.Errorf("keyRanges(%d, %d, %d) = %s, want %s", c.lo, c.hi, c.n, got, c.want)
		}
	}
}
