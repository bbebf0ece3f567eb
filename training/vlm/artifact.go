package vlm

import (
	"errors"
	"math"
	"slices"

	"github.com/ldpsql/ldpsql/training/internal/artifact"
)

// Artifact layout (all integers little-endian):
//
//	magic      8 bytes  "LDPSQLVL"
//	version    uint32   ArtifactVersion
//	headerLen  uint32
//	header     headerLen bytes of JSON: artifactHeader
//	weights    float32 values: for each layer, encoder's then decoder's,
//	           input side first, W (in×out, row-major) then b (out)
//	checksum   32 bytes: SHA-256 of everything above
const (
	artifactMagic = "LDPSQLVL"
	// ArtifactVersion is the version of the artifact format MarshalBinary
	// writes; UnmarshalModel reads it and version 1 (no standardisation).
	ArtifactVersion = 2
	// MaxInputDim bounds the input dimension of a model.
	MaxInputDim = 1 << 24
)

type artifactHeader struct {
	Format   string   `json:"format"` // "ldpsql-vlm"
	InputDim int      `json:"input_dim"`
	Config   Config   `json:"config"`
	BTrain   float32  `json:"b_train"`
	Layers   [][2]int `json:"layers"` // (in, out) of each layer, encoder then decoder
	// Shift and Scale standardise the inputs (Gaussian likelihood, version 2).
	Shift []float32 `json:"shift,omitempty"`
	Scale []float32 `json:"scale,omitempty"`
}

const artifactFormat = "ldpsql-vlm"

// MarshalBinary encodes the model as a versioned artifact with a SHA-256
// checksum, for UnmarshalModel (and the vlm plugin's Load).
func (m *Model) MarshalBinary() ([]byte, error) {
	h := artifactHeader{Format: artifactFormat, InputDim: m.inputDim, Config: m.Config(), BTrain: m.bTrain, Shift: m.shift, Scale: m.scale}
	n := 0
	for _, l := range m.layers() {
		h.Layers = append(h.Layers, [2]int{l.In, l.Out})
		n += len(l.W) + len(l.B)
	}
	b, err := artifactFrame.Begin(ArtifactVersion, h, 4*n)
	if err != nil {
		return nil, err
	}
	for _, l := range m.layers() {
		b = artifact.AppendFloat32s(b, l.W)
		b = artifact.AppendFloat32s(b, l.B)
	}
	return artifact.Seal(b), nil
}

// ErrBadArtifact is wrapped by every error UnmarshalModel returns.
var ErrBadArtifact = errors.New("vlm: bad artifact")

// badArtifact returns an error wrapping ErrBadArtifact.
var badArtifact = artifactFrame.Errorf

// artifactFrame is the artifact's framing: magic, versions, checksum and
// the header's format and input_dim.
var artifactFrame = artifact.Format{Magic: artifactMagic, Name: "VLM artifact", Versions: []uint32{1, ArtifactVersion},
	Err: ErrBadArtifact, Header: artifactFormat, MaxInputDim: MaxInputDim}

// UnmarshalModel decodes an artifact written by MarshalBinary. It checks the
// magic, the version, the checksum, the header (unknown fields are errors),
// the configuration, that the layer shapes match it, the exact length and
// that every weight is finite.
func UnmarshalModel(data []byte) (*Model, error) {
	var h artifactHeader
	fr, err := artifactFrame.Load(data, &h)
	if err != nil {
		return nil, err
	}
	cfg := h.Config
	if err := cfg.validate(); err != nil {
		return nil, badArtifact("config: %v", err)
	}
	if cfg.Epochs < 1 || (!cfg.Linear && len(cfg.Hidden) == 0) {
		return nil, badArtifact("config: epochs %d, hidden %v: a trained model's are set", cfg.Epochs, cfg.Hidden)
	}
	if cfg.Likelihood != Bernoulli && cfg.Likelihood != Gaussian {
		return nil, badArtifact("likelihood %q, want %q or %q", cfg.Likelihood, Bernoulli, Gaussian)
	}
	if h.Shift != nil || h.Scale != nil {
		if len(h.Shift) != h.InputDim || len(h.Scale) != h.InputDim {
			return nil, badArtifact("standardisation of %d and %d values, want %d each", len(h.Shift), len(h.Scale), h.InputDim)
		}
		for j := range h.Shift {
			if sh, sc := float64(h.Shift[j]), float64(h.Scale[j]); math.IsNaN(sh) || math.IsInf(sh, 0) || !(sc > 0) || math.IsInf(sc, 0) {
				return nil, badArtifact("standardisation of feature %d: shift %v, scale %v", j, sh, sc)
			}
		}
	}
	if b := float64(h.BTrain); !(b > 0) || math.IsInf(b, 0) {
		return nil, badArtifact("b_train %v, want a finite number > 0", h.BTrain)
	}
	// Check the shapes and the length before allocating anything.
	es := encoderSizes(cfg, h.InputDim)
	var want [][2]int
	for i := 0; i+1 < len(es); i++ {
		want = append(want, [2]int{es[i], es[i+1]})
	}
	for i := len(es) - 1; i > 0; i-- {
		want = append(want, [2]int{es[i], es[i-1]})
	}
	if !slices.Equal(h.Layers, want) {
		return nil, badArtifact("layer shapes %v do not match the config (%v)", h.Layers, want)
	}
	var n int64 // sizes are bounded (MaxInputDim, MaxHidden, MaxD): no overflow
	for _, l := range want {
		n += int64(l[0]+1) * int64(l[1])
	}
	if int64(len(fr.Payload)) != 4*n {
		return nil, badArtifact("%d bytes of weights, want %d", len(fr.Payload), 4*n)
	}
	m := newModel(cfg, h.InputDim)
	m.bTrain, m.shift, m.scale = h.BTrain, h.Shift, h.Scale
	r := artifact.NewReader(fr.Payload)
	for li, l := range m.layers() {
		if !r.Float32s(l.W) || !r.Float32s(l.B) {
			return nil, badArtifact("layer %d has a non-finite weight", li)
		}
	}
	return m, nil
}
