// Command liar is a test plugin (see ../../host_test.go) that bypasses
// plugins/sdk, serving ldpv1 directly, so that it can break the protocol in
// ways the SDK would catch. It is a 4 → 2 encoder declaring the L1 ball of
// radius 1. The first value of the first row picks what Encode does:
//
//	0: a correct answer (zeros)
//	1: NaN everywhere
//	2: values far outside the ball (±1e30)
//	3: one row too few
//	4: 3 columns instead of 2
//	5: a matrix whose values do not fill rows×cols
//	6: an error message
//
// It offers the shared-memory transport (CAPABILITY_SHARED_MEMORY), where the
// same modes lie through the region, and these too:
//
//	7: a correct answer (row i: 0.5, -0.25), then, from 200 ms after replying
//	   and for a second, the result's place in the region overwritten with
//	   1e30 and NaN again and again
//	8: the result claimed at an offset past the end of the region
//	9: the result claimed at offset 0, over the input
//	10: the result claimed in another region
//	11: a result of 2^32-1 × 2^32-1 values whose byte length wraps around
//	12: an offset and length that wrap around 2^64
//
// Load takes a JSON artifact {"radius": r, "protocol": v, "shm": s} that
// changes what Describe reports, to declare an invalid set or a wrong protocol
// version; s = "off" leaves the capability out (the host must use Encode),
// s = "refuse" offers it but refuses to map any region.
package main

import (
	"context"
	"encoding/json"
	"math"
	"sync"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ldpsql/ldpsql/plugins/internal/shm"
	"github.com/ldpsql/ldpsql/plugins/proto/ldpv1"
	"github.com/ldpsql/ldpsql/plugins/sdk"
)

type server struct {
	ldpv1.UnimplementedEncoderServer
	mu       sync.Mutex
	radius   float64
	protocol uint32
	shm      string            // "" (on), "off" or "refuse"
	regions  map[uint64][]byte // attached regions, never unmapped
}

func (s *server) Describe(context.Context, *ldpv1.DescribeRequest) (*ldpv1.Description, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &ldpv1.Description{
		Name: "liar", Version: "test", ProtocolVersion: s.protocol, InputDim: 4, OutputDim: 2,
		OutputSet: &ldpv1.Description_L1Ball{L1Ball: &ldpv1.L1Ball{Radius: s.radius}},
	}
	if s.shm != "off" {
		d.Capabilities = []ldpv1.Capability{ldpv1.Capability_CAPABILITY_SHARED_MEMORY}
	}
	return d, nil
}

func (s *server) Load(_ context.Context, req *ldpv1.LoadRequest) (*ldpv1.LoadResponse, error) {
	var a struct {
		Radius   float64 `json:"radius"`
		Protocol uint32  `json:"protocol"`
		SHM      string  `json:"shm"`
	}
	a.Protocol = ldpv1.ProtocolVersion
	if err := json.Unmarshal(req.GetArtifact(), &a); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.radius, s.protocol, s.shm = a.Radius, a.Protocol, a.SHM
	return &ldpv1.LoadResponse{}, nil
}

func (s *server) AttachSharedMemory(_ context.Context, req *ldpv1.AttachRequest) (*ldpv1.AttachResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shm == "refuse" {
		return nil, status.Error(codes.PermissionDenied, "I map no memory of yours")
	}
	mem, err := shm.Open(req.GetPath(), req.GetSize())
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	if s.regions == nil {
		s.regions = map[uint64][]byte{}
	}
	s.regions[req.GetRegion()] = mem
	return &ldpv1.AttachResponse{}, nil
}

// DetachSharedMemory keeps the mapping: a liar does as it likes.
func (s *server) DetachSharedMemory(context.Context, *ldpv1.DetachRequest) (*ldpv1.DetachResponse, error) {
	return &ldpv1.DetachResponse{}, nil
}

