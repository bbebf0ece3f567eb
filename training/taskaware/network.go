package taskaware

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/ldpsql/ldpsql/training/dp"
	"github.com/ldpsql/ldpsql/training/nn"
	"github.com/ldpsql/ldpsql/training/nn/graph"
)

// NetworkFormat is the artifact format tag of a trained (Algorithm 1) encoder.
const NetworkFormat = "ldpsql-task-aware/1"

// Layer is a dense layer (graph.Layer, shared with the other models trained through a graph).
type Layer = graph.Layer

// Network is a trained task-aware encoder and its decoder (Algorithm 1, or one of the paper's baselines),
// with the task model f it was trained through. Its JSON form is the artifact.
//
// Encode: x is clipped into the box [Lo, Hi] (the auxiliary rows' range, recorded at training time and
// public like the weights) and scaled to u ∈ [0, 1]^n (a feature with Lo = Hi is 0), then φ = Enc(u) −
// Centre. Every layer of Enc is affine but the mlp encoder's sigmoid hidden layer, whose values lie in
// [0, 1]^H whatever the input; so φ + Centre lies in the image of a box under the last (affine) layer,
// a zonotope centrally symmetric about Centre, and φ lies in the ℓ1 ball of radius Radius = Δ1/2, Δ1
// that image's ℓ1 diameter ([BoxL1Diameter]: the vertex formula, spec II.6 pitfall 1 (a) and (b)).
// The host's Laplace randomiser on that ball adds scale 2·Radius/ε = Δ1/ε, the paper's b: the
// guarantee depends on the weights and the public box only, never on the rows released.
//
// Decode: x̂ = Lo + Dec(φ + w + Centre)∘(Hi − Lo), the decoder trained for the noise at Eps.
type Network struct {
	Format   string  `json:"format"`
	InputDim int     `json:"input_dim"`
	Z        int     `json:"z"`
	Task     string  `json:"task"`
	Encoder  string  `json:"encoder"`
	Design   string  `json:"design"`
	Eps      float64 `json:"eps"` // the ε the decoder is trained for
	N        int     `json:"n"`   // auxiliary rows trained on

	Lo []float64 `json:"lo"`
	Hi []float64 `json:"hi"`
	// Enc is empty for the task-agnostic design (φ = u − Centre).
	Enc []Layer `json:"enc"`
	Dec []Layer `json:"dec"`
	// Centre is the encoder's value at the box's centre; Radius = Delta1/2 the declared ℓ1 radius.
	Centre []float64 `json:"centre"`
	Radius float64   `json:"radius"`
	Delta1 float64   `json:"delta1"`

	// F is the task model (frozen while the encoder trained); Classes its outputs for classification;
	// LabelLo/LabelHi the regression label's scaling to [0, 1].
	F       []Layer `json:"f"`
	Classes int     `json:"classes,omitempty"`
	LabelLo float64 `json:"label_lo,omitempty"`
	LabelHi float64 `json:"label_hi,omitempty"`

	// TaskLoss is f's loss on the clean auxiliary rows; TrainLoss the mean task loss of the last epoch
	// through encoder, noise and decoder.
	TaskLoss  float64 `json:"task_loss"`
	TrainLoss float64 `json:"train_loss"`
	Epochs    int     `json:"epochs"`
	// ExtremeVertices, for a linear encoder, are two opposite vertices of the input box whose
	// encodings are Δ1 apart ([Network.Extremes]), for an auditor's --inputs.
	ExtremeVertices [][]float64 `json:"extreme_vertices,omitempty"`
	// CDP is what a CDP training run met (σ, sampling rate, steps, spent ε), nil without CDP.
	CDP *dp.Target `json:"cdp,omitempty"`
}

// LoadNetwork decodes and checks an artifact.
func LoadNetwork(artifact []byte) (*Network, error) {
	var m Network
	if err := json.Unmarshal(artifact, &m); err != nil {
		return nil, fmt.Errorf("task_aware artifact: %w", err)
	}
	if m.Format != NetworkFormat {
		return nil, fmt.Errorf("task_aware artifact: format %q, want %q", m.Format, NetworkFormat)
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("task_aware artifact: %w", err)
	}
	return &m, nil
}

// Artifact returns the JSON artifact.
func (m *Network) Artifact() ([]byte, error) { return json.Marshal(m) }

