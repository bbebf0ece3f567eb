package host

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ldpsql/ldpsql/plugins/internal/shm"
	"github.com/ldpsql/ldpsql/plugins/proto/ldpv1"
)

// Shared-memory transport (see encoder.proto). With a plugin that reports
// CAPABILITY_SHARED_MEMORY, each Encode or Decode chunk goes through a region
// of shared memory instead of the gRPC message: the host writes the rows into
// the region, the plugin writes its result into another part of it, and the
// host copies the result out into memory of its own before anything looks at
// it. Regions belong to one process (a shmPool per instance), are used by one
// call at a time, and are unmapped when the process stops. Whenever a region
// cannot be had (the platform, the plugin refuses to map one, all are busy),
// the chunk goes over gRPC as before.

const (
	// maxRegions bounds the regions attached to one process: enough for two
	// Encode calls with all their chunks in flight.
	maxRegions = 2 * maxInFlight
	// regionQuantum: region sizes are rounded up to a multiple of it, so that
	// chunks of about the same size reuse the same regions.
	regionQuantum = 1 << 20
	// detachTimeout bounds the DetachSharedMemory sent after a failed call.
	detachTimeout = 5 * time.Second
)

// hasSharedMemory reports whether a description announces the capability.
func hasSharedMemory(pd *ldpv1.Description) bool {
	return slices.Contains(pd.GetCapabilities(), ldpv1.Capability_CAPABILITY_SHARED_MEMORY)
}

// shmPool holds one plugin process's regions.
type shmPool struct {
	rpc    ldpv1.EncoderClient
	name   string
	logger hclog.Logger

	mu       sync.Mutex
	closed   bool      // the process stopped: regions are unmapped once returned
	disabled bool      // a region could not be made or attached: use gRPC
	free     []*region // attached and idle
	count    int       // attached (or being attached), idle or in use
	nextID   uint64
}

// region is a region attached to the plugin under id.
type region struct {
	id uint64
	*shm.Region
}

func newShmPool(rpc ldpv1.EncoderClient, name string, logger hclog.Logger) *shmPool {
	return &shmPool{rpc: rpc, name: name, logger: logger}
}

// get returns an idle region of at least size bytes, attaching a new one if
// none is idle. A nil region with a nil error means: send this chunk over
// gRPC. An error is the plugin's failure to answer AttachSharedMemory (the
// connection broke, the call timed out), for the caller to report.
func (p *shmPool) get(ctx context.Context, size uint64) (*region, error) {
	p.mu.Lock()
	if p.closed || p.disabled {
		p.mu.Unlock()
		return nil, nil
	}
	best := -1
	for i, r := range p.free {
		if uint64(len(r.Mem)) >= size && (best < 0 || len(r.Mem) < len(p.free[best].Mem)) {
			best = i
		}
	}
	if best >= 0 {
		r := p.free[best]
		p.free = slices.Delete(p.free, best, best+1)
		p.mu.Unlock()
		return r, nil
	}
	var evict *region
	if p.count >= maxRegions {
		if len(p.free) == 0 {
			p.mu.Unlock()
			return nil, nil // all busy
		}
		// Replace an idle region that is too small.
		evict = p.free[0]
		p.free = p.free[1:]
		p.count--
	}
	p.count++
	p.nextID++
	id := p.nextID
	p.mu.Unlock()

	if evict != nil {
		p.detach(evict)
	}
	r, err := p.attach(ctx, id, size)
	if r == nil {
		p.mu.Lock()
		p.count--
		p.mu.Unlock()
	}
	return r, err
}

// attach creates a region and has the plugin map it.
func (p *shmPool) attach(ctx context.Context, id, size uint64) (*region, error) {
	size = (size + regionQuantum - 1) / regionQuantum * regionQuantum
	sr, err := shm.Create(fmt.Sprintf("ldpsql-plugin-%s-%d", p.name, id), int(size))
	if err != nil {
		p.disable(err)
		return nil, nil
	}
	_, err = p.rpc.AttachSharedMemory(ctx, &ldpv1.AttachRequest{Region: id, Path: sr.Path(), Size: size})
	sr.ClosePath() // mapped by the plugin, or never will be
	if err != nil {
		sr.Close()
		// The plugin may have mapped it before the call failed (say, at the
		// caller's deadline): have it unmap it, if it still can.
		p.detachID(id)
		switch status.Code(err) {
		case codes.Unavailable, codes.Canceled, codes.DeadlineExceeded:
			return nil, err // the process or the call failed; the caller says which
		}
		if ctx.Err() != nil {
			return nil, err
		}
		p.disable(fmt.Errorf("the plugin did not map a region: %s", statusText(err)))
		return nil, nil
	}
	return &region{id: id, Region: sr}, nil
}

