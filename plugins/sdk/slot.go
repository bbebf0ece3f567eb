package sdk

import (
	"errors"
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
