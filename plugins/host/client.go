package host

import (
	"context"
	"errors"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/ldpsql/ldpsql/plugins/internal/wirecodec"
	"github.com/ldpsql/ldpsql/plugins/proto/ldpv1"
)

// dialOptions are the host's gRPC options on a plugin connection (go-plugin
// adds the socket dialer, AutoMTLS and unlimited message sizes). The codec
// packs rows straight into the requests (see package wirecodec); the windows
// match the SDK's server side, so that Decode answers, as large as Encode
// requests, do not wait on flow control either.
var dialOptions = []grpc.DialOption{
	grpc.WithDefaultCallOptions(grpc.ForceCodecV2(wirecodec.Codec{})),
	grpc.WithInitialWindowSize(8 << 20),
	grpc.WithInitialConnWindowSize(16 << 20),
}

// pluginConn is the host's side of a plugin connection: the generated client,
// and the connection itself for the calls that send rows as wirecodec.Rows.
type pluginConn struct {
	ldpv1.EncoderClient
	conn grpc.ClientConnInterface
	// shm holds the process's shared-memory regions; nil if the plugin does
	// not offer the capability (every chunk then goes over gRPC).
	shm *shmPool
}

// encode and decode send rows (each of cols values) as an EncodeRequest or
// DecodeRequest, packed by the codec without an intermediate Matrix.
func (c *pluginConn) encode(ctx context.Context, rows [][]float32, cols int) (*ldpv1.Matrix, error) {
	out := new(ldpv1.EncodeResponse)
	err := c.conn.Invoke(ctx, ldpv1.Encoder_Encode_FullMethodName, &wirecodec.Rows{Field: 1, Rows: rows, Cols: cols}, out)
	return out.GetRows(), err
}

func (c *pluginConn) decode(ctx context.Context, rows [][]float32, cols int) (*ldpv1.Matrix, error) {
	out := new(ldpv1.DecodeResponse)
	err := c.conn.Invoke(ctx, ldpv1.Encoder_Decode_FullMethodName, &wirecodec.Rows{Field: 1, Rows: rows, Cols: cols}, out)
	return out.GetRows(), err
}

// clientPlugin is the host's go-plugin glue: sdk.EncoderPlugin's client side,
// also keeping the connection.
type clientPlugin struct{ plugin.NetRPCUnsupportedPlugin }

var _ plugin.GRPCPlugin = clientPlugin{}

func (clientPlugin) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error {
	return errors.New("host: the host does not serve encoders")
}

func (clientPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return &pluginConn{EncoderClient: ldpv1.NewEncoderClient(conn), conn: conn}, nil
}
