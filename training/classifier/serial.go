package classifier

import (
	"encoding/json"
	"errors"
	"math"

	"github.com/ldpsql/ldpsql/training/internal/artifact"

	"github.com/ldpsql/ldpsql/training/nn"
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
	d := m.InputDim()
	b, err := modelFrame.Begin(ModelVersion, h, 4*(2*d+len(m.nt.params)))
	if err != nil {
		return nil, err
	}
	for _, s := range [][]float32{m.std.Mean, m.std.Std, m.nt.params} {
		b = artifact.AppendFloat32s(b, s)
	}
	return artifact.Seal(b), nil
}

// modelFrame is the format's framing: magic, version and checksum.
var modelFrame = artifact.Format{Magic: modelMagic, Name: "classifier model", Versions: []uint32{ModelVersion}, Err: ErrBadModel}

// UnmarshalModel decodes a model written by MarshalBinary. Truncated,
// corrupted (checksum), foreign or inconsistent input is an error wrapping
// ErrBadModel; it never panics.
func UnmarshalModel(b []byte) (*Model, error) {
	fr, err := modelFrame.Open(b)
	if err != nil {
		return nil, err
	}
	badModel := modelFrame.Errorf
	if len(fr.Header) > maxHeaderLen {
		return nil, badModel("header length %d exceeds the data", len(fr.Header))
	}
	// Unlike the other training packages' headers, unknown fields are
	// ignored here.
	var h modelHeader
	if err := json.Unmarshal(fr.Header, &h); err != nil {
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
	d := s[0]
	if want := 4 * (2*d + np); len(fr.Payload) != want {
		return nil, badModel("%d bytes of values, want %d for sizes %v", len(fr.Payload), want, s)
	}
	f := make([]float32, 2*d+np)
	if r := artifact.NewReader(fr.Payload); !r.Float32s(f) {
		return nil, badModel("non-finite value at %d", r.Offset()/4)
	}
	std := nn.Standardiser{Mean: f[:d:d], Std: f[d : 2*d : 2*d]}
	for j, v := range std.Std {
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
