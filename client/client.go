// Package client privatises rows on the data owner's machine with a published mechanism file: no
// server, no SQL, no plugin process. A DBA exports a registered mechanism (`ldpsql mechanism export`)
// as one .ldpm file holding the encoder's model, its declared output set and what it was trained on;
// the data owner's program (or `ldpsql privatize`) loads it, encodes each row in process, and releases
// the encoding through the same randomisers the server uses (package mechanisms): clipped into the
// declared set, then noised. Only the release leaves the machine.
//
// The guarantee rests on the declared set and the randomiser alone, as on the server: whatever the
// encoder computes, its output is clipped into the set before the noise, so a corrupted or hostile
// model cannot weaken ε. The file's checksums detect corruption; Load also refuses a file whose declared
// set differs from the one its model gives.
package client

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/plugins/builtin/identity/idenc"
	"github.com/ldpsql/ldpsql/plugins/builtin/pca/pcaenc"
	"github.com/ldpsql/ldpsql/training/clm"
	"github.com/ldpsql/ldpsql/training/taskaware"
	"github.com/ldpsql/ldpsql/training/vlm"
)

// Format is the mechanism file's format tag.
const Format = "ldpsql-mechanism/1"

// Set is a declared output set: an ℓ1 ball about the origin, or a box.
type Set struct {
	Kind   string    `json:"kind"` // "l1_ball" or "box"
	Radius float64   `json:"radius,omitempty"`
	Lo     []float64 `json:"lo,omitempty"`
	Hi     []float64 `json:"hi,omitempty"`
}

// File is a published mechanism. Its JSON form is the .ldpm file.
type File struct {
	Format    string `json:"format"`
	Name      string `json:"name"`
	Plugin    string `json:"plugin"` // the built-in encoder that runs it: vlm, pca, identity, task_aware, task_aware_linear, clm
	InputDim  int    `json:"input_dim"`
	OutputDim int    `json:"output_dim"`
	Set       Set    `json:"output_set"`
	// Artifact is the encoder's model, as the plugin loads it; ArtifactSHA256 its digest.
	Artifact       []byte `json:"artifact"`
	ArtifactSHA256 string `json:"artifact_sha256"`
	// Params are the parameters it was fitted or trained with (a "cdp" key records central DP).
	Params json.RawMessage `json:"params,omitempty"`
	// TrainedOn names the training table and its row count; Public is set when a DBA declared a
	// protected training table public to export a model trained on it without CDP.
	TrainedOn  string    `json:"trained_on,omitempty"`
	Rows       int64     `json:"rows,omitempty"`
	Public     bool      `json:"public,omitempty"`
	ExportedBy string    `json:"exported_by,omitempty"`
	ExportedAt time.Time `json:"exported_at"`
	// SHA256 is the digest of the file's JSON with this field empty.
	SHA256 string `json:"sha256"`
}

// Marshal seals f (fills the digests) and returns the file's bytes.
func Marshal(f File) ([]byte, error) {
	f.Format = Format
	a := sha256.Sum256(f.Artifact)
	f.ArtifactSHA256 = hex.EncodeToString(a[:])
	f.SHA256 = ""
	raw, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	d := sha256.Sum256(raw)
	f.SHA256 = hex.EncodeToString(d[:])
	return json.MarshalIndent(f, "", "  ")
}

// encoder is a model that maps rows to latents in process.
type encoder interface {
	Encode(rows [][]float32) ([][]float32, error)
}

// Mechanism is a loaded mechanism file, ready to privatise rows.
type Mechanism struct {
	File File
	enc  encoder
	set  mechanisms.OutputSet
}

// Load checks a mechanism file (format, digests, the model, and that the model gives the declared set)
// and returns it ready to use.
func Load(data []byte) (*Mechanism, error) {
	var f File
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("mechanism file: %w", err)
	}
	if f.Format != Format {
		return nil, fmt.Errorf("mechanism file: format %q, want %q", f.Format, Format)
	}
	sum := f.SHA256
	g := f
	g.SHA256 = ""
	raw, err := json.Marshal(g)
	if err != nil {
		return nil, err
	}
	if d := sha256.Sum256(raw); hex.EncodeToString(d[:]) != sum {
		return nil, errors.New("mechanism file: its SHA-256 does not match its contents (corrupted or edited)")
	}
	if a := sha256.Sum256(f.Artifact); hex.EncodeToString(a[:]) != f.ArtifactSHA256 {
		return nil, errors.New("mechanism file: the model's SHA-256 does not match")
	}
	enc, set, err := loadModel(f.Plugin, f.Artifact)
	if err != nil {
		return nil, fmt.Errorf("mechanism file %q: %w", f.Name, err)
	}
	if !sameSet(set, f.Set) || set.Dim() != f.OutputDim {
		return nil, fmt.Errorf("mechanism file %q: it declares %+v (%d values), its model gives %+v", f.Name, f.Set, f.OutputDim, set)
	}
	if err := set.Validate(); err != nil {
		return nil, fmt.Errorf("mechanism file %q: %w", f.Name, err)
	}
	return &Mechanism{File: f, enc: enc, set: set}, nil
}

