// Package sdk is what an ldpsql encoder plugin is written against.
//
// An encoder is a deterministic map from a high-dimensional row to a small
// vector, run by the ldpsql host as a separate process (hashicorp go-plugin over
// gRPC, protocol ldpv1). The encoder declares the set its outputs lie in, an L1
// ball or a per-coordinate box; the host re-clips every output into that set and
// adds the noise, so an encoder never sees the privacy budget and cannot weaken
// the guarantee by returning values outside its set.
//
// A plugin implements [Encoder], optionally [Decoder], [Fitter] and [Loader]
// (detected by type assertion), and calls [Serve] from main:
//
//	type meanPool struct{}
//
//	func (meanPool) Describe() sdk.Description { ... }
//	func (meanPool) Encode(rows [][]float32) ([][]float32, error) { ... }
//
//	func main() { sdk.Serve(meanPool{}) }
//
// Run directly from a shell, the binary prints a notice that it is a plugin and
// exits 1. The host starts it with a magic cookie in the environment and talks
// to it over a Unix socket secured with one-time mutual TLS. On Linux, Serve also
// offers the host the shared-memory transport: the rows of Encode and Decode then
// arrive as views of memory the host shares with the plugin instead of inside
// gRPC messages; an encoder sees no difference.
//
// Concurrency: Describe, Encode, Decode and Fit may be called concurrently from
// several goroutines; Serve serialises Load against all of them. Encode and
// Decode must be deterministic functions of the loaded model and the input.
// A panic in any method is recovered and returned to the host as an error.
package sdk

import (
	"encoding/json"
	"math"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/ldpsql/ldpsql/plugins/internal/wirecodec"
	"github.com/ldpsql/ldpsql/plugins/proto/ldpv1"
)

// ProtocolVersion is the version of the host–plugin protocol this SDK speaks.
const ProtocolVersion = ldpv1.ProtocolVersion

// PluginName is the name under which the encoder is served in the go-plugin
// plugin set.
const PluginName = "encoder"

// MaxMessageBytes is the largest gRPC message a plugin built with this SDK
// accepts (the gRPC default is 4 MiB). It bounds Load artifacts; the host splits
// Encode, Decode and Fit batches into messages under 4 MiB anyway.
const MaxMessageBytes = 1 << 30

// Handshake is the go-plugin handshake shared by the host and every encoder
// plugin. The magic cookie is a usability check, not a security feature.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "LDPSQL_ENCODER_PLUGIN",
	MagicCookieValue: "b6f1e0a4-ldpsql-encoder-v1",
}

// Encoder is the interface every plugin implements.
type Encoder interface {
	// Describe reports the encoder and, when a model is loaded (or none is
	// needed), its dimensions and output set. It should be cheap: it is called
	// on every Encode and Decode to check shapes.
	Describe() Description
	// Encode maps each row (InputDim values) to a vector of OutputDim values
	// in the declared output set. len(result) must equal len(rows). The rows
	// are only valid during the call; do not retain or modify them.
	Encode(rows [][]float32) ([][]float32, error)
}

// Decoder is implemented by encoders that can map a latent vector (OutputDim
// values, typically a noisy one) back to input space (InputDim values).
type Decoder interface {
	Decode(latents [][]float32) ([][]float32, error)
}

// Fitter is implemented by encoders that learn a model from auxiliary rows.
// params is the JSON value the caller passed (nil if none); every batch from
// rows has inputDim columns. Fit returns an opaque artifact for [Loader.Load]
// and must not change the loaded model.
type Fitter interface {
	Fit(params json.RawMessage, inputDim int, rows RowStream) (artifact []byte, err error)
}

// Loader is implemented by encoders that use a model. After Load, Describe
// must reflect the loaded model.
type Loader interface {
	Load(artifact []byte) error
}

// RowStream yields the batches of rows of a Fit call.
type RowStream interface {
	// Next returns the next batch, or io.EOF after the last one. A batch
	// stays valid after the next call.
	Next() ([][]float32, error)
}

// Serve runs impl as a plugin and returns when the host tells it to stop.
// It must be called from main.
func Serve(impl Encoder) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         plugin.PluginSet{PluginName: &EncoderPlugin{Impl: impl}},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			// wirecodec: the same protobuf bytes with fewer copies of the
			// matrices (rows arrive as views of the received message); no read
			// buffer: frames are read straight from TLS, one copy fewer.
			opts = append(opts, grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(math.MaxInt32),
				grpc.InitialWindowSize(8<<20), grpc.InitialConnWindowSize(16<<20),
				grpc.ForceServerCodecV2(wirecodec.Codec{}), grpc.ReadBufferSize(0))
			return plugin.DefaultGRPCServer(opts)
		},
	})
}
