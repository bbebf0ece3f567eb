package vlm

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
	// writes; UnmarshalModel reads only this version.
	ArtifactVersion = 1
	// MaxInputDim bounds the input dimension of a model.
	MaxInputDim = 1 << 24
)

type artifactHeader struct {
	Format   string   `json:"format"` // "ldpsql-vlm"
	InputDim int      `json:"input_dim"`
	Config   Config   `json:"config"`
	BTrain   float32  `json:"b_train"`
	Layers   [][2]int `json:"layers"` // (in, out) of each layer, encoder then decoder
}

const artifactFormat = "ldpsql-vlm"

// MarshalBinary encodes the model as a versioned artifact with a SHA-256
// checksum, for UnmarshalModel (and the vlm plugin's Load).
func (m *Model) MarshalBinary() ([]byte, error) {
	h := artifactHeader{Format: artifactFormat, InputDim: m.inputDim, Config: m.Config(), BTrain: m.bTrain}
	n := 0
	for _, l := range m.layers() {
		h.Layers = append(h.Layers, [2]int{l.in, l.out})
		n += len(l.w) + len(l.b)
	}
	hj, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("vlm: encoding the artifact header: %w", err)
	}
	var buf bytes.Buffer
	buf.Grow(len(artifactMagic) + 8 + len(hj) + 4*n + sha256.Size)
	buf.WriteString(artifactMagic)
	var u32 [4]byte
	binary.LittleEndian.PutUint32(u32[:], ArtifactVersion)
	buf.Write(u32[:])
	binary.LittleEndian.PutUint32(u32[:], uint32(len(hj)))
	buf.Write(u32[:])
	buf.Write(hj)
	for _, l := range m.layers() {
		for _, s := range [][]float32{l.w, l.b} {
			for _, v := range s {
				binary.LittleEndian.PutUint32(u32[:], math.Float32bits(v))
				buf.Write(u32[:])
			}
		}
	}
	sum := sha256.Sum256(buf.Bytes())
	buf.Write(sum[:])
	return buf.Bytes(), nil
}

// ErrBadArtifact is wrapped by every error UnmarshalModel returns.
var ErrBadArtifact = errors.New("vlm: bad artifact")

func badArtifact(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadArtifact, fmt.Sprintf(format, args...))
}

// UnmarshalModel decodes an artifact written by MarshalBinary. It checks the
// magic, the version, the checksum, the header (unknown fields are errors),
// the configuration, that the layer shapes match it, the exact length and
// that every weight is finite.
func UnmarshalModel(data []byte) (*Model, error) {
	const fixed = len(artifactMagic) + 8
	if len(data) < fixed+sha256.Size {
		return nil, badArtifact("%d bytes is too short", len(data))
	}
	if string(data[:len(artifactMagic)]) != artifactMagic {
		return nil, badArtifact("not a VLM artifact (magic %q)", data[:len(artifactMagic)])
	}
	if v := binary.LittleEndian.Uint32(data[len(artifactMagic):]); v != ArtifactVersion {
		return nil, badArtifact("format version %d, this build reads version %d", v, ArtifactVersion)
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, badArtifact("checksum mismatch (corrupted or truncated)")
	}
	hl := int(binary.LittleEndian.Uint32(data[len(artifactMagic)+4:]))
	if hl > len(body)-fixed {
		return nil, badArtifact("header length %d exceeds the artifact", hl)
	}
	var h artifactHeader
	dec := json.NewDecoder(bytes.NewReader(body[fixed : fixed+hl]))
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
	if h.InputDim < 1 || h.InputDim > MaxInputDim {
		return nil, badArtifact("input_dim %d, want 1..%d", h.InputDim, MaxInputDim)
	}
	cfg := h.Config
	if err := cfg.validate(); err != nil {
		return nil, badArtifact("config: %v", err)
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
	payload := body[fixed+hl:]
	if int64(len(payload)) != 4*n {
		return nil, badArtifact("%d bytes of weights, want %d", len(payload), 4*n)
	}
	m := newModel(cfg, h.InputDim)
	m.bTrain = h.BTrain
	ls := m.layers()
	off := 0
	for li, l := range ls {
		for _, s := range [][]float32{l.w, l.b} {
			for k := range s {
				v := math.Float32frombits(binary.LittleEndian.Uint32(payload[off:]))
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					return nil, badArtifact("layer %d has a non-finite weight", li)
				}
				s[k] = v
				off += 4
			}
		}
	}
	return m, nil
}