// check verifies the shapes and recomputes Δ1 from the weights: a stored radius smaller than the
// weights' real one would under-noise, so it is never trusted.
func (m *Network) check() error {
	n := m.InputDim
	if n < 1 || len(m.Lo) != n || len(m.Hi) != n || len(m.Centre) != m.Z || m.Z < 1 {
		return fmt.Errorf("input dimension %d, box %d/%d, latent %d, centre %d", n, len(m.Lo), len(m.Hi), m.Z, len(m.Centre))
	}
	for j := range n {
		if !(m.Lo[j] <= m.Hi[j]) || math.IsInf(m.Lo[j], 0) || math.IsInf(m.Hi[j], 0) {
			return fmt.Errorf("input box [%v, %v] at feature %d", m.Lo[j], m.Hi[j], j+1)
		}
	}
	in := n
	for i := range m.Enc {
		if err := m.Enc[i].Check(in); err != nil {
			return fmt.Errorf("encoder: %w", err)
		}
		in = m.Enc[i].Out
	}
	if in != m.Z {
		return fmt.Errorf("the encoder gives %d values, latent %d", in, m.Z)
	}
	in = m.Z
	for i := range m.Dec {
		if err := m.Dec[i].Check(in); err != nil {
			return fmt.Errorf("decoder: %w", err)
		}
		in = m.Dec[i].Out
	}
	if in != n {
		return fmt.Errorf("the decoder gives %d values, want %d", in, n)
	}
	d1, centre, err := m.sensitivity()
	if err != nil {
		return err
	}
	if !(m.Radius >= d1/2*(1-1e-9)) {
		return fmt.Errorf("declared radius %v is below the weights' Δ1/2 = %v", m.Radius, d1/2)
	}
	for k := range centre {
		if math.Abs(centre[k]-m.Centre[k]) > 1e-6*(1+math.Abs(centre[k])) {
			return fmt.Errorf("centre %d is %v, the weights give %v", k, m.Centre[k], centre[k])
		}
	}
	return nil
}

// widths are the scaled box's widths: 1, or 0 for a constant feature.
func (m *Network) widths() []float64 {
	w := make([]float64, m.InputDim)
	for j := range w {
		if m.Hi[j] > m.Lo[j] {
			w[j] = 1
		}
	}
	return w
}

// sensitivity returns Δ1 and the centre of the latent set: for the task-agnostic design the box itself;
// else the image under the last encoder layer of its input box ([0,1]^H after a sigmoid layer, the
// scaled input box for a linear encoder).
func (m *Network) sensitivity() (float64, []float64, error) {
	if len(m.Enc) == 0 {
		w := m.widths()
		c, d1 := make([]float64, len(w)), 0.0
		for j, v := range w {
			c[j], d1 = v/2, d1+v
		}
		return d1, c, nil
	}
	last := &m.Enc[len(m.Enc)-1]
	width := m.widths()
	if len(m.Enc) > 1 {
		width = make([]float64, last.In)
		for i := range width {
			width[i] = 1
		}
	}
	a := make([][]float64, last.Out) // Aᵀ: rows are latent coordinates
	for o := range a {
		a[o] = make([]float64, last.In)
		for i := range last.In {
			a[o][i] = float64(last.W[i*last.Out+o])
		}
	}
	d1, _, err := BoxL1Diameter(a, width)
	if err != nil {
		return 0, nil, err
	}
	mid := make([]float64, last.In)
	for i := range mid {
		mid[i] = width[i] / 2
	}
	// The centre is the last layer's value at the middle of its input box.
	c := (&Layer{In: last.In, Out: last.Out, W: last.W, B: last.B, Act: graph.Identity}).Forward(mid)
	return d1, c, nil
}

// scale maps a raw row into the unit box.
func (m *Network) scale(x []float32) []float64 {
	u := make([]float64, m.InputDim)
	for j, v := range x {
		if w := m.Hi[j] - m.Lo[j]; w > 0 {
			u[j] = min(1, max(0, (float64(v)-m.Lo[j])/w))
		}
	}
	return u
}

// Encode maps rows to their centred latents (deterministic).
func (m *Network) Encode(rows [][]float32) ([][]float32, error) {
	out := make([][]float32, len(rows))
	for r, x := range rows {
		if len(x) != m.InputDim {
			return nil, fmt.Errorf("row %d has %d features, the encoder takes %d", r+1, len(x), m.InputDim)
		}
		phi := m.latent(m.scale(x))
		o := make([]float32, m.Z)
		for k := range o {
			o[k] = float32(phi[k] - m.Centre[k])
		}
		clipL1f(o, m.Radius)
		out[r] = o
	}
	return out, nil
}

// latent is Enc(u) (u itself for the task-agnostic design).
func (m *Network) latent(u []float64) []float64 {
	if len(m.Enc) == 0 {
		return u
	}
	return graph.RunStack(m.Enc, u)
}

// Decode maps noisy centred latents back to feature space.
func (m *Network) Decode(latents [][]float32) ([][]float32, error) {
	out := make([][]float32, len(latents))
	for r, z := range latents {
		if len(z) != m.Z {
			return nil, fmt.Errorf("latent %d has %d values, the decoder takes %d", r+1, len(z), m.Z)
		}
		out[r] = m.decodeRow(z)
	}
	return out, nil
}

