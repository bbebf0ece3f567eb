// Package wirecodec is the gRPC codec that the host and the SDK force on
// plugin connections. It writes and reads the same protobuf bytes as gRPC's
// proto codec, which it delegates to, except for the ldpv1 messages that
// carry a Matrix, where it saves copies:
//
//   - Marshal of a [Rows] (the host's EncodeRequest, DecodeRequest and
//     FitRequest batches, given as [][]float32) packs the rows straight into a
//     pooled buffer that gRPC returns to the pool once it has sent it; there
//     is no intermediate Matrix.
//   - Marshal of an EncodeResponse or DecodeResponse does not copy
//     Matrix.Values: gRPC writes it out from the message itself, so a handler
//     must not change a response after returning it (as with any codec, since
//     gRPC marshals the response after the handler returns).
//   - Unmarshal of a message carrying a Matrix copies the frames once, into a
//     buffer laid out so that Matrix.Values is 4-byte aligned, and points
//     Values into it instead of copying it out again (see
//     [ldpv1.Matrix.RowViews]). Anything but the plain encoding (unknown or
//     repeated fields) goes through proto.Unmarshal. Into an [EncodeRequest]
//     (the SDK's Encode handler) that buffer comes from a pool, and goes back
//     to it when the handler is done.
//
// The codec is named "proto" so that the content-subtype on the wire is what
// a peer using the default codec expects. It is never registered globally:
// use it with grpc.ForceCodecV2 and grpc.ForceServerCodecV2.
package wirecodec

import (
	"bytes"
	"fmt"
	"math"
	"math/bits"
	"sync"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ldpsql/ldpsql/plugins/proto/ldpv1"
)

// Codec is the codec; its zero value is ready to use.
type Codec struct{}

var _ encoding.CodecV2 = Codec{}

// Name is "proto", the name of gRPC's codec.
func (Codec) Name() string { return grpcproto.Name }

// fallback is gRPC's proto codec.
var fallback = encoding.GetCodecV2(grpcproto.Name)

// Rows is a request message whose only field, number Field, is a Matrix of
// len(Rows) rows of Cols values each: an EncodeRequest or DecodeRequest
// (field 1) or a FitRequest carrying a batch (field 2). Only Codec can
// marshal it; it reads Rows during Marshal only.
type Rows struct {
	Field protowire.Number
	Rows  [][]float32
	Cols  int
}

// Field numbers of the messages that carry a Matrix.
const (
	fieldRequestMatrix  = 1 // EncodeRequest.rows, DecodeRequest.latents, EncodeResponse.rows, DecodeResponse.rows
	fieldFitBatch       = 2 // FitRequest.batch
	fieldMatrixRows     = 1
	fieldMatrixCols     = 2
	fieldMatrixValues   = 3
	zeroCopyMinValueLen = 4 << 10 // below this, copying is as cheap as an extra buffer
)

func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *Rows:
		return marshalRows(m)
	case *ldpv1.EncodeResponse:
		if out, ok := marshalAliased(m, m.GetRows()); ok {
			return out, nil
		}
	case *ldpv1.DecodeResponse:
		if out, ok := marshalAliased(m, m.GetRows()); ok {
			return out, nil
		}
	}
	return fallback.Marshal(v)
}

// matrixHeader appends the fields of a Matrix before the values' bytes.
func matrixHeader(b []byte, rows, cols uint32, nvalues int) []byte {
	if rows != 0 {
		b = protowire.AppendTag(b, fieldMatrixRows, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(rows))
	}
	if cols != 0 {
		b = protowire.AppendTag(b, fieldMatrixCols, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(cols))
	}
	if nvalues != 0 {
		b = protowire.AppendTag(b, fieldMatrixValues, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(nvalues))
	}
	return b
}

// header returns the bytes of a message whose only field is a Matrix, up to
// the start of the Matrix's values.
func header(field protowire.Number, rows, cols uint32, nvalues int) []byte {
	var tmp [48]byte
	inner := matrixHeader(tmp[:0], rows, cols, nvalues)
	b := make([]byte, 0, len(inner)+16)
	b = protowire.AppendTag(b, field, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(len(inner)+nvalues))
	return append(b, inner...)
}

