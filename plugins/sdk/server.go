package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ldpsql/ldpsql/plugins/proto/ldpv1"
)

// NewGRPCServer returns the gRPC adapter serving impl. Serve uses it; it is
// exported for tests that run an encoder in-process.
func NewGRPCServer(impl Encoder) ldpv1.EncoderServer {
	return &grpcServer{impl: impl}
}

type grpcServer struct {
	ldpv1.UnimplementedEncoderServer
	impl Encoder
	// mu serialises Load (writer) against the other methods (readers).
	mu sync.RWMutex
	// regions are the shared-memory regions the host attached (shared.go).
	regions regionTable
}

// describe returns the completed description; the caller holds mu.
func (s *grpcServer) describe() (Description, error) {
	var d Description
	err := guard("Describe", func() error { d = s.impl.Describe(); return nil })
	if err != nil {
		return d, err
	}
	d.ProtocolVersion = ProtocolVersion
	_, dec := s.impl.(Decoder)
	d.HasDecoder = d.HasDecoder && dec
	_, fit := s.impl.(Fitter)
	d.CanFit = d.CanFit && fit
	if err := d.Validate(); err != nil {
		return d, status.Errorf(codes.Internal, "encoder %q describes itself invalidly: %v", d.Name, err)
	}
	return d, nil
}

func (s *grpcServer) Describe(context.Context, *ldpv1.DescribeRequest) (*ldpv1.Description, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d, err := s.describe()
	if err != nil {
		return nil, err
	}
	pd := d.ToProto()
	pd.Capabilities = capabilities()
	return pd, nil
}

// transform is an Encode or a Decode the encoder is ready to run.
type transform struct {
	op              string // "Encode" or "Decode"
	inCols, outCols int
	f               func([][]float32) ([][]float32, error)
}

// ready returns the Encode (or, with decode, the Decode) the encoder can run now: for Decode it must
// have a decoder and report one, and either way a model must be loaded. The caller holds s.mu for
// reading until the transform has run. Encode, Decode and their shared-memory forms all start here.
func (s *grpcServer) ready(decode bool) (transform, error) {
	dec, isDecoder := s.impl.(Decoder)
	if decode && !isDecoder {
		return transform{}, status.Error(codes.Unimplemented, "encoder has no decoder")
	}
	d, err := s.describe()
	if err != nil {
		return transform{}, err
	}
	if decode && !d.HasDecoder {
		return transform{}, status.Errorf(codes.FailedPrecondition, "encoder %q reports no decoder", d.Name)
	}
	if !d.Ready() {
		return transform{}, status.Errorf(codes.FailedPrecondition, "encoder %q has no model loaded", d.Name)
	}
	if decode {
		return transform{"Decode", d.OutputDim, d.InputDim, dec.Decode}, nil
	}
	return transform{"Encode", d.InputDim, d.OutputDim, s.impl.Encode}, nil
}

func (s *grpcServer) Encode(_ context.Context, req *ldpv1.EncodeRequest) (*ldpv1.EncodeResponse, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, err := s.ready(false)
	if err != nil {
		return nil, err
	}
	out, err := s.apply(t, req.GetRows())
	if err != nil {
		return nil, err
	}
	return &ldpv1.EncodeResponse{Rows: out}, nil
}

func (s *grpcServer) Decode(_ context.Context, req *ldpv1.DecodeRequest) (*ldpv1.DecodeResponse, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, err := s.ready(true)
	if err != nil {
		return nil, err
	}
	out, err := s.apply(t, req.GetLatents())
	if err != nil {
		return nil, err
	}
	return &ldpv1.DecodeResponse{Rows: out}, nil
}

