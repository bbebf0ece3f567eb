package sdk

import (
	"errors"
	"testing"
)

func TestModelSlot(t *testing.T) {
	var s ModelSlot[int]
	if _, err := s.Get(); !errors.Is(err, ErrNoModel) || s.Peek() != nil {
		t.Fatalf("empty slot: %v", err)
	}
	bad := errors.New("bad artifact")
	if err := s.Load([]byte("x"), func([]byte) (*int, error) { return nil, bad }); err != bad || s.Peek() != nil {
		t.Fatalf("failed load changed the slot: %v", err)
	}
	seven := 7
	if err := s.Load(nil, func([]byte) (*int, error) { return &seven, nil }); err != nil {
		t.Fatal(err)
	}
	if m, err := s.Get(); err != nil || *m != 7 {
		t.Fatalf("%v %v", m, err)
	}
}