func marshalRows(m *Rows) (mem.BufferSlice, error) {
	if m.Field != fieldRequestMatrix && m.Field != fieldFitBatch {
		return nil, fmt.Errorf("wirecodec: Rows field %d is not a Matrix field", m.Field)
	}
	if m.Cols < 0 || uint64(m.Cols) > math.MaxUint32 || uint64(len(m.Rows)) > math.MaxUint32 {
		return nil, fmt.Errorf("wirecodec: %d×%d matrix", len(m.Rows), m.Cols)
	}
	n := uint64(len(m.Rows)) * uint64(m.Cols) * 4
	if n > math.MaxInt32 {
		return nil, fmt.Errorf("wirecodec: %d×%d matrix is too large (%d bytes)", len(m.Rows), m.Cols, n)
	}
	hdr := header(m.Field, uint32(len(m.Rows)), uint32(m.Cols), int(n))
	size := len(hdr) + int(n)
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := ldpv1.AppendRows(append(make([]byte, 0, size), hdr...), m.Rows, m.Cols)
		if err != nil {
			return nil, fmt.Errorf("wirecodec: %v", err)
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	bp := bufPool.Get(size)
	b, err := ldpv1.AppendRows(append((*bp)[:0], hdr...), m.Rows, m.Cols)
	if err != nil {
		bufPool.Put(bp)
		return nil, fmt.Errorf("wirecodec: %v", err)
	}
	*bp = b
	return mem.BufferSlice{mem.NewBuffer(bp, bufPool)}, nil
}

// marshalAliased marshals msg, whose only field (number 1) is mat, as a
// header followed by mat.Values itself, when that is worth it and msg holds
// nothing else.
func marshalAliased(msg proto.Message, mat *ldpv1.Matrix) (mem.BufferSlice, bool) {
	if mat == nil || len(mat.Values) < zeroCopyMinValueLen ||
		len(msg.ProtoReflect().GetUnknown()) != 0 || len(mat.ProtoReflect().GetUnknown()) != 0 {
		return nil, false
	}
	hdr := header(fieldRequestMatrix, mat.Rows, mat.Cols, len(mat.Values))
	return mem.BufferSlice{mem.SliceBuffer(hdr), mem.SliceBuffer(mat.Values)}, true
}

// EncodeRequest is an ldpv1.EncodeRequest that Codec unmarshals into a
// pooled buffer, which Recycle gives back: the SDK's Encode handler uses it,
// since the rows are only valid during Encode. Other codecs see the embedded
// message and unmarshal it as usual (Recycle then does nothing).
type EncodeRequest struct {
	ldpv1.EncodeRequest
	buf *[]byte
}

// Recycle returns the request's buffer to the pool; the request (and every
// view of its rows) must not be used afterwards.
func (r *EncodeRequest) Recycle() {
	if r.buf != nil {
		bufPool.Put(r.buf)
		r.buf = nil
		r.Rows = nil
	}
}

func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	var field protowire.Number
	var set func(*ldpv1.Matrix)
	var pooled *EncodeRequest
	switch m := v.(type) {
	case *EncodeRequest:
		pooled = m
		field, set = fieldRequestMatrix, func(x *ldpv1.Matrix) { m.Rows = x }
		v = &m.EncodeRequest
	case *ldpv1.EncodeRequest:
		field, set = fieldRequestMatrix, func(x *ldpv1.Matrix) { m.Rows = x }
	case *ldpv1.DecodeRequest:
		field, set = fieldRequestMatrix, func(x *ldpv1.Matrix) { m.Latents = x }
	case *ldpv1.EncodeResponse:
		field, set = fieldRequestMatrix, func(x *ldpv1.Matrix) { m.Rows = x }
	case *ldpv1.DecodeResponse:
		field, set = fieldRequestMatrix, func(x *ldpv1.Matrix) { m.Rows = x }
	case *ldpv1.FitRequest:
		field, set = fieldFitBatch, func(x *ldpv1.Matrix) { m.Msg = &ldpv1.FitRequest_Batch{Batch: x} }
	default:
		return fallback.Unmarshal(data, v)
	}
	msg := v.(proto.Message)
	proto.Reset(msg)
	// Copy the frames into a buffer of our own (Values will point into it),
	// shifted so that the values start 4-byte aligned.
	var prefix [64]byte
	pad := 0
	if off, ok := valuesOffset(prefix[:data.CopyTo(prefix[:])], field); ok {
		pad = (4 - off%4) % 4
	}
	var buf []byte
	var bp *[]byte
	if pooled != nil && !mem.IsBelowBufferPoolingThreshold(pad+data.Len()) {
		bp = bufPool.Get(pad + data.Len())
		buf = (*bp)[pad:]
		data.CopyTo(buf)
	} else {
		// bytes.Join allocates without zeroing first.
		parts := make([][]byte, 0, 1+len(data))
		parts = append(parts, prefix[:pad]) // any pad bytes
		for _, b := range data {
			parts = append(parts, b.ReadOnlyData())
		}
		buf = bytes.Join(parts, nil)[pad:]
	}
	mat, ok := parse(buf, field)
	if !ok {
		err := proto.Unmarshal(buf, msg) // copies what it keeps
		if bp != nil {
			bufPool.Put(bp)
		}
		return err
	}
	set(mat)
	if bp != nil {
		pooled.buf = bp
	}
	return nil
}