// disable makes every later chunk go over gRPC.
func (p *shmPool) disable(err error) {
	p.mu.Lock()
	was := p.disabled
	p.disabled = true
	p.mu.Unlock()
	if !was {
		p.logger.Warn("shared memory unavailable; Encode and Decode go over gRPC", "error", err)
	}
}

// put makes a region idle again after a call that succeeded.
func (p *shmPool) put(r *region) {
	p.mu.Lock()
	if !p.closed {
		p.free = append(p.free, r)
		p.mu.Unlock()
		return
	}
	p.count--
	p.mu.Unlock()
	r.Close()
}

// discard drops a region after a call that failed: the plugin may still be
// at work on it, so it is not reused. The plugin is asked to unmap it.
func (p *shmPool) discard(r *region) {
	p.mu.Lock()
	p.count--
	closed := p.closed
	p.mu.Unlock()
	if closed {
		r.Close()
		return
	}
	p.detach(r)
}

// detach unmaps r here and, in the background, asks the plugin to unmap it.
func (p *shmPool) detach(r *region) {
	r.Close()
	p.detachID(r.id)
}

// detachID asks the plugin, in the background, to unmap region id.
func (p *shmPool) detachID(id uint64) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), detachTimeout)
		defer cancel()
		_, _ = p.rpc.DetachSharedMemory(ctx, &ldpv1.DetachRequest{Region: id})
	}()
}

// close unmaps every idle region, and makes put and discard unmap the others;
// called once the process has stopped.
func (p *shmPool) close() {
	p.mu.Lock()
	p.closed = true
	free := p.free
	p.free = nil
	p.count -= len(free)
	p.mu.Unlock()
	for _, r := range free {
		r.Close()
	}
}

// inUse returns the number of regions attached and not yet unmapped, for tests.
func (p *shmPool) inUse() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count
}

// shared sends rows (cols values each) through region r with EncodeShared or
// DecodeShared and returns the result, outCols values per row, copied out of
// the region. check sees each row as it is copied into the region; its error
// is returned as err, before anything is sent. bad is set when the plugin
// answered with something that does not fit the request; err when the RPC
// failed. Either way r is discarded; otherwise it is returned to the pool.
func (p *shmPool) shared(ctx context.Context, decode bool, r *region, rows [][]float32, cols, outCols int, check func(i int, row []float32) error) (out [][]float32, bad, err error) {
	n := uint64(len(rows))
	inLen := 4 * n * uint64(cols)
	outOff, outLen := shm.AlignUp(inLen), 4*n*uint64(outCols)
	size := uint64(len(r.Mem))
	ok := false
	defer func() {
		if ok {
			p.put(r)
		} else {
			p.discard(r)
		}
	}()
	dst, ferr := shm.Floats(r.Mem, 0, n*uint64(cols))
	var checkErr error
	if ferr == nil {
		ferr = shm.CopyInChecked(dst, rows, cols, func(i int, row []float32) error {
			checkErr = check(i, row)
			return checkErr
		})
	}
	if checkErr != nil {
		return nil, nil, checkErr
	}
	if ferr != nil {
		return nil, fmt.Errorf("writing the rows to shared memory: %v", ferr), nil
	}
	req := &ldpv1.SharedRequest{
		Input:          &ldpv1.SharedMatrix{Region: r.id, Offset: 0, Rows: uint32(n), Cols: uint32(cols), Length: inLen},
		OutputOffset:   outOff,
		OutputCapacity: size - outOff,
	}
	var resp *ldpv1.SharedResponse
	if decode {
		resp, err = p.rpc.DecodeShared(ctx, req)
	} else {
		resp, err = p.rpc.EncodeShared(ctx, req)
	}
	if err != nil {
		return nil, nil, err
	}
	// Every field of the answer is checked against the request before the
	// region is read; the values are then copied out in one go, and only the
	// copy is returned: later writes by the plugin cannot reach it.
	o := resp.GetOutput()
	if _, serr := shm.Span(size, o.GetOffset(), o.GetLength(), o.GetRows(), o.GetCols()); serr != nil {
		return nil, fmt.Errorf("result in shared memory: %v", serr), nil
	}
	if o.GetRegion() != r.id || o.GetOffset() != outOff || uint64(o.GetRows()) != n || int(o.GetCols()) != outCols || o.GetLength() != outLen {
		return nil, fmt.Errorf("%d rows of %d values (%d bytes) at offset %d of region %d, for %d rows of %d values at offset %d of region %d",
			o.GetRows(), o.GetCols(), o.GetLength(), o.GetOffset(), o.GetRegion(), n, outCols, outOff, r.id), nil
	}
	src, ferr := shm.Floats(r.Mem, outOff, n*uint64(outCols))
	if ferr == nil {
		out, ferr = shm.CopyOut(src, outCols)
	}
	if ferr != nil {
		return nil, fmt.Errorf("reading the result from shared memory: %v", ferr), nil
	}
	ok = true
	return out, nil, nil
}