// SetOf converts a mechanisms output set to the file's form.
func SetOf(s mechanisms.OutputSet) Set {
	switch s := s.(type) {
	case mechanisms.L1Ball:
		return Set{Kind: "l1_ball", Radius: s.Radius}
	case mechanisms.Box:
		return Set{Kind: "box", Lo: s.Lo, Hi: s.Hi}
	}
	return Set{}
}

func sameSet(s mechanisms.OutputSet, f Set) bool {
	g := SetOf(s)
	if g.Kind != f.Kind || g.Radius != f.Radius || len(g.Lo) != len(f.Lo) || len(g.Hi) != len(f.Hi) {
		return false
	}
	for i := range g.Lo {
		if g.Lo[i] != f.Lo[i] || g.Hi[i] != f.Hi[i] {
			return false
		}
	}
	return true
}

// loadModel decodes a built-in encoder's artifact and returns it with the output set it declares (what
// its plugin's Describe gives).
func loadModel(plugin string, artifact []byte) (encoder, mechanisms.OutputSet, error) {
	switch plugin {
	case "vlm":
		m, err := vlm.UnmarshalModel(artifact)
		if err != nil {
			return nil, nil, err
		}
		return m, mechanisms.L1Ball{D: m.Config().D, Radius: m.Config().L}, nil
	case "pca":
		m, err := pcaenc.Load(artifact)
		if err != nil {
			return nil, nil, err
		}
		return m, mechanisms.L1Ball{D: m.D, Radius: m.L}, nil
	case "identity":
		m, err := idenc.Load(artifact)
		if err != nil {
			return nil, nil, err
		}
		lo, hi := make([]float64, len(m.Lo)), make([]float64, len(m.Hi))
		for i := range lo {
			lo[i], hi[i] = float64(m.Lo[i]), float64(m.Hi[i])
		}
		return m, mechanisms.Box{Lo: lo, Hi: hi}, nil
	case "task_aware":
		m, err := taskaware.LoadNetwork(artifact)
		if err != nil {
			return nil, nil, err
		}
		return m, mechanisms.L1Ball{D: m.Z, Radius: m.Radius}, nil
	case "task_aware_linear":
		m, err := taskaware.Load(artifact)
		if err != nil {
			return nil, nil, err
		}
		return m, mechanisms.L1Ball{D: m.Z, Radius: m.Radius}, nil
	case "clm":
		m, err := clm.Load(artifact)
		if err != nil {
			return nil, nil, err
		}
		return m, mechanisms.L1Ball{D: m.Config().D, Radius: m.Config().L}, nil
	}
	return nil, nil, fmt.Errorf("plugin %q cannot run outside the server (built-ins: vlm, pca, identity, task_aware, task_aware_linear, clm)", plugin)
}

// Encode maps rows to their (unnoised) encodings: for inspection; a release is Privatise's.
func (m *Mechanism) Encode(rows [][]float32) ([][]float32, error) {
	for i, r := range rows {
		if len(r) != m.File.InputDim {
			return nil, fmt.Errorf("row %d has %d features, mechanism %q takes %d", i+1, len(r), m.File.Name, m.File.InputDim)
		}
	}
	return m.enc.Encode(rows)
}

// Privatise releases each row at eps through the named randomiser ("laplace", "duchi", "privunit", "rrB"),
// drawing the noise from src (mechanisms.NewCryptoSource() for a real release): encode, clip into the
// declared set, noise. A row whose encoding is not finite is released from the set's centre, as the
// server does, so which rows fail tells nothing.
func (m *Mechanism) Privatise(rows [][]float32, randomiser string, eps float64, src mechanisms.Source) ([][]float64, error) {
	rnd, err := mechanisms.NewRandomiser(randomiser, m.set, eps)
	if err != nil {
		return nil, err
	}
	enc, err := m.Encode(rows)
	if err != nil {
		return nil, err
	}
	out := make([][]float64, len(enc))
	x := make([]float64, m.File.OutputDim)
	for i, z := range enc {
		if out[i], _, err = mechanisms.ReleaseEncoding(rnd, z, x, src); err != nil {
			return nil, err
		}
	}
	return out, nil
}
