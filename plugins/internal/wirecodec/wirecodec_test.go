package wirecodec

import (
	"bytes"
	"math"
	"testing"
	"unsafe"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ldpsql/ldpsql/plugins/proto/ldpv1"
)

func rows(n, cols int, seed float32) [][]float32 {
	out := make([][]float32, n)
	for i := range out {
		out[i] = make([]float32, cols)
		for k := range out[i] {
			out[i][k] = seed + float32(i*cols+k)
		}
	}
	if n > 0 && cols > 0 {
		out[0][0] = math.Float32frombits(0x7fc0beef) // a NaN with a payload
	}
	return out
}

func deterministic(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func matrix(t *testing.T, r [][]float32, cols int) *ldpv1.Matrix {
	t.Helper()
	m, err := ldpv1.NewMatrix(r, cols)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// split cuts b into a BufferSlice of pieces of at most n bytes, as gRPC
// hands over a message read from several frames.
func split(b []byte, n int) mem.BufferSlice {
	var s mem.BufferSlice
	for len(b) > 0 {
		k := min(n, len(b))
		s = append(s, mem.SliceBuffer(append([]byte(nil), b[:k]...)))
		b = b[k:]
	}
	return s
}

// Marshal writes exactly what proto would, for every shape (the varints in
// the header change length with rows, cols and the byte count).
func TestMarshalRowsMatchesProto(t *testing.T) {
	c := Codec{}
	for _, shape := range [][2]int{{0, 3}, {1, 1}, {2, 3}, {5, 31}, {300, 7}, {1316, 784}, {3, 200000}} {
		r := rows(shape[0], shape[1], 0.5)
		m := matrix(t, r, shape[1])
		for _, tc := range []struct {
			field protowire.Number
			want  proto.Message
		}{
			{1, &ldpv1.EncodeRequest{Rows: m}},
			{1, &ldpv1.DecodeRequest{Latents: m}},
			{2, &ldpv1.FitRequest{Msg: &ldpv1.FitRequest_Batch{Batch: m}}},
		} {
			data, err := c.Marshal(&Rows{Field: tc.field, Rows: r, Cols: shape[1]})
			if err != nil {
				t.Fatal(err)
			}
			got := data.Materialize()
			data.Free()
			if want := deterministic(t, tc.want); !bytes.Equal(got, want) {
				t.Fatalf("%v %T: %d bytes, want %d (proto)", shape, tc.want, len(got), len(want))
			}
		}
	}
}

func TestMarshalResponsesMatchProto(t *testing.T) {
	c := Codec{}
	for _, n := range []int{0, 1, 100, 5000} { // below and above the zero-copy threshold
		m := matrix(t, rows(n, 8, 2), 8)
		for _, msg := range []proto.Message{&ldpv1.EncodeResponse{Rows: m}, &ldpv1.DecodeResponse{Rows: m}, &ldpv1.EncodeResponse{}} {
			data, err := c.Marshal(msg)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := data.Materialize(), deterministic(t, msg); !bytes.Equal(got, want) {
				t.Fatalf("%d rows, %T: %x, want %x", n, msg, got, want)
			}
			data.Free()
		}
	}
	// Other messages go to the proto codec.
	d := &ldpv1.Description{Name: "x", InputDim: 3, OutputSet: &ldpv1.Description_L1Ball{L1Ball: &ldpv1.L1Ball{Radius: 2}}}
	data, err := c.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var back ldpv1.Description
	if err := c.Unmarshal(data, &back); err != nil || !proto.Equal(&back, d) {
		t.Fatalf("Description: %v %v", &back, err)
	}
}

func TestMarshalRowsErrors(t *testing.T) {
	c := Codec{}
	if _, err := c.Marshal(&Rows{Field: 1, Rows: [][]float32{{1, 2}, {3}}, Cols: 2}); err == nil {
		t.Error("ragged rows marshalled")
	}
	if _, err := c.Marshal(&Rows{Field: 7, Rows: [][]float32{{1}}, Cols: 1}); err == nil {
		t.Error("field 7 marshalled")
	}
	if _, err := c.Marshal(&Rows{Field: 1, Rows: make([][]float32, 2), Cols: 1 << 30}); err == nil {
		t.Error("a 2×2³⁰ matrix marshalled")
	}
}

// Unmarshal gives what proto.Unmarshal gives, from messages split across
// frames anywhere, with Values 4-byte aligned so rows are views.
func TestUnmarshalMatchesProtoAndAligns(t *testing.T) {
	c := Codec{}
	for _, shape := range [][2]int{{0, 3}, {1, 1}, {2, 3}, {5, 31}, {300, 7}, {1316, 784}} {
		m := matrix(t, rows(shape[0], shape[1], 1), shape[1])
		for _, msg := range []proto.Message{
			&ldpv1.EncodeRequest{Rows: m}, &ldpv1.DecodeRequest{Latents: m},
			&ldpv1.EncodeResponse{Rows: m}, &ldpv1.DecodeResponse{Rows: m},
			&ldpv1.FitRequest{Msg: &ldpv1.FitRequest_Batch{Batch: m}},
		} {
			b := deterministic(t, msg)
			for _, frame := range []int{1, 3, 16 << 10, len(b) + 1} {
				if frame < 16 && len(b) > 1<<16 {
					continue // a million one-byte buffers prove nothing more
				}
				got := msg.ProtoReflect().New().Interface()
				if err := c.Unmarshal(split(b, frame), got); err != nil {
					t.Fatal(err)
				}
				if !proto.Equal(got, msg) {
					t.Fatalf("%v %T, frames of %d: differs", shape, msg, frame)
				}
				checkAligned(t, got)
			}
		}
	}
}

func matrixOf(msg proto.Message) *ldpv1.Matrix {
	switch m := msg.(type) {
	case *ldpv1.EncodeRequest:
		return m.GetRows()
	case *ldpv1.DecodeRequest:
		return m.GetLatents()
	case *ldpv1.EncodeResponse:
		return m.GetRows()
	case *ldpv1.DecodeResponse:
		return m.GetRows()
	case *ldpv1.FitRequest:
		return m.GetBatch()
	}
	return nil
}

func checkAligned(t *testing.T, msg proto.Message) {
	t.Helper()
	if v := matrixOf(msg).GetValues(); len(v) > 0 && uintptr(unsafe.Pointer(&v[0]))%4 != 0 {
		t.Fatalf("%T: values at an address ≡ %d mod 4", msg, uintptr(unsafe.Pointer(&v[0]))%4)
	}
}

// Valid encodings other than the plain one (unknown fields, repeated fields,
// which proto merges, fields out of order, a params FitRequest) give what
// proto.Unmarshal gives.
func TestUnmarshalFallsBackToProto(t *testing.T) {
	c := Codec{}
	vals := matrix(t, rows(2, 2, 3), 2).Values
	inner := func(fields ...[]byte) []byte { return bytes.Join(fields, nil) }
	varint := func(num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
	}
	byts := func(num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), v)
	}
	cases := map[string][]byte{
		"plain":            byts(1, inner(varint(1, 2), varint(2, 2), byts(3, vals))),
		"out of order":     byts(1, inner(byts(3, vals), varint(2, 2), varint(1, 2))),
		"repeated rows":    byts(1, inner(varint(1, 7), varint(1, 2), varint(2, 2), byts(3, vals))),
		"repeated values":  byts(1, inner(varint(1, 2), varint(2, 2), byts(3, vals[:4]), byts(3, vals))),
		"matrix twice":     inner(byts(1, inner(varint(1, 2), byts(3, vals))), byts(1, varint(2, 2))),
		"unknown inner":    byts(1, inner(varint(1, 2), varint(2, 2), varint(9, 1), byts(3, vals))),
		"unknown outer":    inner(byts(1, inner(varint(1, 2), varint(2, 2), byts(3, vals))), varint(5, 1)),
		"big varint rows":  byts(1, inner(varint(1, 1<<33+2), varint(2, 2), byts(3, vals))),
		"empty":            nil,
		"empty matrix":     byts(1, nil),
		"values as varint": byts(1, inner(varint(1, 2), varint(3, 5))),
	}
	for name, b := range cases {
		for _, mk := range []func() proto.Message{
			func() proto.Message { return new(ldpv1.EncodeRequest) },
			func() proto.Message { return new(ldpv1.EncodeResponse) },
		} {
			want, got := mk(), mk()
			werr := proto.Unmarshal(b, want)
			gerr := c.Unmarshal(split(b, 5), got)
			if (werr == nil) != (gerr == nil) || (werr == nil && !proto.Equal(got, want)) {
				t.Errorf("%s %T: got %v (%v), want %v (%v)", name, got, got, gerr, want, werr)
			}
		}
	}
	params := &ldpv1.FitRequest{Msg: &ldpv1.FitRequest_Params{Params: &ldpv1.FitParams{ParamsJson: []byte(`{"d":2}`), InputDim: 4}}}
	var got ldpv1.FitRequest
	if err := c.Unmarshal(split(deterministic(t, params), 3), &got); err != nil || !proto.Equal(&got, params) {
		t.Errorf("FitParams: %v %v", &got, err)
	}
}

