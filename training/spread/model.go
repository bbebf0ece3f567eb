package spread

import (
	"errors"
	"math"
	"slices"

	"github.com/ldpsql/ldpsql/training/internal/artifact"
	"github.com/ldpsql/ldpsql/training/nn"
)

// Model is a trained multinomial logistic-regression classifier,
// p(c|x) = softmax(Wx + b)_c, in the features' original units.
type Model struct {
	k, d int
	w    []float64 // K×D row-major
	b    []float64 // K
	cfg  Config
}

// Classes returns K, the number of classes.
func (m *Model) Classes() int { return m.k }

// InputDim returns D, the number of features Predict and Probabilities take.
func (m *Model) InputDim() int { return m.d }

// Config returns the configuration the model was trained with (defaults
// filled in).
func (m *Model) Config() Config { return m.cfg }

// Weights returns copies of W (K rows of D weights) and b. The
// parametrisation is centred: every column of W, and b, sums to 0 over the
// classes.
func (m *Model) Weights() (w [][]float64, b []float64) {
	w = make([][]float64, m.k)
	for c := range m.k {
		w[c] = slices.Clone(m.w[c*m.d : (c+1)*m.d])
	}
	return w, slices.Clone(m.b)
}

// Probabilities returns p(c|x) for c = 0..K−1, for a clean feature vector x
// (features in their original units; rr features need not be binned). It
// returns nil if len(x) != InputDim() or x has a non-finite entry.
func (m *Model) Probabilities(x []float64) []float64 {
	if len(x) != m.d {
		return nil
	}
	for _, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
	}
	p := make([]float64, m.k)
	for c := range m.k {
		v := m.b[c]
		for i, xi := range x {
			v += m.w[c*m.d+i] * xi
		}
		p[c] = v
	}
	lse := nn.LogSumExp(p)
	if math.IsNaN(lse) || math.IsInf(lse, 0) {
		return nil
	}
	for c := range p {
		p[c] = math.Exp(p[c] - lse)
	}
	return p
}

// Predict returns the most probable class for x (the lowest on ties), or −1
// if len(x) != InputDim() or x has a non-finite entry.
func (m *Model) Predict(x []float64) int {
	p := m.Probabilities(x)
	if p == nil {
		return -1
	}
	best := 0
	for c, v := range p {
		if v > p[best] {
			best = c
		}
	}
	return best
}

// Artifact layout (all integers little-endian):
//
//	magic      8 bytes  "LDPSQLSP"
//	version    uint32   ArtifactVersion
//	headerLen  uint32
//	header     headerLen bytes of JSON: artifactHeader
//	weights    float64 values: W (K×D, row-major) then b (K)
//	checksum   32 bytes: SHA-256 of everything above
const (
	artifactMagic  = "LDPSQLSP"
	artifactFormat = "ldpsql-spread-logreg"
	// ArtifactVersion is the version of the artifact format MarshalBinary
	// writes. Version 2 added Config.Labels (the header's config must carry
	// "labels"). UnmarshalModel also reads version 1, written before the
	// field existed by a trainer that always sampled the labels: its config
	// must not carry "labels" and loads with Labels = LabelsSampled, which is
	// how that model was trained (not the current default). The weights'
	// layout is the same in both versions.
	ArtifactVersion = 2
	// artifactV1 is the format before Config.Labels.
	artifactV1 = 1
)

type artifactHeader struct {
	Format   string `json:"format"`
	Classes  int    `json:"classes"`
	InputDim int    `json:"input_dim"`
	Config   Config `json:"config"`
}

// MarshalBinary encodes the model as a versioned artifact with a SHA-256
// checksum, for UnmarshalModel.
func (m *Model) MarshalBinary() ([]byte, error) {
	h := artifactHeader{Format: artifactFormat, Classes: m.k, InputDim: m.d, Config: m.cfg}
	b, err := artifactFrame.Begin(ArtifactVersion, h, 8*(len(m.w)+len(m.b)))
	if err != nil {
		return nil, err
	}
	b = artifact.AppendFloat64s(b, m.w)
	b = artifact.AppendFloat64s(b, m.b)
	return artifact.Seal(b), nil
}

// ErrBadArtifact is wrapped by every error UnmarshalModel returns.
var ErrBadArtifact = errors.New("spread: bad artifact")

// badArtifact returns an error wrapping ErrBadArtifact.
var badArtifact = artifactFrame.Errorf

// artifactFrame is the artifact's framing: magic, versions, checksum and
// the header's format and input_dim.
var artifactFrame = artifact.Format{Magic: artifactMagic, Name: "spread model artifact",
	Versions: []uint32{artifactV1, ArtifactVersion}, Err: ErrBadArtifact, Header: artifactFormat, MaxInputDim: MaxInputDim}

// UnmarshalModel decodes an artifact written by MarshalBinary (version 2) or
// by a build before Config.Labels (version 1, whose model's Config reports
// Labels = LabelsSampled, how it was trained). It checks the magic, the
// version, the checksum, the header (unknown fields are errors), the shapes,
// the exact length and that every weight is finite.
func UnmarshalModel(data []byte) (*Model, error) {
	var h artifactHeader
	fr, err := artifactFrame.Load(data, &h)
	if err != nil {
		return nil, err
	}
	if h.Classes < 2 || h.Classes > MaxClasses {
		return nil, badArtifact("classes %d, want 2..%d", h.Classes, MaxClasses)
	}
	switch version := fr.Version; {
	case version == artifactV1 && h.Config.Labels != "":
		return nil, badArtifact("config: labels = %q in a version %d artifact (the field is new in version %d)", h.Config.Labels, artifactV1, ArtifactVersion)
	case version == artifactV1:
		h.Config.Labels = LabelsSampled
	case h.Config.Labels == "":
		return nil, badArtifact("config: no labels in a version %d artifact", version)
	}
	if err := h.Config.validate(); err != nil {
		return nil, badArtifact("config: %v", err)
	}
	nw := int64(h.Classes) * int64(h.InputDim+1)
	if int64(len(fr.Payload)) != 8*nw {
		return nil, badArtifact("%d bytes of weights, want %d", len(fr.Payload), 8*nw)
	}
	m := &Model{k: h.Classes, d: h.InputDim, w: make([]float64, h.Classes*h.InputDim), b: make([]float64, h.Classes), cfg: h.Config}
	if r := artifact.NewReader(fr.Payload); !r.Float64s(m.w) || !r.Float64s(m.b) {
		return nil, badArtifact("non-finite weight at offset %d", r.Offset())
	}
	return m, nil
}
