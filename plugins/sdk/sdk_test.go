package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/ldpsql/ldpsql/plugins/internal/wirecodec"
	"github.com/ldpsql/ldpsql/plugins/proto/ldpv1"
)

// scaler is a test encoder: 3 → 3, z = factor·x, L1 ball of radius 100 once
// loaded (the artifact is the factor as JSON). Row value -7 panics, -8 makes
// it return too few rows.
type scaler struct {
	mu     sync.Mutex
	factor float32
	loaded bool
	fitted int
}

func (s *scaler) Describe() Description {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := Description{Name: "scaler", Version: "t", HasDecoder: true, CanFit: true}
	if s.loaded {
		d.InputDim, d.OutputDim, d.OutputSet = 3, 3, L1Ball(100)
	}
	if s.factor == 99 {
		d.OutputSet = L1Ball(math.Inf(1))
	}
	return d
}

func (s *scaler) Encode(rows [][]float32) ([][]float32, error) {
	out := make([][]float32, 0, len(rows))
	for _, r := range rows {
		switch r[0] {
		case -7:
			panic("seven")
		case -8:
			return out, nil
		case -9:
			return nil, errors.New("nine is right out")
		}
		out = append(out, []float32{s.factor * r[0], s.factor * r[1], s.factor * r[2]})
	}
	return out, nil
}

func (s *scaler) Decode(z [][]float32) ([][]float32, error) { return z, nil }

func (s *scaler) Fit(params json.RawMessage, inputDim int, rows RowStream) ([]byte, error) {
	n := 0
	for {
		b, err := rows.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		n += len(b)
	}
	s.mu.Lock()
	s.fitted = n
	s.mu.Unlock()
	return json.Marshal(map[string]any{"n": n, "dim": inputDim, "params": params})
}

func (s *scaler) Load(a []byte) error {
	var f float32
	if err := json.Unmarshal(a, &f); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.factor, s.loaded = f, true
	return nil
}

// encodeOnly implements only Encoder.
type encodeOnly struct{}

func (encodeOnly) Describe() Description {
	return Description{Name: "enc", InputDim: 1, OutputDim: 1, OutputSet: Box([]float64{0}, []float64{1}), HasDecoder: true, CanFit: true}
}
func (encodeOnly) Encode(rows [][]float32) ([][]float32, error) { return rows, nil }

func dial(t *testing.T, impl Encoder) ldpv1.EncoderClient {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	ldpv1.RegisterEncoderServer(srv, NewGRPCServer(impl))
	go srv.Serve(lis) //nolint:errcheck
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); srv.Stop() })
	return ldpv1.NewEncoderClient(conn)
}

