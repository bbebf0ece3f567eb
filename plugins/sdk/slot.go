package sdk

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// ErrNoModel is returned by ModelSlot.Get before a model is loaded.
var ErrNoModel = errors.New("no model loaded")

// ModelSlot holds the model an encoder serves after Load (see [Loader]): empty until then, replaced
// atomically, safe for concurrent use. The zero value is an empty slot.
type ModelSlot[M any] struct{ p atomic.Pointer[M] }

// Peek returns the loaded model, or nil.
func (s *ModelSlot[M]) Peek() *M { return s.p.Load() }

// Get returns the loaded model, or ErrNoModel.
func (s *ModelSlot[M]) Get() (*M, error) {
	if m := s.p.Load(); m != nil {
		return m, nil
	}
	return nil, ErrNoModel
}

// Load decodes an artifact with parse and installs the model; on error the slot is unchanged.
func (s *ModelSlot[M]) Load(artifact []byte, parse func([]byte) (*M, error)) error {
	m, err := parse(artifact)
	if err != nil {
		return err
	}
	s.p.Store(m)
	return nil
}

// Model is a loaded model a [ModelEncoder] serves. A model that also has
// Decode(latents [][]float32) ([][]float32, error) (a [ModelDecoder]) is served with a decoder.
type Model interface {
	Encode(rows [][]float32) ([][]float32, error)
}

// ModelDecoder is a Model with a decoder.
type ModelDecoder interface {
	Model
	Decode(latents [][]float32) ([][]float32, error)
}

// ModelEncoder is the Encoder, Decoder and Loader of a plugin that serves one model type M (as the
// built-in encoders do): Load decodes an artifact with Parse into its slot, Encode and Decode call the
// loaded model (ErrNoModel before Load), and Describe reports Info with the loaded model's dimensions
// and output set (Shape), or Info alone (NoSet) before Load; HasDecoder says whether M is a
// [ModelDecoder]. A plugin embeds it and adds Fit if it fits.
type ModelEncoder[M any, PM interface {
	*M
	Model
}] struct {
	Info  Description
	Parse func(artifact []byte) (*M, error)
	Shape func(m *M) (inputDim, outputDim int, set OutputSet)
	slot  ModelSlot[M]
}

// Describe implements Encoder.
func (p *ModelEncoder[M, PM]) Describe() Description {
	d := p.Info
	_, d.HasDecoder = any(PM(nil)).(ModelDecoder)
	if m := p.slot.Peek(); m != nil {
		d.InputDim, d.OutputDim, d.OutputSet = p.Shape(m)
	}
	return d
}

// Encode implements Encoder.
func (p *ModelEncoder[M, PM]) Encode(rows [][]float32) ([][]float32, error) {
	m, err := p.slot.Get()
	if err != nil {
		return nil, err
	}
	return PM(m).Encode(rows)
}

// Decode implements Decoder.
func (p *ModelEncoder[M, PM]) Decode(latents [][]float32) ([][]float32, error) {
	m, err := p.slot.Get()
	if err != nil {
		return nil, err
	}
	dec, ok := any(PM(m)).(ModelDecoder)
	if !ok {
		return nil, fmt.Errorf("%s has no decoder", p.Info.Name)
	}
	return dec.Decode(latents)
}

// Load implements Loader.
func (p *ModelEncoder[M, PM]) Load(artifact []byte) error { return p.slot.Load(artifact, p.Parse) }

// Loaded returns the loaded model, or nil.
func (p *ModelEncoder[M, PM]) Loaded() *M { return p.slot.Peek() }
