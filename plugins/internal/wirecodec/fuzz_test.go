package wirecodec

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ldpsql/ldpsql/plugins/proto/ldpv1"
)

// matrixMessages are the messages Codec reads without proto.Unmarshal, each new.
var matrixMessages = []func() proto.Message{
	func() proto.Message { return &ldpv1.EncodeRequest{} },
	func() proto.Message { return &ldpv1.DecodeRequest{} },
	func() proto.Message { return &ldpv1.EncodeResponse{} },
	func() proto.Message { return &ldpv1.DecodeResponse{} },
	func() proto.Message { return &ldpv1.FitRequest{} },
}

// FuzzUnmarshal feeds Codec arbitrary bytes, cut into frames as gRPC hands them over, for each message
// it reads itself. Whatever a peer sends, Codec must agree with proto.Unmarshal (the same error or the
// same message), and give a Matrix whose RowViews either refuses it or covers exactly its values: no
// rows or cols field, whatever it promises, makes a reader allocate beyond the bytes it was given.
func FuzzUnmarshal(f *testing.F) {
	m, _ := ldpv1.NewMatrix(rows(3, 4, 1), 4)
	valid, _ := proto.Marshal(&ldpv1.EncodeRequest{Rows: m})
	f.Add(valid, uint16(7), uint8(0))
	f.Add(valid, uint16(7), uint8(4)) // as a FitRequest: field 1 is not its batch
	fit, _ := proto.Marshal(&ldpv1.FitRequest{Msg: &ldpv1.FitRequest_Batch{Batch: m}})
	f.Add(fit, uint16(100), uint8(4))
	f.Add([]byte{}, uint16(1), uint8(1))
	// A Matrix whose rows and cols promise 2^32−1 squared values over none, and a values length
	// prefix of 2^62 bytes over none.
	f.Add([]byte{0x0a, 0x0c, 0x08, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x10, 0xff, 0xff, 0xff, 0xff, 0x0f}, uint16(3), uint8(2))
	f.Add([]byte{0x0a, 0x0b, 0x1a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40}, uint16(5), uint8(3))
	f.Add(append(bytes.Clone(valid), 0x10, 0x01), uint16(64), uint8(0)) // a trailing unknown field
	f.Fuzz(func(t *testing.T, data []byte, frame uint16, which uint8) {
		newMsg := matrixMessages[int(which)%len(matrixMessages)]
		got, want := newMsg(), newMsg()
		err := Codec{}.Unmarshal(split(data, 1+int(frame)%4096), got)
		wantErr := proto.Unmarshal(data, want)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("Codec: %v, proto: %v", err, wantErr)
		}
		if err != nil {
			return
		}
		if !proto.Equal(got, want) {
			t.Fatalf("Codec read %v, proto %v", got, want)
		}
		var mat *ldpv1.Matrix
		switch msg := got.(type) {
		case *ldpv1.EncodeRequest:
			mat = msg.GetRows()
		case *ldpv1.DecodeRequest:
			mat = msg.GetLatents()
		case *ldpv1.EncodeResponse:
			mat = msg.GetRows()
		case *ldpv1.DecodeResponse:
			mat = msg.GetRows()
		case *ldpv1.FitRequest:
			mat = msg.GetBatch()
		}
		views, err := mat.RowViews()
		if err != nil {
			return
		}
		n := 0
		for _, r := range views {
			if len(r) != int(mat.Cols) {
				t.Fatalf("a row of %d values in a %d×%d matrix", len(r), mat.Rows, mat.Cols)
			}
			n += len(r)
		}
		if len(views) != int(mat.Rows) || 4*n != len(mat.Values) {
			t.Fatalf("%d rows, %d values from a %d×%d matrix of %d bytes", len(views), n, mat.Rows, mat.Cols, len(mat.Values))
		}
	})
}

// FuzzRowsRoundTrip marshals rows as the host sends them and reads them back as the SDK does: every
// value, NaN payloads included, must come back bit for bit.
func FuzzRowsRoundTrip(f *testing.F) {
	f.Add([]byte{}, uint8(1), uint16(7), false)
	f.Add(bytes.Repeat([]byte{0x01, 0x00, 0xc0, 0x7f}, 12), uint8(3), uint16(5), true)
	f.Add(bytes.Repeat([]byte{0xff}, 4*3000), uint8(4), uint16(1000), false) // above the pooling threshold
	f.Fuzz(func(t *testing.T, raw []byte, cols uint8, frame uint16, fit bool) {
		c := 1 + int(cols)%64
		vals := make([]float32, len(raw)/4)
		for i := range vals {
			vals[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		in := make([][]float32, len(vals)/c)
		for i := range in {
			in[i] = vals[i*c : (i+1)*c]
		}
		field, msg := protowire.Number(fieldRequestMatrix), proto.Message(&EncodeRequest{})
		if fit {
			field, msg = fieldFitBatch, &ldpv1.FitRequest{}
		}
		wire, err := Codec{}.Marshal(&Rows{Field: field, Rows: in, Cols: c})
		if err != nil {
			t.Fatal(err)
		}
		b := wire.Materialize()
		wire.Free()
		if err := (Codec{}).Unmarshal(split(b, 1+int(frame)), msg); err != nil {
			t.Fatal(err)
		}
		var mat *ldpv1.Matrix
		if fit {
			mat = msg.(*ldpv1.FitRequest).GetBatch()
		} else {
			req := msg.(*EncodeRequest)
			defer req.Recycle()
			mat = req.GetRows()
		}
		out, err := mat.RowViews()
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != len(in) || (len(in) > 0 && int(mat.Cols) != c) {
			t.Fatalf("%d×%d came back as %d×%d", len(in), c, len(out), mat.Cols)
		}
		for i := range in {
			for k := range in[i] {
				if math.Float32bits(in[i][k]) != math.Float32bits(out[i][k]) {
					t.Fatalf("value (%d, %d) %x came back as %x", i, k, math.Float32bits(in[i][k]), math.Float32bits(out[i][k]))
				}
			}
		}
	})
}
