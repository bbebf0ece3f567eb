package classifier

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// Model format (all integers little-endian):
//
//	magic      8 bytes  "LDPSQLCL"
//	version    uint32   ModelVersion
//	headerLen  uint32
//	header     headerLen bytes of JSON: modelHeader
//	values     float32: mean (d), std (d), then the parameters, per layer
//	           W (out×in, row-major) then b (out)
//	checksum   32 bytes: SHA-256 of everything above
const (
	modelMagic = "LDPSQLCL"
	// ModelVersion is the format version MarshalBinary writes; UnmarshalModel
	// reads only this version.
	ModelVersion = 1
	modelFormat  = "ldpsql-classifier"
	maxHeaderLen = 1 << 20
)

type modelHeader struct {
	Format string     `json:"format"`
	Sizes  []int      `json:"sizes"` // input, hidden…, K
	Stats  TrainStats `json:"stats"`
	// Losses as strings would be awkward; NaN is not JSON, so absent = NaN.
	TrainLoss *float64 `json:"train_loss,omitempty"`
	ValLoss   *float64 `json:"val_loss,omitempty"`
}

// ErrBadModel is wrapped by every error UnmarshalModel returns.
var ErrBadModel = errors.New("classifier: bad model")

func finitePtr(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// MarshalBinary encodes the model in the versioned, checksummed format
// documented in serial.go (magic "LDPSQLCL", ModelVersion, JSON header,
// float32 values, SHA-256).
func (m *Model) MarshalBinary() ([]byte, error) {
	h := modelHeader{Format: modelFormat, Sizes: m.nt.sizes, Stats: m.stats,
		TrainLoss: finitePtr(m.stats.TrainLoss), ValLoss: finitePtr(m.stats.ValLoss)}
	hj, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("classifier: encoding the model header: %w", err)
	}
	d := m.InputDim()
	var buf bytes.Buffer
	buf.Grow(len(modelMagic) + 8 + len(hj) + 4*(2*d+len(m.nt.params)) + sha256.Size)
	buf.WriteString(modelMagic)
	var u32 [4]byte
	binary.LittleEndian.PutUint32(u32[:], ModelVersion)
	buf.Write(u32[:])
	binary.LittleEndian.PutUint32(u32[:], uint32(len(hj)))
	buf.Write(u32[:])
	buf.Write(hj)
	for _, s := range [][]float32{m.std.mean, m.std.std, m.nt.params} {
		for _, v := range s {
			binary.LittleEndian.PutUint32(u32[:], math.Float32bits(v))
			buf.Write(u32[:])
		}
	}
	sum := sha256.Sum256(buf.Bytes())
	buf.Write(sum[:])
	return buf.Bytes(), nil
}

func badModel(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrBadModel, fmt.Sprintf(format, a...))
}

// UnmarshalModel decodes a model written by MarshalBinary. Truncated,
// corrupted (checksum), foreign or inconsistent input is an error wrapping
// ErrBadModel; it never panics.
func UnmarshalModel(b []byte) (*Model, error) {
	const fixed = len(modelMagic) + 8
	if len(b) < fixed+sha256.Size {
		return nil, badModel("%d bytes is too short", len(b))
	}
	if string(b[:len(modelMagic)]) != modelMagic {
		return nil, badModel("not a classifier model (magic %q)", b[:len(modelMagic)])
	}
	body, sum := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, badModel("checksum mismatch (corrupted or truncated)")
	}
	if v := binary.LittleEndian.Uint32(b[8:12]); v != ModelVersion {
		return nil, badModel("format version %d, this build reads version %d", v, ModelVersion)
	}
	hl := binary.LittleEndian.Uint32(b[12:16])
	if hl > maxHeaderLen || int(hl) > len(body)-fixed {
		return nil, badModel("header length %d exceeds the data", hl)
	}
	var h modelHeader
	if err := json.Unmarshal(body[fixed:fixed+int(hl)], &h); err != nil {
		return nil, badModel("header: %v", err)
	}
	if h.Format != modelFormat {
		return nil, badModel("format %q, want %q", h.Format, modelFormat)
	}
	s := h.Sizes
	if len(s) < 2 || len(s) > MaxLayers+2 {
		return nil, badModel("%d layer sizes", len(s))
	}
	if s[0] < 1 || s[0] > MaxInputDim {
		return nil, badModel("input dimension %d", s[0])
	}
	if k := s[len(s)-1]; k < 2 || k > MaxClasses {
		return nil, badModel("%d classes", k)
	}
	for _, v := range s[1 : len(s)-1] {
		if v < 1 || v > MaxHidden {
			return nil, badModel("hidden layer size %d", v)
		}
	}
	np := paramCount(s)
	if np < 0 {
		return nil, badModel("too many parameters")
	}
	vals := body[fixed+int(hl):]
	d := s[0]
	if want := 4 * (2*d + np); len(vals) != want {
		return nil, badModel("%d bytes of values, want %d for sizes %v", len(vals), want, s)
	}
	f := make([]float32, 2*d+np)
	for i := range f {
		v := math.Float32frombits(binary.LittleEndian.Uint32(vals[4*i:]))
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, badModel("non-finite value at %d", i)
		}
		f[i] = v
	}
	std := standardiser{mean: f[:d:d], std: f[d : 2*d : 2*d]}
	for j, v := range std.std {
		if !(v > 0) {
			return nil, badModel("standard deviation %d is %v", j, v)
		}
	}
	nt := newNet(append([]int(nil), s...))
	copy(nt.params, f[2*d:])
	st := h.Stats
	st.TrainLoss, st.ValLoss = math.NaN(), math.NaN()
	if h.TrainLoss != nil {
		st.TrainLoss = *h.TrainLoss
	}
	if h.ValLoss != nil {
		st.ValLoss = *h.ValLoss
	}
	return &Model{nt: nt, std: std, stats: st}, nil
}
