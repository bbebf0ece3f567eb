package shm

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestSpan(t *testing.T) {
	const size = 1 << 20
	for _, tc := range []struct {
		off, length uint64
		rows, cols  uint32
		ok          bool
	}{
		{0, 24, 2, 3, true},
		{size - 24, 24, 2, 3, true},
		{0, 0, 0, 5, true},
		{size, 0, 0, 5, true},
		{size - 20, 24, 2, 3, false},                          // past the end
		{2, 24, 2, 3, false},                                  // misaligned
		{0, 20, 2, 3, false},                                  // length is not 4·rows·cols
		{math.MaxUint64 - 3, 8, 1, 2, false},                  // offset + length wraps
		{size + 4, 0, 0, 1, false},                            // offset past the end
		{0, 4 * math.MaxUint32 * 2, math.MaxUint32, 2, false}, // too large
		{0, 0, math.MaxUint32, math.MaxUint32, false},         // 4·rows·cols wraps to something else
	} {
		_, err := Span(size, tc.off, tc.length, tc.rows, tc.cols)
		if (err == nil) != tc.ok {
			t.Errorf("Span(%d, %d, %d×%d): %v", tc.off, tc.length, tc.rows, tc.cols, err)
		}
	}
	big := uint64(math.MaxUint32)
	if _, err := Span(math.MaxUint64, 0, 4*big*big, math.MaxUint32, math.MaxUint32); err == nil {
		t.Error("a wrapped-around length was accepted")
	}
}

func TestFloatsBounds(t *testing.T) {
	mem := make([]byte, 64)
	for _, tc := range []struct {
		off, n uint64
		ok     bool
	}{{0, 16, true}, {60, 1, true}, {64, 0, true}, {60, 2, false}, {2, 1, false}, {68, 0, false}, {0, math.MaxUint64 / 2, false}} {
		_, err := Floats(mem, tc.off, tc.n)
		if (err == nil) != tc.ok {
			t.Errorf("Floats(%d, %d): %v", tc.off, tc.n, err)
		}
	}
}

func regionMappings(t *testing.T, name string) int {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "memfd:"+name)
}

// A region is shared by two mappings (the host's and, through Path, the
// plugin's), cannot be resized through the plugin's descriptor, and what
// CopyOut returns does not change when the region does.
func TestRegionSharedSealedAndCopiedOut(t *testing.T) {
	if !Supported {
		t.Skip("no shared memory on this platform")
	}
	r, err := Create("shm-test-region", 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(r.Path(), unix.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, 4096); err == nil {
		t.Fatal("the plugin's descriptor could shrink the region")
	}
	if err := unix.Ftruncate(fd, 1<<20); err == nil {
		t.Fatal("the plugin's descriptor could grow the region")
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_WRITE); err == nil {
		t.Fatal("the plugin's descriptor could add a seal")
	}
	other, err := Open(r.Path(), 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(r.Path(), 1<<17); err == nil {
		t.Fatal("Open accepted a size larger than the file")
	}
	r.ClosePath()

	src, _ := Floats(other, 128, 4)
	rows := [][]float32{{1, 2}, {3, 4}}
	if err := CopyIn(src, rows, 2); err != nil {
		t.Fatal(err)
	}
	view, _ := Floats(r.Mem, 128, 4)
	got, err := CopyOut(view, 2)
	if err != nil || got[1][1] != 4 {
		t.Fatalf("%v %v", got, err)
	}
	src[3] = float32(math.NaN()) // the other side writes again
	if view[3] == 4 || got[1][1] != 4 {
		t.Fatalf("view %v (should see the write), copy %v (should not)", view, got)
	}
	if err := CopyIn(src, [][]float32{{1}}, 2); err == nil {
		t.Error("CopyIn took a short row")
	}
	if _, err := CopyOut(view[:3], 2); err == nil {
		t.Error("CopyOut took a partial row")
	}

	if regionMappings(t, "shm-test-region") != 2 {
		t.Fatalf("%d mappings", regionMappings(t, "shm-test-region"))
	}
	Unmap(other)
	r.Close()
	if n := regionMappings(t, "shm-test-region"); n != 0 {
		t.Fatalf("%d mappings after Close", n)
	}
}

// A memory fault while copying (here: a mapping of a file truncated under
// it, which sealed regions rule out) is an error, not a crash.
func TestFaultIsAnError(t *testing.T) {
	if !Supported {
		t.Skip("no shared memory on this platform")
	}
	fd, err := unix.MemfdCreate("shm-test-fault", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, 1<<16); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, 1<<16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if err := unix.Ftruncate(fd, 0); err != nil {
		t.Fatal(err)
	}
	view, _ := Floats(mem, 0, 1<<14)
	if _, err := CopyOut(view, 4); err == nil || !strings.Contains(err.Error(), "memory fault") {
		t.Fatalf("CopyOut from a truncated mapping: %v", err)
	}
	if err := CopyIn(view[:4], [][]float32{{1, 2, 3, 4}}, 4); err == nil || !strings.Contains(err.Error(), "memory fault") {
		t.Fatalf("CopyIn to a truncated mapping: %v", err)
	}
}

// CopyInChecked calls check on each source row in order, right after copying it, and stops at the
// first error, which it returns unchanged; later rows are not copied.
func TestCopyInChecked(t *testing.T) {
	dst := make([]float32, 6)
	rows := [][]float32{{1, 2}, {3, 4}, {5, 6}}
	stop := errors.New("row 1 refused")
	var seen []int
	err := CopyInChecked(dst, rows, 2, func(i int, row []float32) error {
		if dst[2*i] != row[0] || dst[2*i+1] != row[1] {
			t.Errorf("row %d checked before it was copied", i)
		}
		seen = append(seen, i)
		if i == 1 {
			return stop
		}
		return nil
	})
	if err != stop {
		t.Fatalf("error %v, want the check's own", err)
	}
	if len(seen) != 2 || seen[0] != 0 || seen[1] != 1 {
		t.Fatalf("checked rows %v, want [0 1]", seen)
	}
	if dst[4] != 0 || dst[5] != 0 {
		t.Fatalf("row 2 was copied after the check failed: %v", dst)
	}
	if err := CopyInChecked(dst, rows, 2, nil); err != nil || dst[5] != 6 {
		t.Fatalf("nil check: %v %v", dst, err)
	}
}
