package sdk

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/ldpsql/ldpsql/plugins/proto/ldpv1"
)

// EncoderPlugin is the go-plugin glue, as in go-plugin's examples/grpc. On the
// plugin side Impl is served over gRPC; on the host side Dispense returns an
// [ldpv1.EncoderClient] and Impl is unused. Only gRPC is supported.
type EncoderPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl Encoder
}

var _ plugin.GRPCPlugin = (*EncoderPlugin)(nil)

// GRPCServer registers the adapter that serves Impl.
func (p *EncoderPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	ldpv1.RegisterEncoderServer(s, NewGRPCServer(p.Impl))
	return nil
}

// GRPCClient returns an ldpv1.EncoderClient on conn.
func (p *EncoderPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return ldpv1.NewEncoderClient(conn), nil
}
