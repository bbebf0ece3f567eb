package shm

import (
	"math"
	"testing"
)

// FuzzSpan checks the bounds a peer's offsets, lengths and shapes go through before the host or a
// plugin reads a region: whatever the numbers, an accepted matrix lies inside the region, its length is
// exactly 4·rows·cols, and Floats over it gives that many values inside the memory.
func FuzzSpan(f *testing.F) {
	f.Add(uint64(4096), uint64(64), uint64(48), uint32(3), uint32(4))
	f.Add(uint64(4096), uint64(4096), uint64(0), uint32(0), uint32(7))
	f.Add(uint64(4096), uint64(2), uint64(8), uint32(1), uint32(2))                          // misaligned
	f.Add(uint64(math.MaxUint64), uint64(math.MaxUint64-3), uint64(4), uint32(1), uint32(1)) // off + length wraps
	f.Add(uint64(math.MaxUint64), uint64(0), uint64(0), uint32(math.MaxUint32), uint32(math.MaxUint32))
	f.Add(uint64(math.MaxUint64), uint64(0), uint64(4*(math.MaxUint32*uint64(1<<30))), uint32(math.MaxUint32), uint32(1<<30))
	mem := make([]byte, 256)
	f.Fuzz(func(t *testing.T, size, off, length uint64, rows, cols uint32) {
		n, err := Span(size, off, length, rows, cols)
		if err == nil {
			if n != uint64(rows)*uint64(cols) || length/4 != n || length%4 != 0 || off%4 != 0 || off > size || size-off < length {
				t.Fatalf("Span(%d, %d, %d, %d, %d) accepted %d values", size, off, length, rows, cols, n)
			}
		}
		// The same numbers against a real (small) mapping.
		vals, err := Floats(mem, off, length/4)
		if err != nil {
			return
		}
		if uint64(len(vals)) != length/4 || off+4*uint64(len(vals)) > uint64(len(mem)) {
			t.Fatalf("Floats(%d bytes, %d, %d) gave %d values", len(mem), off, length/4, len(vals))
		}
		for i := range vals {
			vals[i] = float32(i) // every value is inside mem, or this faults
		}
		c := int(cols % 64)
		out, err := CopyOut(vals, c)
		if err != nil {
			if len(vals) > 0 && c > 0 && len(vals)%c == 0 {
				t.Fatalf("CopyOut(%d values, %d): %v", len(vals), c, err)
			}
			return
		}
		k := 0
		for _, r := range out {
			for _, v := range r {
				if v != float32(k) {
					t.Fatalf("value %d came out as %v", k, v)
				}
				k++
			}
		}
		if k != len(vals) {
			t.Fatalf("CopyOut gave %d of %d values", k, len(vals))
		}
	})
}
