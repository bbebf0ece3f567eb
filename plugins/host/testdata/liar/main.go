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
// Load takes a JSON artifact {"radius": r, "protocol": v} that changes what
// Describe reports, to declare an invalid set or a wrong protocol version.
package main

import (
	"context"
	"encoding/json"
	"math"
	"sync"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ldpsql/ldpsql/plugins/proto/ldpv1"
	"github.com/ldpsql/ldpsql/plugins/sdk"
)

type server struct {
	ldpv1.UnimplementedEncoderServer
	mu       sync.Mutex
	radius   float64
	protocol uint32
}

func (s *server) Describe(context.Context, *ldpv1.DescribeRequest) (*ldpv1.Description, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &ldpv1.Description{
		Name: "liar", Version: "test", ProtocolVersion: s.protocol, InputDim: 4, OutputDim: 2,
		OutputSet: &ldpv1.Description_L1Ball{L1Ball: &ldpv1.L1Ball{Radius: s.radius}},
	}, nil
}

func (s *server) Load(_ context.Context, req *ldpv1.LoadRequest) (*ldpv1.LoadResponse, error) {
	var a struct {
		Radius   float64 `json:"radius"`
		Protocol uint32  `json:"protocol"`
	}
	if err := json.Unmarshal(req.GetArtifact(), &a); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.radius, s.protocol = a.Radius, a.Protocol
	return &ldpv1.LoadResponse{}, nil
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
