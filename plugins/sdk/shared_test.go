package sdk

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ldpsql/ldpsql/plugins/internal/shm"
	"github.com/ldpsql/ldpsql/plugins/proto/ldpv1"
)

// attach creates a region of size bytes and attaches it to c as id.
func attach(t *testing.T, c ldpv1.EncoderClient, id uint64, size int) *shm.Region {
	t.Helper()
	r, err := shm.Create("sdk-test", size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if _, err := c.AttachSharedMemory(context.Background(), &ldpv1.AttachRequest{Region: id, Path: r.Path(), Size: uint64(size)}); err != nil {
		t.Fatal(err)
	}
	r.ClosePath()
	return r
}

func TestServerSharedMemory(t *testing.T) {
	if !shm.Supported {
		t.Skip("no shared memory on this platform")
	}
	ctx := context.Background()
	s := &scaler{}
	c := dial(t, s)
	pd, err := c.Describe(ctx, &ldpv1.DescribeRequest{})
	if err != nil || !slices.Contains(pd.GetCapabilities(), ldpv1.Capability_CAPABILITY_SHARED_MEMORY) {
		t.Fatalf("capabilities %v, %v", pd.GetCapabilities(), err)
	}
	const size = 4096
	r := attach(t, c, 1, size)
	x := [][]float32{{1, 2, 3}, {4, 5, 6}}
	in, _ := shm.Floats(r.Mem, 0, 6)
	if err := shm.CopyIn(in, x, 3); err != nil {
		t.Fatal(err)
	}
	req := func(region, off, length uint64, rows, cols uint32, outOff, outCap uint64) *ldpv1.SharedRequest {
		return &ldpv1.SharedRequest{Input: &ldpv1.SharedMatrix{Region: region, Offset: off, Rows: rows, Cols: cols, Length: length}, OutputOffset: outOff, OutputCapacity: outCap}
	}
	good := req(1, 0, 24, 2, 3, 64, size-64)

	_, err = c.EncodeShared(ctx, good)
	wantCode(t, err, codes.FailedPrecondition, "no model loaded")
	if _, err := c.Load(ctx, &ldpv1.LoadRequest{Artifact: []byte("2")}); err != nil {
		t.Fatal(err)
	}
	resp, err := c.EncodeShared(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	o := resp.GetOutput()
	if o.GetRegion() != 1 || o.GetOffset() != 64 || o.GetRows() != 2 || o.GetCols() != 3 || o.GetLength() != 24 {
		t.Fatalf("answer %v", o)
	}
	out, _ := shm.Floats(r.Mem, 64, 6)
	if out[0] != 2 || out[5] != 12 {
		t.Fatalf("result %v", out)
	}
	if _, err := c.DecodeShared(ctx, req(1, 0, 24, 2, 3, 128, 24)); err != nil {
		t.Fatal(err)
	}
	if dec, _ := shm.Floats(r.Mem, 128, 6); dec[4] != 5 {
		t.Fatalf("decoded %v", dec)
	}
	resp, err = c.EncodeShared(ctx, req(1, 0, 0, 0, 3, 64, 0))
	if err != nil || resp.GetOutput().GetRows() != 0 {
		t.Errorf("empty batch: %v, %v", resp, err)
	}

	for _, tc := range []struct {
		req  *ldpv1.SharedRequest
		code codes.Code
		msg  string
	}{
		{req(2, 0, 24, 2, 3, 64, 24), codes.NotFound, "no region 2"},
		{req(1, 0, 20, 2, 3, 64, 24), codes.InvalidArgument, "2×3 matrix of 20 bytes"},
		{req(1, size-16, 24, 2, 3, 64, 24), codes.InvalidArgument, "do not fit a 4096-byte region"},
		{req(1, 2, 24, 2, 3, 64, 24), codes.InvalidArgument, "do not fit"}, // misaligned
		{req(1, ^uint64(0)-3, 24, 2, 3, 64, 24), codes.InvalidArgument, "do not fit"},
		{req(1, 0, 16, 2, 2, 64, 24), codes.InvalidArgument, "rows have 2 columns, the encoder takes 3"},
		{req(1, 0, 24, 2, 3, 64, 20), codes.InvalidArgument, "20 bytes of output space for 2 rows of 3 values"},
		{req(1, 0, 24, 2, 3, 8, 24), codes.InvalidArgument, "overlaps the input"},
		{req(1, 0, 24, 2, 3, size-16, 24), codes.InvalidArgument, "outside the 4096-byte region"},
		{req(1, 0, 24, 2, 3, ^uint64(0)-7, 24), codes.InvalidArgument, "outside"},
		{req(1, 0, 24, 2, 3, 66, 24), codes.InvalidArgument, "outside"}, // misaligned
	} {
		_, err := c.EncodeShared(ctx, tc.req)
		wantCode(t, err, tc.code, tc.msg)
	}

	// The encoder's own faults are reported as with Encode.
	x[0][0] = -7
	shm.CopyIn(in, x, 3)
	_, err = c.EncodeShared(ctx, good)
	wantCode(t, err, codes.Internal, "Encode panicked: seven")
	x[0][0] = -8
	shm.CopyIn(in, x, 3)
	_, err = c.EncodeShared(ctx, good)
	wantCode(t, err, codes.Internal, "returned 0 rows for 2")

	// Attach and detach.
	_, err = c.AttachSharedMemory(ctx, &ldpv1.AttachRequest{Region: 1, Path: r.Path(), Size: size})
	wantCode(t, err, codes.FailedPrecondition, "") // the path is closed
	r2, _ := shm.Create("sdk-test", size)
	defer r2.Close()
	_, err = c.AttachSharedMemory(ctx, &ldpv1.AttachRequest{Region: 1, Path: r2.Path(), Size: size})
	wantCode(t, err, codes.AlreadyExists, "region 1 is already attached")
	_, err = c.AttachSharedMemory(ctx, &ldpv1.AttachRequest{Region: 3, Path: r2.Path(), Size: 2 * size})
	wantCode(t, err, codes.FailedPrecondition, "not a regular file of at least 8192 bytes")
	if _, err := c.DetachSharedMemory(ctx, &ldpv1.DetachRequest{Region: 1}); err != nil {
		t.Fatal(err)
	}
	_, err = c.DetachSharedMemory(ctx, &ldpv1.DetachRequest{Region: 1})
	wantCode(t, err, codes.NotFound, "no region 1")
	_, err = c.EncodeShared(ctx, good)
	wantCode(t, err, codes.NotFound, "no region 1")
}

// A region the host detaches while a call uses it stays mapped until the
// call ends.
func TestRegionDetachedWhileInUse(t *testing.T) {
	if !shm.Supported {
		t.Skip("no shared memory on this platform")
	}
	mappings := func() int {
		b, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(b), "memfd:sdk-detach-test")
	}
	r, err := shm.Create("sdk-detach-test", 4096)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := shm.Open(r.Path(), 4096)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	var tab regionTable
	if err := tab.add(7, mem); err != nil {
		t.Fatal(err)
	}
	reg, err := tab.acquire(7)
	if err != nil {
		t.Fatal(err)
	}
	if err := tab.detach(7); err != nil {
		t.Fatal(err)
	}
	if _, err := tab.acquire(7); status.Code(err) != codes.NotFound {
		t.Errorf("acquire after detach: %v", err)
	}
	reg.mem[0] = 1 // still mapped
	if n := mappings(); n != 1 {
		t.Fatalf("%d mappings while in use", n)
	}
	tab.release(reg)
	if n := mappings(); n != 0 {
		t.Fatalf("%d mappings after the last use", n)
	}
}
