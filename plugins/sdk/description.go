package sdk

import (
	"errors"
	"fmt"
	"math"

	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/plugins/proto/ldpv1"
)

// MaxDim bounds InputDim and OutputDim.
const MaxDim = 1 << 24

// SetKind says which kind of output set an encoder declares.
type SetKind int

const (
	// NoSet: no model is loaded yet, so the encoder cannot encode.
	NoSet SetKind = iota
	// L1BallSet: {z : Σ|z_i| ≤ Radius}.
	L1BallSet
	// BoxSet: {z : Lo[i] ≤ z_i ≤ Hi[i]}.
	BoxSet
)

func (k SetKind) String() string {
	switch k {
	case NoSet:
		return "none"
	case L1BallSet:
		return "l1_ball"
	case BoxSet:
		return "box"
	}
	return fmt.Sprintf("SetKind(%d)", int(k))
}

// OutputSet is the set an encoder's outputs lie in. The zero value is NoSet.
type OutputSet struct {
	Kind   SetKind
	Radius float64   // L1BallSet
	Lo, Hi []float64 // BoxSet, each of length OutputDim
}

// L1Ball returns the set {z : Σ|z_i| ≤ radius}.
func L1Ball(radius float64) OutputSet { return OutputSet{Kind: L1BallSet, Radius: radius} }

// Box returns the set {z : lo[i] ≤ z_i ≤ hi[i]}. It keeps the slices.
func Box(lo, hi []float64) OutputSet { return OutputSet{Kind: BoxSet, Lo: lo, Hi: hi} }

// RandomiserSet returns the description's output set as the host's randomisers take it
// (mechanisms.L1Ball of OutputDim coordinates, or mechanisms.Box), and false when it declares none
// (a mechanism with no fitted model).
func (d Description) RandomiserSet() (mechanisms.OutputSet, bool) {
	switch d.OutputSet.Kind {
	case L1BallSet:
		return mechanisms.L1Ball{D: d.OutputDim, Radius: d.OutputSet.Radius}, true
	case BoxSet:
		return mechanisms.Box{Lo: d.OutputSet.Lo, Hi: d.OutputSet.Hi}, true
	}
	return nil, false
}

// Describe names the set for people: "l1_ball(radius=10)", "box(784 coordinates)" or the kind.
func (s OutputSet) Describe() string {
	switch s.Kind {
	case L1BallSet:
		return fmt.Sprintf("l1_ball(radius=%g)", s.Radius)
	case BoxSet:
		return fmt.Sprintf("box(%d coordinates)", len(s.Lo))
	}
	return s.Kind.String()
}

// Contains reports whether z lies in the set (false for NoSet, for a length
// mismatch and for any NaN).
func (s OutputSet) Contains(z []float32) bool {
	switch s.Kind {
	case L1BallSet:
		n := 0.0
		for _, v := range z {
			n += math.Abs(float64(v))
		}
		return n <= s.Radius // false for NaN
	case BoxSet:
		if len(z) != len(s.Lo) || len(z) != len(s.Hi) {
			return false
		}
		for i, v := range z {
			if !(float64(v) >= s.Lo[i] && float64(v) <= s.Hi[i]) {
				return false
			}
		}
		return true
	}
	return false
}

// Validate checks the set for an encoder with outputDim outputs: a finite
// radius > 0, or finite bounds lo ≤ hi of the right length.
func (s OutputSet) Validate(outputDim int) error {
	switch s.Kind {
	case NoSet:
		return nil
	case L1BallSet:
		if !(s.Radius > 0) || math.IsInf(s.Radius, 0) {
			return fmt.Errorf("l1_ball radius %v: want a finite number > 0", s.Radius)
		}
		return nil
	case BoxSet:
		if len(s.Lo) != outputDim || len(s.Hi) != outputDim {
			return fmt.Errorf("box has %d lower and %d upper bounds, want output_dim = %d each", len(s.Lo), len(s.Hi), outputDim)
		}
		for i := range s.Lo {
			lo, hi := s.Lo[i], s.Hi[i]
			// The host's randomisers (mechanisms.Box) need lo < hi with a finite width: a set they
			// refuse would register and then fail every release.
			if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) || !(lo < hi) || math.IsInf(hi-lo, 0) {
				return fmt.Errorf("box coordinate %d: [%v, %v] is not a finite interval with lo < hi (a constant coordinate releases nothing: leave it out or widen it)", i, lo, hi)
			}
		}
		return nil
	}
	return fmt.Errorf("unknown output set kind %d", int(s.Kind))
}

