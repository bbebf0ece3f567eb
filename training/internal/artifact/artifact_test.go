package artifact

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

var errBad = errors.New("test: bad artifact")

var format = Format{Magic: "LDPSQLTS", Name: "test artifact", Versions: []uint32{1, 2}, Err: errBad}

// sample is an artifact with header {"n":2} and payload 1.5, -2 (float32)
// and 3 (float64).
func sample(version uint32) []byte {
	b, _ := format.Begin(version, json.RawMessage(`{"n":2}`), 16)
	b = AppendFloat32s(b, []float32{1.5, -2})
	b = AppendFloat64s(b, []float64{3})
	return Seal(b)
}

func TestLayout(t *testing.T) {
	b := sample(2)
	var want []byte
	want = append(want, "LDPSQLTS"...)
	want = append(want, 2, 0, 0, 0, 7, 0, 0, 0)
	want = append(want, `{"n":2}`...)
	want = binary.LittleEndian.AppendUint32(want, math.Float32bits(1.5))
	want = binary.LittleEndian.AppendUint32(want, math.Float32bits(-2))
	want = binary.LittleEndian.AppendUint64(want, math.Float64bits(3))
	sum := sha256.Sum256(want)
	want = append(want, sum[:]...)
	if !bytes.Equal(b, want) {
		t.Fatalf("artifact\n%x\nwant\n%x", b, want)
	}
	if cap(b) != len(b) {
		t.Errorf("Begin sized the buffer %d for %d bytes", cap(b), len(b))
	}
	if _, err := format.Begin(1, math.NaN(), 0); err == nil || !strings.HasPrefix(err.Error(), "test artifact: encoding the header: ") {
		t.Errorf("NaN header: %v", err)
	}
}

func TestOpen(t *testing.T) {
	fr, err := format.Open(sample(1))
	if err != nil {
		t.Fatal(err)
	}
	if fr.Version != 1 || string(fr.Header) != `{"n":2}` || len(fr.Payload) != 16 {
		t.Fatalf("got %+v", fr)
	}
	var h struct{ N int }
	if err := format.DecodeHeader(fr.Header, &h); err != nil || h.N != 2 {
		t.Fatalf("header %+v, %v", h, err)
	}
	r := NewReader(fr.Payload)
	f32, f64 := make([]float32, 2), make([]float64, 1)
	if !r.Float32s(f32) || !r.Float64s(f64) || f32[0] != 1.5 || f32[1] != -2 || f64[0] != 3 || r.Offset() != 16 {
		t.Fatalf("payload %v %v, offset %d", f32, f64, r.Offset())
	}
	if r.Float32s(make([]float32, 1)) || r.Offset() != 16 {
		t.Error("read past the end")
	}
}

func TestOpenErrors(t *testing.T) {
	good := sample(2)
	reseal := func(b []byte) []byte { return Seal(bytes.Clone(b[:len(b)-sha256.Size])) }
	set := func(at int, v uint32) []byte {
		b := bytes.Clone(good)
		binary.LittleEndian.PutUint32(b[at:], v)
		return b
	}
	one := format
	one.Versions = []uint32{1}
	for _, c := range []struct {
		f    *Format
		data []byte
		want string
	}{
		{&format, nil, "0 bytes is too short"},
		{&format, good[:47], "47 bytes is too short"},
		{&format, reseal(append([]byte("LDPSQLVL"), good[8:]...)), `not a test artifact (magic "LDPSQLVL")`},
		{&format, set(8, 3), "format version 3, this build reads versions 1 and 2"},
		{&one, good, "format version 2, this build reads version 1"},
		{&format, good[:len(good)-1], "checksum mismatch"},
		{&format, append(bytes.Clone(good), 0), "checksum mismatch"},
		{&format, set(20, 0), "checksum mismatch"},
		{&format, reseal(set(12, 24)), "header length 24 exceeds the artifact"},
		{&format, reseal(set(12, math.MaxUint32)), "header length 4294967295 exceeds the artifact"},
	} {
		_, err := c.f.Open(c.data)
		if !errors.Is(err, errBad) || !strings.HasPrefix(err.Error(), "test: bad artifact: "+c.want) {
			t.Errorf("Open(%d bytes) = %v, want %q wrapping errBad", len(c.data), err, c.want)
		}
	}
	if _, err := format.Open(reseal(set(12, 23))); err != nil {
		t.Errorf("a header filling the whole artifact: %v", err)
	}
}