// valuesOffset returns where the values of the Matrix in field start in a
// message that begins with b, if b shows it.
func valuesOffset(b []byte, field protowire.Number) (int, bool) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != field || typ != protowire.BytesType {
		return 0, false
	}
	off := n
	if _, n = protowire.ConsumeVarint(b[off:]); n < 0 {
		return 0, false
	}
	off += n
	for off < len(b) {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return 0, false
		}
		off += n
		switch {
		case typ == protowire.VarintType && (num == fieldMatrixRows || num == fieldMatrixCols):
			if _, n = protowire.ConsumeVarint(b[off:]); n < 0 {
				return 0, false
			}
			off += n
		case typ == protowire.BytesType && num == fieldMatrixValues:
			if _, n = protowire.ConsumeVarint(b[off:]); n < 0 {
				return 0, false
			}
			return off + n, true
		default:
			return 0, false
		}
	}
	return 0, false
}

// parse reads a message that holds exactly one field, number field, a Matrix
// with each of its fields at most once, and returns the Matrix with Values
// pointing into b. Anything else (including valid encodings that merge
// repeated fields or carry unknown ones) is !ok, for proto.Unmarshal.
func parse(b []byte, field protowire.Number) (*ldpv1.Matrix, bool) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != field || typ != protowire.BytesType {
		return nil, false
	}
	inner, m := protowire.ConsumeBytes(b[n:])
	if m < 0 || n+m != len(b) {
		return nil, false
	}
	mat := &ldpv1.Matrix{}
	var seen [4]bool
	for len(inner) > 0 {
		num, typ, n := protowire.ConsumeTag(inner)
		if n < 0 || num < 1 || num > 3 || seen[num] {
			return nil, false
		}
		seen[num] = true
		inner = inner[n:]
		switch {
		case typ == protowire.VarintType && num != fieldMatrixValues:
			v, n := protowire.ConsumeVarint(inner)
			if n < 0 || v > math.MaxUint32 {
				return nil, false
			}
			if num == fieldMatrixRows {
				mat.Rows = uint32(v)
			} else {
				mat.Cols = uint32(v)
			}
			inner = inner[n:]
		case typ == protowire.BytesType && num == fieldMatrixValues:
			v, n := protowire.ConsumeBytes(inner)
			if n < 0 {
				return nil, false
			}
			if len(v) > 0 {
				mat.Values = v[:len(v):len(v)]
			}
			inner = inner[n:]
		default:
			return nil, false
		}
	}
	return mat, true
}

// bufPool holds the buffers Marshal packs rows into and those EncodeRequest
// is read into, by power-of-two capacity. They are not cleared: what is used
// of them is overwritten first.
var bufPool = &pool{}

type pool struct {
	classes [40]sync.Pool
}

func (p *pool) Get(length int) *[]byte {
	c := bits.Len(uint(length - 1))
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		*b = (*b)[:length]
		return b
	}
	b := make([]byte, length, 1<<c)
	return &b
}

func (p *pool) Put(b *[]byte) {
	c := bits.Len(uint(cap(*b) - 1))
	if cap(*b) == 1<<c && c < len(p.classes) {
		p.classes[c].Put(b)
	}
}
