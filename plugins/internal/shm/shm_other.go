//go:build !linux

package shm

const supported = false

// Region is a shared-memory region; none can be made on this platform.
type Region struct {
	Mem []byte
}

// Create fails with ErrUnsupported.
func Create(string, int) (*Region, error) { return nil, ErrUnsupported }

// Path is empty.
func (*Region) Path() string { return "" }

// ClosePath does nothing.
func (*Region) ClosePath() {}

// Close does nothing.
func (*Region) Close() error { return nil }

// Open fails with ErrUnsupported.
func Open(string, uint64) ([]byte, error) { return nil, ErrUnsupported }

// Unmap fails with ErrUnsupported.
func Unmap([]byte) error { return ErrUnsupported }