// Description mirrors ldpv1.Description.
type Description struct {
	Name    string
	Version string // the encoder's own version
	// ProtocolVersion is filled in by Serve; encoders may leave it 0.
	ProtocolVersion int
	// InputDim and OutputDim may be 0 while no model is loaded.
	InputDim, OutputDim int
	OutputSet           OutputSet
	// HasDecoder and CanFit are reported only if the encoder also implements
	// Decoder and Fitter respectively.
	HasDecoder, CanFit bool
}

// Ready reports whether the encoder can encode: it declares an output set.
func (d Description) Ready() bool { return d.OutputSet.Kind != NoSet }

// Validate checks the description: a name, dimensions in range, and, when an
// output set is declared, positive dimensions and a valid set.
func (d Description) Validate() error {
	if d.Name == "" {
		return errors.New("empty name")
	}
	if d.InputDim < 0 || d.InputDim > MaxDim || d.OutputDim < 0 || d.OutputDim > MaxDim {
		return fmt.Errorf("dimensions %d -> %d out of range [0, %d]", d.InputDim, d.OutputDim, MaxDim)
	}
	if d.OutputSet.Kind != NoSet && (d.InputDim == 0 || d.OutputDim == 0) {
		return fmt.Errorf("declares an output set but its dimensions are %d -> %d", d.InputDim, d.OutputDim)
	}
	if err := d.OutputSet.Validate(d.OutputDim); err != nil {
		return fmt.Errorf("output set: %w", err)
	}
	return nil
}

// Equal reports whether two descriptions are identical.
func (d Description) Equal(e Description) bool {
	if d.Name != e.Name || d.Version != e.Version || d.ProtocolVersion != e.ProtocolVersion ||
		d.InputDim != e.InputDim || d.OutputDim != e.OutputDim || d.HasDecoder != e.HasDecoder ||
		d.CanFit != e.CanFit || d.OutputSet.Kind != e.OutputSet.Kind || d.OutputSet.Radius != e.OutputSet.Radius ||
		len(d.OutputSet.Lo) != len(e.OutputSet.Lo) || len(d.OutputSet.Hi) != len(e.OutputSet.Hi) {
		return false
	}
	for i := range d.OutputSet.Lo {
		if d.OutputSet.Lo[i] != e.OutputSet.Lo[i] || d.OutputSet.Hi[i] != e.OutputSet.Hi[i] {
			return false
		}
	}
	return true
}

// ToProto converts d to its wire form.
func (d Description) ToProto() *ldpv1.Description {
	p := &ldpv1.Description{
		Name:            d.Name,
		Version:         d.Version,
		ProtocolVersion: uint32(d.ProtocolVersion),
		InputDim:        uint32(d.InputDim),
		OutputDim:       uint32(d.OutputDim),
		HasDecoder:      d.HasDecoder,
		CanFit:          d.CanFit,
	}
	switch d.OutputSet.Kind {
	case L1BallSet:
		p.OutputSet = &ldpv1.Description_L1Ball{L1Ball: &ldpv1.L1Ball{Radius: d.OutputSet.Radius}}
	case BoxSet:
		p.OutputSet = &ldpv1.Description_Box{Box: &ldpv1.Box{Lo: d.OutputSet.Lo, Hi: d.OutputSet.Hi}}
	}
	return p
}

// DescriptionFromProto converts the wire form and validates it.
func DescriptionFromProto(p *ldpv1.Description) (Description, error) {
	if p == nil {
		return Description{}, errors.New("missing description")
	}
	d := Description{
		Name:            p.GetName(),
		Version:         p.GetVersion(),
		ProtocolVersion: int(p.GetProtocolVersion()),
		InputDim:        int(p.GetInputDim()),
		OutputDim:       int(p.GetOutputDim()),
		HasDecoder:      p.GetHasDecoder(),
		CanFit:          p.GetCanFit(),
	}
	switch s := p.GetOutputSet().(type) {
	case nil:
	case *ldpv1.Description_L1Ball:
		d.OutputSet = L1Ball(s.L1Ball.GetRadius())
	case *ldpv1.Description_Box:
		d.OutputSet = Box(s.Box.GetLo(), s.Box.GetHi())
	default:
		return Description{}, fmt.Errorf("unknown output set %T", s)
	}
	if err := d.Validate(); err != nil {
		return Description{}, err
	}
	return d, nil
}
