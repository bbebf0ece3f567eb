// Package shm is the shared-memory side of the plugin protocol
// (ldpv1.Capability_CAPABILITY_SHARED_MEMORY): regions the host creates and a
// plugin maps, and float32 matrices laid out in them.
//
// A region is a memfd (Linux): it has no name in any file system, its size is
// fixed when it is created (sealed against shrinking and growing, so that a
// plugin cannot make the host's accesses fault by truncating it) and its pages
// are allocated up front (so that running out of memory is an error when the
// region is created, not a SIGBUS later). The plugin opens it through
// /proc/<host pid>/fd/<fd> while the host keeps that descriptor open.
//
// Matrices in a region use the encoding of ldpv1.Matrix.values: little-endian
// float32, row after row. Views of a region as []float32 need a little-endian
// machine; elsewhere Supported is false and the protocol is not offered.
//
// Accesses to a mapping through [CopyIn] and [CopyOut] turn a memory fault
// into an error instead of crashing the process (see runtime/debug.SetPanicOnFault).
package shm

import (
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"unsafe"
)

// Supported reports whether this build can create and map regions.
var Supported = supported && littleEndian()

func littleEndian() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}

// ErrUnsupported is returned on platforms without shared-memory regions.
var ErrUnsupported = errors.New("shm: shared-memory regions are not supported on this platform")

// Align is the alignment of the offsets the host hands out.
const Align = 64

// AlignUp rounds n up to a multiple of Align.
func AlignUp(n uint64) uint64 { return (n + Align - 1) &^ (Align - 1) }

// Floats returns the n float32s that start at byte off of mem, as a view of
// mem, after checking that they lie inside it and that off is a multiple of 4
// (mmap'd memory is page aligned, so the view is aligned too).
func Floats(mem []byte, off, n uint64) ([]float32, error) {
	if n > math.MaxInt/4 || off%4 != 0 || off > uint64(len(mem)) || 4*n > uint64(len(mem))-off {
		return nil, fmt.Errorf("shm: %d float32s at byte %d do not fit a %d-byte region", n, off, len(mem))
	}
	if n == 0 {
		return nil, nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&mem[off])), int(n)), nil
}

// Span checks that the matrix of rows×cols float32s at byte off of a size-byte
// region lies inside it and that length is its size, 4·rows·cols, with every
// product computed without overflow. It returns the number of values.
func Span(size, off, length uint64, rows, cols uint32) (uint64, error) {
	n := uint64(rows) * uint64(cols) // < 2^64
	if n > math.MaxInt/4 || length != 4*n {
		return 0, fmt.Errorf("%d×%d matrix of %d bytes", rows, cols, length)
	}
	if off%4 != 0 || off > size || length > size-off {
		return 0, fmt.Errorf("%d bytes at offset %d do not fit a %d-byte region", length, off, size)
	}
	return n, nil
}

// CopyIn copies rows, each of cols values, to dst (len(rows)·cols float32s,
// usually a view of a mapping), turning a memory fault into an error.
func CopyIn(dst []float32, rows [][]float32, cols int) error {
	return CopyInChecked(dst, rows, cols, nil)
}

// CopyInChecked is CopyIn that also calls check(i, rows[i]) (unless check is nil) right after row i
// is copied, while the row is still in cache, and stops at the first error check returns, which it
// returns as is.
func CopyInChecked(dst []float32, rows [][]float32, cols int, check func(i int, row []float32) error) error {
	if len(dst) != len(rows)*cols {
		return fmt.Errorf("shm: %d rows of %d values for %d slots", len(rows), cols, len(dst))
	}
	for i, r := range rows {
		if len(r) != cols {
			return fmt.Errorf("shm: row %d has %d values, want %d", i, len(r), cols)
		}
	}
	var checkErr error
	err := guarded(func() {
		for i, r := range rows {
			copy(dst[i*cols:(i+1)*cols], r)
			if check == nil {
				continue
			}
			if checkErr = check(i, r); checkErr != nil {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	return checkErr
}

// CopyOut copies src (usually a view of a mapping) to a new slice of private
// memory and returns it as rows of cols values; a memory fault is an error.
// What the other side writes to src afterwards cannot change the result.
func CopyOut(src []float32, cols int) ([][]float32, error) {
	if len(src) == 0 {
		return nil, nil
	}
	if cols <= 0 || len(src)%cols != 0 {
		return nil, fmt.Errorf("shm: %d values are not rows of %d", len(src), cols)
	}
	flat := make([]float32, len(src))
	if err := guarded(func() { copy(flat, src) }); err != nil {
		return nil, err
	}
	rows := make([][]float32, len(src)/cols)
	for i := range rows {
		rows[i] = flat[i*cols : (i+1)*cols : (i+1)*cols]
	}
	return rows, nil
}

// guarded runs f with memory faults turned into panics (see
// debug.SetPanicOnFault) and returns such a panic as an error.
func guarded(f func()) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			if _, ok := r.(interface{ Addr() uintptr }); !ok {
				panic(r)
			}
			err = fmt.Errorf("shm: memory fault in a shared region: %v", r)
		}
	}()
	f()
	return nil
}
