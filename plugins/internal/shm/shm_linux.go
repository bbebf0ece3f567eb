//go:build linux

package shm

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

const supported = true

// Region is a memfd the host created, mapped read-write.
type Region struct {
	Mem []byte // the mapping, len(Mem) bytes
	fd  int    // open until ClosePath
}

// Create makes a region of size bytes (see the package comment) and maps it.
// The plugin can open it at Path until ClosePath is called.
func Create(name string, size int) (*Region, error) {
	if size <= 0 {
		return nil, fmt.Errorf("shm: region of %d bytes", size)
	}
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("shm: memfd_create: %w", err)
	}
	mem, err := setUp(fd, size)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &Region{Mem: mem, fd: fd}, nil
}

func setUp(fd, size int) ([]byte, error) {
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return nil, fmt.Errorf("shm: sizing a region to %d bytes: %w", size, err)
	}
	// Allocate every page now: ENOSPC or ENOMEM here rather than SIGBUS on a
	// later write.
	if err := unix.Fallocate(fd, 0, 0, int64(size)); err != nil {
		return nil, fmt.Errorf("shm: allocating a %d-byte region: %w", size, err)
	}
	// Whoever opens the memfd can write to it, but not change its size:
	// accesses within the mapping cannot fault on a truncated file.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return nil, fmt.Errorf("shm: sealing a region: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: mapping a %d-byte region: %w", size, err)
	}
	return mem, nil
}

// Path is where another process of the same user can open the region while
// it is not closed (ClosePath).
func (r *Region) Path() string { return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), r.fd) }

// ClosePath closes the region's descriptor: only the mappings keep it alive.
func (r *Region) ClosePath() {
	if r.fd >= 0 {
		unix.Close(r.fd)
		r.fd = -1
	}
}

// Close closes the descriptor and unmaps the region; the caller makes sure
// nothing uses Mem any more.
func (r *Region) Close() error {
	r.ClosePath()
	if r.Mem == nil {
		return nil
	}
	err := unix.Munmap(r.Mem)
	r.Mem = nil
	return err
}

// Open maps size bytes of the file at path read-write (shared), after
// checking that the file holds that many, and closes the file: the plugin's
// side of a region.
func Open(path string, size uint64) ([]byte, error) {
	if size == 0 || size > 1<<40 {
		return nil, fmt.Errorf("shm: region of %d bytes", size)
	}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: opening %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("shm: %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size < 0 || uint64(st.Size) < size {
		return nil, fmt.Errorf("shm: %s is not a regular file of at least %d bytes", path, size)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: mapping %s: %w", path, err)
	}
	return mem, nil
}

// Unmap unmaps a mapping returned by Open.
func Unmap(mem []byte) error { return unix.Munmap(mem) }