func (m *Network) decodeRow(z []float32) []float32 {
	u := m.decodeScaled(z)
	x := make([]float32, m.InputDim)
	for j := range x {
		x[j] = float32(m.Lo[j] + u[j]*(m.Hi[j]-m.Lo[j]))
	}
	return x
}

// decodeScaled is the decoder's output in the unit box's coordinates (not clipped to it), what f reads.
func (m *Network) decodeScaled(z []float32) []float64 {
	in := make([]float64, m.Z)
	for k := range in {
		in[k] = float64(z[k]) + m.Centre[k]
	}
	return graph.RunStack(m.Dec, in)
}

// Evaluation is a network's task performance on labelled rows released at some ε.
type Evaluation struct {
	Loss     float64 // mean task loss (cross-entropy, or squared error on the scaled label)
	Accuracy float64 // classification: share of rows whose f(x̂) has the label's class; NaN for regression
}

// Evaluate releases every row draws times at eps (encode, Laplace noise of scale Δ1/eps, decode) and
// scores f(x̂) against the labels: the paper's task loss, averaged over noise draws (spec II.6 pitfall
// 10) instead of its single draw. eps = +Inf evaluates without noise.
func (m *Network) Evaluate(rows [][]float32, labels []float64, eps float64, draws int, seed uint64) (Evaluation, error) {
	if len(rows) != len(labels) || len(rows) == 0 || draws < 1 {
		return Evaluation{}, fmt.Errorf("evaluate: %d rows, %d labels, %d draws", len(rows), len(labels), draws)
	}
	enc, err := m.Encode(rows)
	if err != nil {
		return Evaluation{}, err
	}
	r := rand.New(rand.NewPCG(seed, 0x7461736b2d657661)) // "task-eva"
	b := m.Delta1 / eps
	var loss, correct float64
	z := make([]float32, m.Z)
	for range draws {
		for i, e := range enc {
			for k := range z {
				z[k] = e[k] + float32(b*nn.StdLaplace(r))
			}
			l, ok := m.taskLoss(m.decodeScaled(z), labels[i])
			loss += l
			if ok {
				correct++
			}
		}
	}
	tot := float64(draws * len(rows))
	ev := Evaluation{Loss: loss / tot, Accuracy: correct / tot}
	if m.Task == TaskRegression {
		ev.Accuracy = math.NaN()
	}
	return ev, nil
}

// taskLoss is f's loss on one decoded row (scaled coordinates), and whether its predicted class is the
// label's.
func (m *Network) taskLoss(u []float64, label float64) (float64, bool) {
	out := graph.RunStack(m.F, u)
	if m.Task == TaskRegression {
		t := (label - m.LabelLo) / max(m.LabelHi-m.LabelLo, 1e-300)
		return (out[0] - t) * (out[0] - t), false
	}
	mx, arg := math.Inf(-1), 0
	for k, v := range out {
		if v > mx {
			mx, arg = v, k
		}
	}
	s := 0.0
	for _, v := range out {
		s += math.Exp(v - mx)
	}
	y := int(label)
	return mx + math.Log(s) - out[y], arg == y
}

// clipL1f scales v into the ℓ1 ball of radius l if it lies outside: rounding only, for a latent the
// geometry already puts inside (the host re-clips every output to the declared ball regardless).
func clipL1f(v []float32, l float64) {
	s := 0.0
	for _, x := range v {
		s += math.Abs(float64(x))
	}
	if s <= l || s == 0 {
		return
	}
	f := float32(l / s)
	for i := range v {
		v[i] *= f
	}
}

// Extremes returns, for a linear encoder, two opposite vertices of the input box whose encodings are
// Δ1 apart in ℓ1 (the pair an auditor should try); nil for the mlp encoder, whose bound over the
// sigmoid layer's box no input need attain, and for the task-agnostic design.
func (m *Network) Extremes() (x, y []float64) {
	if len(m.Enc) != 1 {
		return nil, nil
	}
	l := &m.Enc[0]
	a := make([][]float64, l.Out)
	for o := range a {
		a[o] = make([]float64, l.In)
		for i := range l.In {
			a[o][i] = float64(l.W[i*l.Out+o])
		}
	}
	_, s, err := BoxL1Diameter(a, m.widths())
	if err != nil {
		return nil, nil
	}
	x, y = make([]float64, m.InputDim), make([]float64, m.InputDim)
	for j, sj := range s {
		x[j], y[j] = m.Lo[j], m.Hi[j]
		if sj > 0 {
			x[j], y[j] = m.Hi[j], m.Lo[j]
		}
	}
	return x, y
}