func (s *server) EncodeShared(_ context.Context, req *ldpv1.SharedRequest) (*ldpv1.SharedResponse, error) {
	in := req.GetInput()
	s.mu.Lock()
	mem := s.regions[in.GetRegion()]
	s.mu.Unlock()
	if mem == nil {
		return nil, status.Error(codes.NotFound, "no such region")
	}
	n := uint64(in.GetRows())
	vals, err := shm.Floats(mem, in.GetOffset(), n*uint64(in.GetCols()))
	if err != nil || n == 0 || in.GetCols() != 4 {
		return nil, status.Error(codes.InvalidArgument, "bad input")
	}
	out, err := shm.Floats(mem, req.GetOutputOffset(), 2*n)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, "bad output space")
	}
	m := &ldpv1.SharedMatrix{Region: in.GetRegion(), Offset: req.GetOutputOffset(), Rows: uint32(n), Cols: 2, Length: 8 * n}
	clear(out)
	switch mode := int(vals[0]); mode {
	case 1:
		for i := range out {
			out[i] = float32(math.NaN())
		}
	case 2:
		for i := range out {
			out[i] = float32(1e30 * float64(1-2*(i%2)))
		}
	case 3:
		m.Rows, m.Length = m.Rows-1, m.Length-8
	case 4:
		m.Cols, m.Length = 3, 12*n
	case 5:
		m.Length--
	case 6:
		return nil, status.Error(codes.InvalidArgument, "I do not like these rows")
	case 7:
		for i := 0; i < len(out); i += 2 {
			out[i], out[i+1] = 0.5, -0.25
		}
		go func() {
			time.Sleep(200 * time.Millisecond)
			for end := time.Now().Add(time.Second); time.Now().Before(end); {
				for i := range out {
					out[i] = float32(1e30)
					if i%3 == 0 {
						out[i] = float32(math.NaN())
					}
				}
				time.Sleep(time.Millisecond)
			}
		}()
	case 8:
		m.Offset = uint64(len(mem)) + 64
	case 9:
		m.Offset = in.GetOffset()
	case 10:
		m.Region++
	case 11:
		big := uint64(math.MaxUint32)
		m.Rows, m.Cols, m.Length = math.MaxUint32, math.MaxUint32, 4*big*big // wraps around
	case 12:
		m.Rows, m.Offset, m.Length = 1, math.MaxUint64-3, 8
	}
	return &ldpv1.SharedResponse{Output: m}, nil
}

func (s *server) Encode(_ context.Context, req *ldpv1.EncodeRequest) (*ldpv1.EncodeResponse, error) {
	n := req.GetRows().GetRows()
	mode := 0
	if in, err := req.GetRows().RowViews(); err == nil && n > 0 {
		mode = int(in[0][0])
	}
	vals := make([]float32, 2*n)
	rows, cols := n, uint32(2)
	switch mode {
	case 1:
		for i := range vals {
			vals[i] = float32(math.NaN())
		}
	case 2:
		for i := range vals {
			vals[i] = float32(1e30 * float64(1-2*(i%2)))
		}
	case 3:
		rows, vals = n-1, vals[2:]
	case 4:
		cols, vals = 3, make([]float32, 3*n)
	case 5:
		vals = vals[1:]
	case 6:
		return nil, status.Error(codes.InvalidArgument, "I do not like these rows")
	}
	m, err := ldpv1.NewMatrix([][]float32{vals}, len(vals))
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	m.Rows, m.Cols = rows, cols
	if mode == 5 {
		m.Values = m.Values[:len(m.Values)-1] // not even whole float32s
	}
	return &ldpv1.EncodeResponse{Rows: m}, nil
}

type liarPlugin struct{ plugin.NetRPCUnsupportedPlugin }

func (liarPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	ldpv1.RegisterEncoderServer(s, &server{radius: 1, protocol: ldpv1.ProtocolVersion})
	return nil
}

func (liarPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, nil
}

func main() {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: sdk.Handshake, // the cookie only; everything else is its own
		Plugins:         plugin.PluginSet{sdk.PluginName: liarPlugin{}},
		GRPCServer:      plugin.DefaultGRPCServer,
	})
}
