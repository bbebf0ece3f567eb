package sdk

import (
	"context"
	"slices"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/ldpsql/ldpsql/plugins/internal/wirecodec"
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
	s.RegisterService(&encoderServiceDesc, NewGRPCServer(p.Impl))
	return nil
}

// encoderServiceDesc is ldpv1.Encoder_ServiceDesc with an Encode handler that
// reads the request into a wirecodec.EncodeRequest and recycles its buffer
// when the call ends (the rows are only valid during Encode, and the answer
// is packed into a buffer of its own).
var encoderServiceDesc = func() grpc.ServiceDesc {
	d := ldpv1.Encoder_ServiceDesc
	d.Methods = slices.Clone(d.Methods)
	for i := range d.Methods {
		if d.Methods[i].MethodName == "Encode" {
			d.Methods[i].Handler = encodeHandler
		}
	}
	return d
}()

func encodeHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(wirecodec.EncodeRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	defer in.Recycle()
	if interceptor == nil {
		return srv.(ldpv1.EncoderServer).Encode(ctx, &in.EncodeRequest)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: ldpv1.Encoder_Encode_FullMethodName}
	return interceptor(ctx, &in.EncodeRequest, info, func(ctx context.Context, req any) (any, error) {
		return srv.(ldpv1.EncoderServer).Encode(ctx, req.(*ldpv1.EncodeRequest))
	})
}

// GRPCClient returns an ldpv1.EncoderClient on conn.
func (p *EncoderPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return ldpv1.NewEncoderClient(conn), nil
}