func mat(t *testing.T, rows [][]float32, cols int) *ldpv1.Matrix {
	t.Helper()
	m, err := ldpv1.NewMatrix(rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func wantCode(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	if status.Code(err) != code || !strings.Contains(err.Error(), msg) {
		t.Errorf("got %v, want %s containing %q", err, code, msg)
	}
}

func TestServerEncodeLifecycle(t *testing.T) {
	ctx := context.Background()
	s := &scaler{}
	c := dial(t, s)
	pd, err := c.Describe(ctx, &ldpv1.DescribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := DescriptionFromProto(pd)
	if err != nil || d.ProtocolVersion != ProtocolVersion || d.Ready() || !d.HasDecoder || !d.CanFit {
		t.Fatalf("%+v %v", d, err)
	}
	x := [][]float32{{1, 2, 3}, {4, 5, 6}}
	_, err = c.Encode(ctx, &ldpv1.EncodeRequest{Rows: mat(t, x, 3)})
	wantCode(t, err, codes.FailedPrecondition, "no model loaded")

	if _, err := c.Load(ctx, &ldpv1.LoadRequest{Artifact: []byte("2")}); err != nil {
		t.Fatal(err)
	}
	r, err := c.Encode(ctx, &ldpv1.EncodeRequest{Rows: mat(t, x, 3)})
	if err != nil {
		t.Fatal(err)
	}
	z, _ := r.GetRows().RowViews()
	if len(z) != 2 || z[1][2] != 12 {
		t.Fatalf("encode: %v", z)
	}
	r, err = c.Encode(ctx, &ldpv1.EncodeRequest{Rows: &ldpv1.Matrix{Cols: 3}})
	if err != nil || r.GetRows().GetRows() != 0 || r.GetRows().GetCols() != 3 {
		t.Errorf("empty batch: %v %v", r, err)
	}

	_, err = c.Encode(ctx, &ldpv1.EncodeRequest{Rows: mat(t, [][]float32{{1, 2}}, 2)})
	wantCode(t, err, codes.InvalidArgument, "rows have 2 columns, the encoder takes 3")
	_, err = c.Encode(ctx, &ldpv1.EncodeRequest{Rows: &ldpv1.Matrix{Rows: 2, Cols: 3, Values: make([]byte, 20)}})
	wantCode(t, err, codes.InvalidArgument, "needs 6 values (24 bytes), got 20 bytes")
	_, err = c.Encode(ctx, &ldpv1.EncodeRequest{})
	wantCode(t, err, codes.InvalidArgument, "missing")
	_, err = c.Encode(ctx, &ldpv1.EncodeRequest{Rows: mat(t, [][]float32{{-7, 0, 0}}, 3)})
	wantCode(t, err, codes.Internal, "Encode panicked: seven")
	_, err = c.Encode(ctx, &ldpv1.EncodeRequest{Rows: mat(t, [][]float32{{1, 1, 1}, {-8, 0, 0}}, 3)})
	wantCode(t, err, codes.Internal, "returned 1 rows for 2")
	_, err = c.Encode(ctx, &ldpv1.EncodeRequest{Rows: mat(t, [][]float32{{-9, 0, 0}}, 3)})
	wantCode(t, err, codes.Unknown, "nine is right out")

	dr, err := c.Decode(ctx, &ldpv1.DecodeRequest{Latents: mat(t, x, 3)})
	if err != nil || dr.GetRows().GetRows() != 2 {
		t.Errorf("decode: %v %v", dr, err)
	}
	_, err = c.Load(ctx, &ldpv1.LoadRequest{Artifact: []byte("nope")})
	wantCode(t, err, codes.Unknown, "Load")
	_, err = c.Load(ctx, &ldpv1.LoadRequest{Artifact: []byte("99")})
	wantCode(t, err, codes.Internal, "describes itself invalidly")
}

func TestServerFit(t *testing.T) {
	ctx := context.Background()
	s := &scaler{}
	c := dial(t, s)
	fit := func(msgs ...*ldpv1.FitRequest) (*ldpv1.FitResponse, error) {
		st, err := c.Fit(ctx)
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if err := st.Send(m); err != nil {
				break
			}
		}
		return st.CloseAndRecv()
	}
	params := func(js string, dim uint32) *ldpv1.FitRequest {
		return &ldpv1.FitRequest{Msg: &ldpv1.FitRequest_Params{Params: &ldpv1.FitParams{ParamsJson: []byte(js), InputDim: dim}}}
	}
	batch := func(rows [][]float32, cols int) *ldpv1.FitRequest {
		return &ldpv1.FitRequest{Msg: &ldpv1.FitRequest_Batch{Batch: mat(t, rows, cols)}}
	}
	r, err := fit(params(`{"a":1}`, 2), batch([][]float32{{1, 2}, {3, 4}}, 2), batch([][]float32{{5, 6}}, 2))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		N, Dim int
		Params map[string]int
	}
	if err := json.Unmarshal(r.GetArtifact(), &got); err != nil || got.N != 3 || got.Dim != 2 || got.Params["a"] != 1 {
		t.Errorf("artifact %s: %v", r.GetArtifact(), err)
	}
	_, err = fit()
	wantCode(t, err, codes.InvalidArgument, "empty stream")
	_, err = fit(batch([][]float32{{1, 2}}, 2))
	wantCode(t, err, codes.InvalidArgument, "first message must carry the parameters")
	_, err = fit(params(`{`, 2))
	wantCode(t, err, codes.InvalidArgument, "not valid JSON")
	_, err = fit(params(``, 0))
	wantCode(t, err, codes.InvalidArgument, "input_dim 0")
	_, err = fit(params(``, 2), batch([][]float32{{1, 2, 3}}, 3))
	wantCode(t, err, codes.InvalidArgument, "has 3 columns, input_dim is 2")
	_, err = fit(params(``, 2), params(``, 2))
	wantCode(t, err, codes.InvalidArgument, "carries no batch")
}

func TestServerOptionalMethods(t *testing.T) {
	ctx := context.Background()
	c := dial(t, encodeOnly{})
	pd, err := c.Describe(ctx, &ldpv1.DescribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if pd.GetHasDecoder() || pd.GetCanFit() {
		t.Errorf("flags reported without the methods: %v", pd)
	}
	_, err = c.Decode(ctx, &ldpv1.DecodeRequest{Latents: mat(t, [][]float32{{1}}, 1)})
	wantCode(t, err, codes.Unimplemented, "no decoder")
	_, err = c.Load(ctx, &ldpv1.LoadRequest{})
	wantCode(t, err, codes.Unimplemented, "no model")
	st, err := c.Fit(ctx)
	if err == nil {
		_, err = st.CloseAndRecv()
	}
	wantCode(t, err, codes.Unimplemented, "cannot fit")
}

func TestDescriptionValidateAndProto(t *testing.T) {
	good := []Description{
		{Name: "a"},
		{Name: "a", InputDim: 5, OutputDim: 2, OutputSet: L1Ball(3), ProtocolVersion: 1, HasDecoder: true},
		{Name: "a", InputDim: 1, OutputDim: 2, OutputSet: Box([]float64{-1, 0}, []float64{1, 0.5}), CanFit: true},
	}
	for _, d := range good {
		if err := d.Validate(); err != nil {
			t.Errorf("%+v: %v", d, err)
		}
		back, err := DescriptionFromProto(d.ToProto())
		if err != nil || !back.Equal(d) {
			t.Errorf("round trip of %+v: %+v, %v", d, back, err)
		}
	}
	bad := []Description{
		{},
		{Name: "a", InputDim: -1},
		{Name: "a", OutputSet: L1Ball(1)},
		{Name: "a", InputDim: 1, OutputDim: 1, OutputSet: L1Ball(0)},
		{Name: "a", InputDim: 1, OutputDim: 1, OutputSet: L1Ball(math.NaN())},
		{Name: "a", InputDim: 1, OutputDim: 1, OutputSet: L1Ball(math.Inf(1))},
		{Name: "a", InputDim: 1, OutputDim: 2, OutputSet: Box([]float64{0}, []float64{1})},
		{Name: "a", InputDim: 1, OutputDim: 1, OutputSet: Box([]float64{1}, []float64{0})},
		// A constant coordinate: the host's randomisers refuse it, so registration must.
		{Name: "a", InputDim: 1, OutputDim: 2, OutputSet: Box([]float64{-1, 0}, []float64{1, 0})},
		{Name: "a", InputDim: 1, OutputDim: 1, OutputSet: Box([]float64{-math.MaxFloat64}, []float64{math.MaxFloat64})},
		{Name: "a", InputDim: 1, OutputDim: 1, OutputSet: Box([]float64{math.Inf(-1)}, []float64{0})},
		{Name: "a", InputDim: 1, OutputDim: 1, OutputSet: OutputSet{Kind: 7}},
	}
	for _, d := range bad {
		if d.Validate() == nil {
			t.Errorf("%+v validated", d)
		}
	}
	if _, err := DescriptionFromProto(&ldpv1.Description{Name: "a", InputDim: 1, OutputDim: 1, OutputSet: &ldpv1.Description_L1Ball{}}); err == nil {
		t.Error("an L1 ball without a radius was accepted")
	}
}

func TestOutputSetContains(t *testing.T) {
	b := L1Ball(1)
	if !b.Contains([]float32{0.5, -0.5}) || b.Contains([]float32{0.5, -0.6}) || b.Contains([]float32{float32(math.NaN())}) {
		t.Error("L1 ball")
	}
	x := Box([]float64{0, -1}, []float64{1, 1})
	if !x.Contains([]float32{0, 1}) || x.Contains([]float32{2, 0}) || x.Contains([]float32{0}) || x.Contains([]float32{float32(math.NaN()), 0}) {
		t.Error("box")
	}
	if (OutputSet{}).Contains(nil) {
		t.Error("no set")
	}
}

// The served Encode handler reads requests into recycled buffers: answers
// must still be right when calls overlap, with the plugins' codec (as Serve
// sets it up) or gRPC's default one. encodeOnly returns its input rows
// themselves, the case where the answer is packed from the request buffer.
func TestServedEncodeRecyclesRequests(t *testing.T) {
	for _, name := range []string{"wirecodec", "default"} {
		t.Run(name, func(t *testing.T) {
			var sopts []grpc.ServerOption
			copts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
			if name == "wirecodec" {
				sopts = append(sopts, grpc.ForceServerCodecV2(wirecodec.Codec{}))
				copts = append(copts, grpc.WithDefaultCallOptions(grpc.ForceCodecV2(wirecodec.Codec{})))
			}
			lis := bufconn.Listen(1 << 20)
			srv := grpc.NewServer(sopts...)
			if err := (&EncoderPlugin{Impl: encodeOnly{}}).GRPCServer(nil, srv); err != nil {
				t.Fatal(err)
			}
			go srv.Serve(lis) //nolint:errcheck
			copts = append(copts, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
			conn, err := grpc.NewClient("passthrough:///bufnet", copts...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close(); srv.Stop() })
			c := ldpv1.NewEncoderClient(conn)
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for it := range 20 {
						x := make([][]float32, 5000) // 20 KB: a pooled buffer
						for i := range x {
							x[i] = []float32{float32(g*1e6 + it*1e4 + i)}
						}
						r, err := c.Encode(context.Background(), &ldpv1.EncodeRequest{Rows: mat(t, x, 1)})
						if err != nil {
							t.Error(err)
							return
						}
						z, err := r.GetRows().RowViews()
						if err != nil || len(z) != len(x) {
							t.Errorf("%d rows, %v", len(z), err)
							return
						}
						for i := range z {
							if z[i][0] != x[i][0] {
								t.Errorf("goroutine %d call %d row %d: %v, want %v", g, it, i, z[i][0], x[i][0])
								return
							}
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}