// The pooled EncodeRequest reads into a pooled buffer, gives it back on
// Recycle, and is a plain EncodeRequest to proto.
func TestPooledEncodeRequest(t *testing.T) {
	c := Codec{}
	want := &ldpv1.EncodeRequest{Rows: matrix(t, rows(100, 50, 4), 50)}
	b := deterministic(t, want)
	for range 3 {
		in := new(EncodeRequest)
		if err := c.Unmarshal(split(b, 16<<10), in); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(&in.EncodeRequest, want) || in.buf == nil {
			t.Fatalf("pooled: equal %v, buffer %v", proto.Equal(&in.EncodeRequest, want), in.buf != nil)
		}
		checkAligned(t, &in.EncodeRequest)
		in.Recycle()
		if in.Rows != nil || in.buf != nil {
			t.Fatal("Recycle left the rows")
		}
		in.Recycle() // idempotent
	}
	// Small messages and other codecs: no pooled buffer, Recycle is a no-op.
	small := &ldpv1.EncodeRequest{Rows: matrix(t, rows(1, 2, 4), 2)}
	in := new(EncodeRequest)
	if err := c.Unmarshal(split(deterministic(t, small), 7), in); err != nil || !proto.Equal(&in.EncodeRequest, small) || in.buf != nil {
		t.Fatalf("small: %v %v", in.buf != nil, err)
	}
	in = new(EncodeRequest)
	if err := proto.Unmarshal(b, in); err != nil || !proto.Equal(&in.EncodeRequest, want) {
		t.Fatalf("proto.Unmarshal into the wrapper: %v", err)
	}
	in.Recycle()
	// An odd encoding falls back to proto and returns the buffer at once.
	odd := append(b, protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 1)...)
	in = new(EncodeRequest)
	if err := c.Unmarshal(split(odd, 16<<10), in); err != nil || in.buf != nil || in.GetRows().GetRows() != 100 {
		t.Fatalf("fallback: %v %v", in.buf != nil, err)
	}
}

func TestPool(t *testing.T) {
	p := &pool{}
	for _, n := range []int{1, 4095, 4096, 4097, 3 << 20} {
		b := p.Get(n)
		if len(*b) != n || cap(*b) < n || cap(*b)&(cap(*b)-1) != 0 {
			t.Fatalf("Get(%d): len %d cap %d", n, len(*b), cap(*b))
		}
		p.Put(b)
	}
	odd := make([]byte, 10, 12)
	p.Put(&odd) // not a power of two: dropped
	if b := p.Get(9); cap(*b) == 12 {
		t.Fatal("a foreign buffer came back")
	}
}
