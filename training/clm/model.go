package clm

import (
	"errors"
	"fmt"
	"math"

	"github.com/ldpsql/ldpsql/training/internal/artifact"
	"github.com/ldpsql/ldpsql/training/nn"
	"github.com/ldpsql/ldpsql/training/nn/graph"
)

// ErrArtifact is wrapped by every artifact error.
var ErrArtifact = errors.New("clm artifact")

var format = artifact.Format{Magic: "LDPCLM", Name: "CLM artifact", Versions: []uint32{1}, Err: ErrArtifact,
	Header: "ldpsql-clm/1", MaxInputDim: 1 << 24}

// Model is a trained CLM encoder: x ↦ ν₁(h((x − Mean)/Std)), D values in the ℓ1 ball of radius L. The
// projection head is not kept: it served training only.
type Model struct {
	cfg      Config // resolved
	inputDim int
	std      nn.Standardiser
	enc      []graph.Layer
	// TrainLoss is the last epoch's mean NT-Xent loss; Epochs the epochs trained.
	TrainLoss float64
	Epochs    int
	N         int // rows trained on
}

// Config returns the resolved configuration the model was trained with.
func (m *Model) Config() Config { return m.cfg }

// InputDim is the number of features a row must have.
func (m *Model) InputDim() int { return m.inputDim }

// Encode returns ν₁(h(x)) for each row (deterministic): D values with Σ|z| ≤ L. Rows must have InputDim
// finite values; anything else is an error naming the row and feature.
func (m *Model) Encode(rows [][]float32) ([][]float32, error) {
	n := m.inputDim
	x := make([]float32, len(rows)*n)
	if err := checkRows(rows, n, "the encoder takes"); err != nil {
		return nil, err
	}
	for r, row := range rows {
		copy(x[r*n:], row)
	}
	m.std.Apply(x)
	d := m.cfg.D
	h := graph.ForwardBatch(m.enc, x, len(rows))
	out := make([][]float32, len(rows))
	h64 := make([]float64, d)
	for r := range out {
		out[r] = make([]float32, d)
		finite := true
		for k, v := range h[r*d : (r+1)*d] {
			h64[k] = float64(v)
			finite = finite && !math.IsNaN(h64[k]) && !math.IsInf(h64[k], 0)
		}
		if !finite { // float32 overflow: redo the row in float64
			row := make([]float64, n)
			for j, v := range x[r*n : (r+1)*n] {
				row[j] = float64(v)
			}
			h64 = graph.RunStack(m.enc, row)
			for _, v := range h64 {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return nil, fmt.Errorf("clm: row %d overflows the encoder", r+1)
				}
			}
		}
		nn.ClipL1To32(h64, m.cfg.L, out[r])
	}
	return out, nil
}

// checkRows reports the first row that does not have n finite features (want says whose n it is).
func checkRows(rows [][]float32, n int, want string) error {
	for r, row := range rows {
		if len(row) != n {
			return fmt.Errorf("clm: row %d has %d features, %s %d", r+1, len(row), want, n)
		}
		for j, v := range row {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("clm: row %d, feature %d is %v", r+1, j+1, v)
			}
		}
	}
	return nil
}

// header is the artifact's JSON header; the payload holds Std's mean and deviation, then each layer's
// weights and biases.
type header struct {
	Format    string             `json:"format"`
	InputDim  int                `json:"input_dim"`
	Config    Config             `json:"config"`
	Layers    [][2]int           `json:"layers"` // in, out of each encoder layer
	Acts      []graph.Activation `json:"acts"`
	TrainLoss float64            `json:"train_loss"`
	Epochs    int                `json:"epochs"`
	N         int                `json:"n"`
}

// MarshalBinary returns the artifact.
func (m *Model) MarshalBinary() ([]byte, error) {
	h := header{Format: format.Header, InputDim: m.inputDim, Config: m.cfg, TrainLoss: m.TrainLoss, Epochs: m.Epochs, N: m.N}
	size := 2 * m.inputDim
	for _, l := range m.enc {
		h.Layers = append(h.Layers, [2]int{l.In, l.Out})
		h.Acts = append(h.Acts, l.Act)
		size += len(l.W) + len(l.B)
	}
	b, err := format.Begin(1, h, 4*size)
	if err != nil {
		return nil, err
	}
	b = artifact.AppendFloat32s(b, m.std.Mean)
	b = artifact.AppendFloat32s(b, m.std.Std)
	for _, l := range m.enc {
		b = artifact.AppendFloat32s(b, l.W)
		b = artifact.AppendFloat32s(b, l.B)
	}
	return artifact.Seal(b), nil
}

// Load decodes and checks an artifact: its checksum, its configuration, the layers' shapes (chaining
// from the input to D values), finite weights and positive deviations.
func Load(data []byte) (*Model, error) {
	var h header
	fr, err := format.Load(data, &h)
	if err != nil {
		return nil, err
	}
	if err := h.Config.validate(); err != nil {
		return nil, format.Errorf("config: %v", err)
	}
	if len(h.Layers) == 0 || len(h.Layers) != len(h.Acts) || len(h.Layers) > MaxLayers+1 {
		return nil, format.Errorf("%d layers with %d activations", len(h.Layers), len(h.Acts))
	}
	m := &Model{cfg: h.Config, inputDim: h.InputDim, TrainLoss: h.TrainLoss, Epochs: h.Epochs, N: h.N}
	rd := artifact.NewReader(fr.Payload)
	m.std = nn.Standardiser{Mean: make([]float32, h.InputDim), Std: make([]float32, h.InputDim)}
	if !rd.Float32s(m.std.Mean) || !rd.Float32s(m.std.Std) {
		return nil, format.Errorf("standardiser: payload ends or holds a non-finite value at byte %d", rd.Offset())
	}
	for j, s := range m.std.Std {
		if !(s > 0) {
			return nil, format.Errorf("standardiser: deviation %d is %v", j+1, s)
		}
	}
	for i, io := range h.Layers {
		if io[0] < 1 || io[1] < 1 || io[0] > 1<<24 || io[1] > MaxHidden+MaxD || int64(io[0])*int64(io[1]) > 1<<28 {
			return nil, format.Errorf("layer %d is %d→%d", i+1, io[0], io[1])
		}
		l := graph.NewLayer(io[0], io[1], h.Acts[i])
		if !rd.Float32s(l.W) || !rd.Float32s(l.B) {
			return nil, format.Errorf("layer %d: payload ends or holds a non-finite weight at byte %d", i+1, rd.Offset())
		}
		m.enc = append(m.enc, l)
	}
	if rd.Offset() != len(fr.Payload) {
		return nil, format.Errorf("%d bytes after the last layer", len(fr.Payload)-rd.Offset())
	}
	out, err := graph.CheckStack(m.enc, h.InputDim)
	if err != nil {
		return nil, format.Errorf("encoder: %v", err)
	}
	if out != h.Config.D {
		return nil, format.Errorf("the encoder gives %d values, d is %d", out, h.Config.D)
	}
	return m, nil
}
