package spread

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
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
	lse := logSumExp(p)
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
	hj, err := json.Marshal(artifactHeader{Format: artifactFormat, Classes: m.k, InputDim: m.d, Config: m.cfg})
	if err != nil {
		return nil, fmt.Errorf("spread: encoding the artifact header: %w", err)
	}
	var buf bytes.Buffer
	buf.Grow(len(artifactMagic) + 8 + len(hj) + 8*(len(m.w)+len(m.b)) + sha256.Size)
	buf.WriteString(artifactMagic)
	buf.Write(binary.LittleEndian.AppendUint32(nil, ArtifactVersion))
	buf.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(hj))))
	buf.Write(hj)
	var u64 [8]byte
	for _, s := range [][]float64{m.w, m.b} {
		for _, v := range s {
			binary.LittleEndian.PutUint64(u64[:], math.Float64bits(v))
			buf.Write(u64[:])
		}
	}
	sum := sha256.Sum256(buf.Bytes())
	buf.Write(sum[:])
	return buf.Bytes(), nil
}

// ErrBadArtifact is wrapped by every error UnmarshalModel returns.
var ErrBadArtifact = errors.New("spread: bad artifact")

func badArtifact(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadArtifact, fmt.Sprintf(format, args...))
}

// UnmarshalModel decodes an artifact written by MarshalBinary (version 2) or
// by a build before Config.Labels (version 1, whose model's Config reports
// Labels = LabelsSampled, how it was trained). It checks the magic, the
// version, the checksum, the header (unknown fields are errors), the shapes,
// the exact length and that every weight is finite.
func UnmarshalModel(data []byte) (*Model, error) {
	const fixed = len(artifactMagic) + 8
	if len(data) < fixed+sha256.Size {
		return nil, badArtifact("%d bytes is too short", len(data))
	}
	if string(data[:len(artifactMagic)]) != artifactMagic {
		return nil, badArtifact("not a spread model artifact (magic %q)", data[:len(artifactMagic)])
	}
	version := binary.LittleEndian.Uint32(data[len(artifactMagic):])
	if version != ArtifactVersion && version != artifactV1 {
		return nil, badArtifact("format version %d, this build reads versions %d and %d", version, artifactV1, ArtifactVersion)
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, badArtifact("checksum mismatch (corrupted or truncated)")
	}
	hl := uint64(binary.LittleEndian.Uint32(data[len(artifactMagic)+4:]))
	if hl > uint64(len(body)-fixed) {
		return nil, badArtifact("header length %d exceeds the artifact", hl)
	}
	var h artifactHeader
	dec := json.NewDecoder(bytes.NewReader(body[fixed : fixed+int(hl)]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return nil, badArtifact("header: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, badArtifact("header: trailing data")
	}
	if h.Format != artifactFormat {
		return nil, badArtifact("header format %q, want %q", h.Format, artifactFormat)
	}
	if h.Classes < 2 || h.Classes > MaxClasses {
		return nil, badArtifact("classes %d, want 2..%d", h.Classes, MaxClasses)
	}
	if h.InputDim < 1 || h.InputDim > MaxInputDim {
		return nil, badArtifact("input_dim %d, want 1..%d", h.InputDim, MaxInputDim)
	}
	switch {
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
	payload := body[fixed+int(hl):]
	if int64(len(payload)) != 8*nw {
		return nil, badArtifact("%d bytes of weights, want %d", len(payload), 8*nw)
	}
	m := &Model{k: h.Classes, d: h.InputDim, w: make([]float64, h.Classes*h.InputDim), b: make([]float64, h.Classes), cfg: h.Config}
	off := 0
	for _, s := range [][]float64{m.w, m.b} {
		for i := range s {
			v := math.Float64frombits(binary.LittleEndian.Uint64(payload[off:]))
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, badArtifact("non-finite weight at offset %d", off)
			}
			s[i] = v
			off += 8
		}
	}
	return m, nil
}
