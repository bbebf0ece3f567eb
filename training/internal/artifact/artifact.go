// Package artifact frames and verifies the training packages' binary model
// artifacts: magic, version, JSON header, payload and SHA-256 checksum, with
// bounds-checked reading, so that corrupted input is an error, never a panic.
//
// Layout (all integers little-endian):
//
//	magic      len(Format.Magic) bytes
//	version    uint32
//	headerLen  uint32
//	header     headerLen bytes of JSON
//	payload    the rest up to the checksum (the packages' values)
//	checksum   32 bytes: SHA-256 of everything above
//
// Load checks the "format" and "input_dim" a header shares with the others
// (the classifier's, lenient and without input_dim, is read with Open); the
// rest of the header and the payload are each package's business.
package artifact

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// A Format is one package's kind of artifact.
type Format struct {
	// Magic opens every artifact of the format.
	Magic string
	// Name is what the artifact is called in "not a <Name> (magic …)".
	Name string
	// Versions are the versions Open accepts, oldest first.
	Versions []uint32
	// Err is wrapped by every error Open, DecodeHeader, Load and Errorf
	// return.
	Err error
	// Header is the "format" every header names, and MaxInputDim bounds the
	// "input_dim" it gives (see Load).
	Header      string
	MaxInputDim int
}

// Errorf returns an error wrapping f.Err: "<f.Err>: <message>".
func (f *Format) Errorf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", f.Err, fmt.Sprintf(format, a...))
}

// fixed is the length of the magic, the version and the header length.
func (f *Format) fixed() int { return len(f.Magic) + 8 }

// Begin starts an artifact: it returns the magic, version, header length and
// header, h encoded as JSON, in a buffer with room for payloadLen bytes of
// payload and the checksum. Append the payload, then Seal.
func (f *Format) Begin(version uint32, h any, payloadLen int) ([]byte, error) {
	header, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("%s: encoding the header: %w", f.Name, err)
	}
	b := make([]byte, 0, f.fixed()+len(header)+payloadLen+sha256.Size)
	b = append(b, f.Magic...)
	b = binary.LittleEndian.AppendUint32(b, version)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(header)))
	return append(b, header...), nil
}

// AppendFloat32s appends s to b as little-endian float32 values.
func AppendFloat32s(b []byte, s []float32) []byte {
	for _, v := range s {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// AppendFloat64s appends s to b as little-endian float64 values.
func AppendFloat64s(b []byte, s []float64) []byte {
	for _, v := range s {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

// Seal appends the SHA-256 checksum of b, a begun artifact with its payload,
// and returns the finished artifact.
func Seal(b []byte) []byte {
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

// A Frame is an opened artifact's version, header and payload; Header and
// Payload alias the data given to Open.
type Frame struct {
	Version uint32
	Header  []byte
	Payload []byte
}

// Open checks, in this order, the length, the magic, the version and the
// checksum of data, and that the header length fits, and splits it. Its
// errors wrap f.Err.
func (f *Format) Open(data []byte) (Frame, error) {
	fixed := f.fixed()
	if len(data) < fixed+sha256.Size {
		return Frame{}, f.Errorf("%d bytes is too short", len(data))
	}
	if magic := data[:len(f.Magic)]; string(magic) != f.Magic {
		return Frame{}, f.Errorf("not a %s (magic %q)", f.Name, magic)
	}
	version := binary.LittleEndian.Uint32(data[len(f.Magic):])
	if !slices.Contains(f.Versions, version) {
		return Frame{}, f.Errorf("format version %d, this build reads %s", version, f.versions())
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return Frame{}, f.Errorf("checksum mismatch (corrupted or truncated)")
	}
	hl := uint64(binary.LittleEndian.Uint32(data[len(f.Magic)+4:]))
	if hl > uint64(len(body)-fixed) {
		return Frame{}, f.Errorf("header length %d exceeds the artifact", hl)
	}
	end := fixed + int(hl)
	return Frame{Version: version, Header: body[fixed:end:end], Payload: body[end:]}, nil
}

// versions says which versions f reads: "version 1", "versions 1 and 2",
// "versions 1, 2 and 3".
func (f *Format) versions() string {
	vs := make([]string, len(f.Versions))
	for i, v := range f.Versions {
		vs[i] = fmt.Sprint(v)
	}
	if len(vs) < 2 {
		return "version " + strings.Join(vs, "")
	}
	return "versions " + strings.Join(vs[:len(vs)-1], ", ") + " and " + vs[len(vs)-1]
}

// DecodeHeader decodes a header strictly into v: unknown fields and data
// after the JSON value are errors (wrapping f.Err).
func (f *Format) DecodeHeader(header []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(header))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return f.Errorf("header: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return f.Errorf("header: trailing data")
	}
	return nil
}

// Load opens data (see Open), decodes its header strictly into h (see
// DecodeHeader) and checks the part of it every package's header shares: a
// "format" of f.Header and an "input_dim" in 1..f.MaxInputDim.
func (f *Format) Load(data []byte, h any) (Frame, error) {
	fr, err := f.Open(data)
	if err != nil {
		return Frame{}, err
	}
	if err := f.DecodeHeader(fr.Header, h); err != nil {
		return Frame{}, err
	}
	// Read apart, so that h stays the package's own struct, fields in the
	// order it writes them.
	var common struct {
		Format   string `json:"format"`
		InputDim int    `json:"input_dim"`
	}
	switch err := json.Unmarshal(fr.Header, &common); {
	case err != nil:
		return Frame{}, f.Errorf("header: %v", err)
	case common.Format != f.Header:
		return Frame{}, f.Errorf("header format %q, want %q", common.Format, f.Header)
	case common.InputDim < 1 || common.InputDim > f.MaxInputDim:
		return Frame{}, f.Errorf("input_dim %d, want 1..%d", common.InputDim, f.MaxInputDim)
	}
	return fr, nil
}

// A Reader reads a payload's little-endian float values in order, checking
// bounds and finiteness.
type Reader struct {
	p   []byte
	off int
}

// NewReader returns a Reader at the start of payload.
func NewReader(payload []byte) *Reader { return &Reader{p: payload} }

// Offset is the number of bytes read; after a failed read, the offset of the
// value at fault (or of the read that ran past the end).
func (r *Reader) Offset() int { return r.off }

// Float32s fills dst with the next len(dst) float32 values. It returns false
// if the payload ends first (dst is then untouched) or a value is NaN or
// infinite (dst is then filled up to it).
func (r *Reader) Float32s(dst []float32) bool {
	if len(dst) > (len(r.p)-r.off)/4 {
		return false
	}
	for i := range dst {
		v := math.Float32frombits(binary.LittleEndian.Uint32(r.p[r.off:]))
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return false
		}
		dst[i] = v
		r.off += 4
	}
	return true
}

// Float64s fills dst with the next len(dst) float64 values, like Float32s.
func (r *Reader) Float64s(dst []float64) bool {
	if len(dst) > (len(r.p)-r.off)/8 {
		return false
	}
	for i := range dst {
		v := math.Float64frombits(binary.LittleEndian.Uint64(r.p[r.off:]))
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
		dst[i] = v
		r.off += 8
	}
	return true
}