func TestDecodeHeaderStrict(t *testing.T) {
	var h struct{ N int }
	for raw, want := range map[string]string{
		`{"n":1,"m":2}`: `header: json: unknown field "m"`,
		`{"n":1} {}`:    "header: trailing data",
		`{"n":"x"}`:     "header: json: cannot unmarshal",
		``:              "header: EOF",
	} {
		if err := format.DecodeHeader([]byte(raw), &h); !errors.Is(err, errBad) || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeHeader(%s) = %v, want %q", raw, err, want)
		}
	}
}

func TestLoad(t *testing.T) {
	f := format
	f.Header, f.MaxInputDim = "test", 4
	load := func(header string) error {
		var h struct {
			Format   string `json:"format"`
			InputDim int    `json:"input_dim"`
			N        int    `json:"n"`
		}
		b, _ := f.Begin(1, json.RawMessage(header), 0)
		_, err := f.Load(Seal(b), &h)
		if err == nil && (h.Format != "test" || h.N != 2) {
			t.Errorf("%s: decoded %+v", header, h)
		}
		return err
	}
	if err := load(`{"n":2,"input_dim":4,"format":"test"}`); err != nil {
		t.Fatal(err)
	}
	for header, want := range map[string]string{
		`{"format":"test","input_dim":1,"m":1}`: `header: json: unknown field "m"`,
		`{"format":"vlm","input_dim":1}`:        `header format "vlm", want "test"`,
		`{"format":"test"}`:                     "input_dim 0, want 1..4",
		`{"format":"test","input_dim":5}`:       "input_dim 5, want 1..4",
	} {
		if err := load(header); !errors.Is(err, errBad) || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("Load(%s) = %v, want %q", header, err, want)
		}
	}
}

func TestReaderNonFinite(t *testing.T) {
	p := AppendFloat32s(nil, []float32{1, float32(math.Inf(-1)), 2})
	r := NewReader(p)
	dst := make([]float32, 3)
	if r.Float32s(dst) || r.Offset() != 4 || dst[0] != 1 {
		t.Errorf("float32 -Inf: offset %d, %v", r.Offset(), dst)
	}
	p = AppendFloat64s(nil, []float64{1, 2, math.NaN()})
	r = NewReader(p)
	if r.Float64s(make([]float64, 3)) || r.Offset() != 16 {
		t.Errorf("float64 NaN: offset %d", r.Offset())
	}
}

// Truncated, extended or altered artifacts are errors, never panics.
func TestNoPanic(t *testing.T) {
	good := sample(1)
	try := func(b []byte) {
		fr, err := format.Open(b)
		if err != nil {
			return
		}
		var h map[string]any
		_ = format.DecodeHeader(fr.Header, &h)
		r := NewReader(fr.Payload)
		r.Float32s(make([]float32, 2))
		r.Float64s(make([]float64, 2))
	}
	for n := range len(good) + 1 {
		try(good[:n])
		try(Seal(bytes.Clone(good[:n])))
	}
	for i := range good {
		b := bytes.Clone(good)
		b[i] ^= 0xff
		try(b)
		try(Seal(b[:len(b)-sha256.Size]))
	}
}

func FuzzOpen(f *testing.F) {
	f.Add(sample(1))
	f.Add(sample(2))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, b := range [][]byte{b, Seal(bytes.Clone(b))} {
			fr, err := format.Open(b)
			if err != nil {
				continue
			}
			var h any
			_ = format.DecodeHeader(fr.Header, &h)
			NewReader(fr.Payload).Float64s(make([]float64, len(fr.Payload)/8))
		}
	})
}
