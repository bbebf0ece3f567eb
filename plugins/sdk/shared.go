package sdk

import (
	"context"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ldpsql/ldpsql/plugins/internal/shm"
	"github.com/ldpsql/ldpsql/plugins/proto/ldpv1"
)

// Shared-memory transport (ldpv1.Capability_CAPABILITY_SHARED_MEMORY): the
// host attaches regions of memory, writes the rows into one and calls
// EncodeShared or DecodeShared; the encoder gets views of the region (as with
// Encode, valid only during the call) and the adapter writes its result into
// the region. An encoder needs no code for it: Serve offers it wherever the
// platform supports it (Linux, little-endian).

// maxRegions bounds the regions a host may have attached at once.
const maxRegions = 256

// capabilities are the optional parts of the protocol this SDK implements.
func capabilities() []ldpv1.Capability {
	if !shm.Supported {
		return nil
	}
	return []ldpv1.Capability{ldpv1.Capability_CAPABILITY_SHARED_MEMORY}
}

// regionTable holds the attached regions by the host's ids. A region stays
// mapped while a call uses it, even after the host detaches it.
type regionTable struct {
	mu sync.Mutex
	m  map[uint64]*region
}

type region struct {
	mem      []byte
	refs     int
	detached bool
}

func (t *regionTable) add(id uint64, mem []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, dup := t.m[id]; dup {
		return status.Errorf(codes.AlreadyExists, "region %d is already attached", id)
	}
	if len(t.m) >= maxRegions {
		return status.Errorf(codes.ResourceExhausted, "%d regions are attached already", len(t.m))
	}
	if t.m == nil {
		t.m = map[uint64]*region{}
	}
	t.m[id] = &region{mem: mem}
	return nil
}

func (t *regionTable) acquire(id uint64) (*region, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.m[id]
	if r == nil {
		return nil, status.Errorf(codes.NotFound, "no region %d is attached", id)
	}
	r.refs++
	return r, nil
}

func (t *regionTable) release(r *region) {
	t.mu.Lock()
	r.refs--
	unmap := r.detached && r.refs == 0
	t.mu.Unlock()
	if unmap {
		_ = shm.Unmap(r.mem)
	}
}

func (t *regionTable) detach(id uint64) error {
	t.mu.Lock()
	r := t.m[id]
	if r == nil {
		t.mu.Unlock()
		return status.Errorf(codes.NotFound, "no region %d is attached", id)
	}
	delete(t.m, id)
	r.detached = true
	unmap := r.refs == 0
	t.mu.Unlock()
	if unmap {
		_ = shm.Unmap(r.mem)
	}
	return nil
}

func (s *grpcServer) AttachSharedMemory(_ context.Context, req *ldpv1.AttachRequest) (*ldpv1.AttachResponse, error) {
	if !shm.Supported {
		return nil, status.Error(codes.Unimplemented, shm.ErrUnsupported.Error())
	}
	mem, err := shm.Open(req.GetPath(), req.GetSize())
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	if err := s.regions.add(req.GetRegion(), mem); err != nil {
		_ = shm.Unmap(mem)
		return nil, err
	}
	return &ldpv1.AttachResponse{}, nil
}

func (s *grpcServer) DetachSharedMemory(_ context.Context, req *ldpv1.DetachRequest) (*ldpv1.DetachResponse, error) {
	if err := s.regions.detach(req.GetRegion()); err != nil {
		return nil, err
	}
	return &ldpv1.DetachResponse{}, nil
}

func (s *grpcServer) EncodeShared(_ context.Context, req *ldpv1.SharedRequest) (*ldpv1.SharedResponse, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, err := s.ready(false)
	if err != nil {
		return nil, err
	}
	return s.applyShared(t, req)
}

func (s *grpcServer) DecodeShared(_ context.Context, req *ldpv1.SharedRequest) (*ldpv1.SharedResponse, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, err := s.ready(true)
	if err != nil {
		return nil, err
	}
	return s.applyShared(t, req)
}

// applyShared is apply for a request in a region: it checks the request
// against the region, calls t.f on views of the input rows and writes its
// result (t.outCols columns, as many rows) where the request says.
func (s *grpcServer) applyShared(t transform, req *ldpv1.SharedRequest) (*ldpv1.SharedResponse, error) {
	op, inCols, outCols, f := t.op, t.inCols, t.outCols, t.f
	in := req.GetInput()
	r, err := s.regions.acquire(in.GetRegion())
	if err != nil {
		return nil, err
	}
	defer s.regions.release(r)
	size := uint64(len(r.mem))
	n, err := shm.Span(size, in.GetOffset(), in.GetLength(), in.GetRows(), in.GetCols())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "%s: input: %v", op, err)
	}
	nrows := int(in.GetRows())
	if nrows > 0 && int(in.GetCols()) != inCols {
		return nil, status.Errorf(codes.InvalidArgument, "%s: rows have %d columns, the encoder takes %d", op, in.GetCols(), inCols)
	}
	outOff, outLen := req.GetOutputOffset(), 4*uint64(nrows)*uint64(outCols)
	if req.GetOutputCapacity() < outLen {
		return nil, status.Errorf(codes.InvalidArgument, "%s: %d bytes of output space for %d rows of %d values", op, req.GetOutputCapacity(), nrows, outCols)
	}
	if outOff%4 != 0 || outOff > size || outLen > size-outOff ||
		(outLen > 0 && in.GetLength() > 0 && outOff < in.GetOffset()+in.GetLength() && in.GetOffset() < outOff+outLen) {
		return nil, status.Errorf(codes.InvalidArgument, "%s: output space of %d bytes at offset %d is outside the %d-byte region or overlaps the input", op, outLen, outOff, size)
	}
	resp := &ldpv1.SharedResponse{Output: &ldpv1.SharedMatrix{Region: in.GetRegion(), Offset: outOff, Rows: uint32(nrows), Cols: uint32(outCols), Length: outLen}}
	if nrows == 0 {
		return resp, nil
	}
	flat, err := shm.Floats(r.mem, in.GetOffset(), n)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "%s: input: %v", op, err)
	}
	rows := make([][]float32, nrows)
	for i := range rows {
		rows[i] = flat[i*inCols : (i+1)*inCols : (i+1)*inCols]
	}
	var out [][]float32
	if err := guard(op, func() (err error) { out, err = f(rows); return err }); err != nil {
		return nil, err
	}
	if len(out) != nrows {
		return nil, status.Errorf(codes.Internal, "%s returned %d rows for %d", op, len(out), nrows)
	}
	dst, err := shm.Floats(r.mem, outOff, outLen/4)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%s output: %v", op, err)
	}
	if err := shm.CopyIn(dst, out, outCols); err != nil {
		return nil, status.Errorf(codes.Internal, "%s output: %v", op, err)
	}
	return resp, nil
}