// apply checks in (t.inCols columns), calls t.f and checks and packs its result
// (t.outCols columns, as many rows as in).
func (s *grpcServer) apply(t transform, in *ldpv1.Matrix) (*ldpv1.Matrix, error) {
	op, inCols, outCols, f := t.op, t.inCols, t.outCols, t.f
	rows, err := in.RowViews()
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "%s: %v", op, err)
	}
	if len(rows) > 0 && int(in.GetCols()) != inCols {
		return nil, status.Errorf(codes.InvalidArgument, "%s: rows have %d columns, the encoder takes %d", op, in.GetCols(), inCols)
	}
	if len(rows) == 0 {
		return &ldpv1.Matrix{Cols: uint32(outCols)}, nil
	}
	var out [][]float32
	if err := guard(op, func() (err error) { out, err = f(rows); return err }); err != nil {
		return nil, err
	}
	if len(out) != len(rows) {
		return nil, status.Errorf(codes.Internal, "%s returned %d rows for %d", op, len(out), len(rows))
	}
	m, err := ldpv1.NewMatrix(out, outCols)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%s output: %v", op, err)
	}
	return m, nil
}

func (s *grpcServer) Fit(stream ldpv1.Encoder_FitServer) error {
	f, ok := s.impl.(Fitter)
	if !ok {
		return status.Error(codes.Unimplemented, "encoder cannot fit")
	}
	first, err := stream.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return status.Error(codes.InvalidArgument, "Fit: empty stream")
		}
		return err
	}
	p := first.GetParams()
	if p == nil {
		return status.Error(codes.InvalidArgument, "Fit: the first message must carry the parameters")
	}
	if p.GetInputDim() == 0 || p.GetInputDim() > MaxDim {
		return status.Errorf(codes.InvalidArgument, "Fit: input_dim %d out of range [1, %d]", p.GetInputDim(), MaxDim)
	}
	var params json.RawMessage
	if len(p.GetParamsJson()) > 0 {
		params = json.RawMessage(p.GetParamsJson())
		if !json.Valid(params) {
			return status.Error(codes.InvalidArgument, "Fit: params are not valid JSON")
		}
	}
	rs := &rowStream{stream: stream, cols: int(p.GetInputDim())}
	var art []byte
	err = guard("Fit", func() (err error) {
		s.mu.RLock()
		defer s.mu.RUnlock()
		art, err = f.Fit(params, rs.cols, rs)
		return err
	})
	if err != nil {
		return err
	}
	return stream.SendAndClose(&ldpv1.FitResponse{Artifact: art})
}

type rowStream struct {
	stream ldpv1.Encoder_FitServer
	cols   int
}

func (r *rowStream) Next() ([][]float32, error) {
	msg, err := r.stream.Recv()
	if err != nil {
		return nil, err // io.EOF at the end
	}
	b := msg.GetBatch()
	if b == nil {
		return nil, status.Error(codes.InvalidArgument, "Fit: a later message carries no batch")
	}
	rows, err := b.RowViews()
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "Fit batch: %v", err)
	}
	if len(rows) > 0 && int(b.GetCols()) != r.cols {
		return nil, status.Errorf(codes.InvalidArgument, "Fit batch has %d columns, input_dim is %d", b.GetCols(), r.cols)
	}
	return rows, nil
}

func (s *grpcServer) Load(_ context.Context, req *ldpv1.LoadRequest) (*ldpv1.LoadResponse, error) {
	l, ok := s.impl.(Loader)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "encoder takes no model")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := guard("Load", func() error { return l.Load(req.GetArtifact()) }); err != nil {
		return nil, err
	}
	if _, err := s.describe(); err != nil {
		return nil, err
	}
	return &ldpv1.LoadResponse{}, nil
}

// guard runs f, turning a panic into an Internal error (the stack goes to
// stderr, which the host logs) and a plain error into a gRPC status that
// keeps its message.
func guard(op string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(os.Stderr, "panic in %s: %v\n%s", op, r, debug.Stack())
			err = status.Errorf(codes.Internal, "%s panicked: %v", op, r)
		}
	}()
	err = f()
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Errorf(codes.Unknown, "%s: %v", op, err)
}
