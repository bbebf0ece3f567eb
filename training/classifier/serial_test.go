package classifier

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"
)

func TestSerialisationRoundTrip(t *testing.T) {
	data := smallMarginal(9)
	cfg := DefaultConfig()
	cfg.Epochs, cfg.Hidden = 3, []int{7, 5}
	mar, err := TrainMarginal(context.Background(), cfg, data.train, data.val, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Epochs = 2
	fwd, err := TrainForward(context.Background(), cfg, ForwardData{X: data.train.Noisy, Labels: data.train.Labels, R: data.r}, ForwardData{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*Model{mar, fwd} {
		b, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		b2, _ := m.MarshalBinary()
		if !bytes.Equal(b, b2) {
			t.Error("MarshalBinary is not deterministic")
		}
		u, err := UnmarshalModel(b)
		if err != nil {
			t.Fatal(err)
		}
		rows := append(slices.Clone(data.testX), data.train.Noisy...)
		if !slices.Equal(m.PredictBatch(rows), u.PredictBatch(rows)) {
			t.Error("predictions differ after a round trip")
		}
		for _, x := range rows[:50] {
			if !slices.Equal(m.Probabilities(x), u.Probabilities(x)) {
				t.Fatal("probabilities differ after a round trip")
			}
		}
		ms, us := m.Stats(), u.Stats()
		if ms.Objective != us.Objective || ms.BestEpoch != us.BestEpoch || ms.EpochsRun != us.EpochsRun ||
			!sameFloat(ms.ValLoss, us.ValLoss) || !sameFloat(ms.TrainLoss, us.TrainLoss) || ms.Precomputed != us.Precomputed ||
			!slices.Equal(m.Hidden(), u.Hidden()) || m.InputDim() != u.InputDim() || m.Classes() != u.Classes() {
			t.Errorf("stats or shape differ: %+v vs %+v", ms, us)
		}
		if b3, _ := u.MarshalBinary(); !bytes.Equal(b, b3) {
			t.Error("re-marshalling the decoded model changes the bytes")
		}
	}
}

func sameFloat(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }

// reseal recomputes the checksum of an edited model.
func reseal(b []byte) []byte {
	body := b[:len(b)-sha256.Size]
	sum := sha256.Sum256(body)
	return append(slices.Clone(body), sum[:]...)
}

func TestUnmarshalRejectsCorruption(t *testing.T) {
	data := smallMarginal(10)
	cfg := DefaultConfig()
	cfg.Epochs = 1
	m, err := TrainMarginal(context.Background(), cfg, data.train, data.val, nil)
	if err != nil {
		t.Fatal(err)
	}
	good, _ := m.MarshalBinary()
	mustFail := func(what string, b []byte) {
		t.Helper()
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("%s: panic %v", what, r)
			}
		}()
		if u, err := UnmarshalModel(b); err == nil || !errors.Is(err, ErrBadModel) || u != nil {
			t.Errorf("%s: got %v, %v; want an ErrBadModel error", what, u, err)
		}
	}
	for n := 0; n < len(good); n += 1 + n/8 {
		mustFail("truncated", good[:n])
	}
	for i := 0; i < len(good); i++ {
		b := slices.Clone(good)
		b[i] ^= 0x40
		mustFail("flipped byte", b)
	}
	mustFail("extra byte", append(slices.Clone(good), 0))
	mustFail("nil", nil)
	// Well-formed checksums over bad content.
	hl := int(binary.LittleEndian.Uint32(good[12:16]))
	header := string(good[16 : 16+hl])
	edit := func(old, new string) []byte {
		h := bytes.Replace([]byte(header), []byte(old), []byte(new), 1)
		b := append(slices.Clone(good[:12]), 0, 0, 0, 0)
		binary.LittleEndian.PutUint32(b[12:], uint32(len(h)))
		b = append(b, h...)
		b = append(b, good[16+hl:]...)
		return reseal(b)
	}
	if _, err := UnmarshalModel(edit("", "")); err != nil {
		t.Fatalf("the edit helper breaks a good model: %v", err)
	}
	mustFail("huge hidden layer", edit(`"sizes":[4,50,3]`, `"sizes":[4,16777216,3]`))
	mustFail("huge input", edit(`"sizes":[4,50,3]`, `"sizes":[1000000000,50,3]`))
	mustFail("one class", edit(`"sizes":[4,50,3]`, `"sizes":[4,50,1]`))
	mustFail("sizes mismatch the values", edit(`"sizes":[4,50,3]`, `"sizes":[4,51,3]`))
	mustFail("no sizes", edit(`"sizes":[4,50,3]`, `"sizes":[]`))
	mustFail("foreign format", edit(`"ldpsql-classifier"`, `"ldpsql-vlm"`))
	mustFail("bad JSON", edit(`{`, `[`))
	v := slices.Clone(good)
	binary.LittleEndian.PutUint32(v[8:], ModelVersion+1)
	mustFail("future version", reseal(v))
	nanStd := slices.Clone(good)
	binary.LittleEndian.PutUint32(nanStd[16+hl+4*4:], math.Float32bits(float32(math.NaN()))) // std[0]
	mustFail("NaN std", reseal(nanStd))
	zeroStd := slices.Clone(good)
	binary.LittleEndian.PutUint32(zeroStd[16+hl+4*4:], 0)
	mustFail("zero std", reseal(zeroStd))
	magic := slices.Clone(good)
	copy(magic, "LDPSQLVL")
	mustFail("vlm magic", reseal(magic))
}

func FuzzUnmarshalModel(f *testing.F) {
	data := smallMarginal(11)
	cfg := DefaultConfig()
	cfg.Epochs, cfg.Hidden = 1, []int{3}
	m, err := TrainMarginal(context.Background(), cfg, data.train, data.val, nil)
	if err != nil {
		f.Fatal(err)
	}
	good, _ := m.MarshalBinary()
	f.Add(good)
	f.Add(good[:40])
	f.Fuzz(func(t *testing.T, b []byte) {
		if u, err := UnmarshalModel(b); err == nil {
			u.Predict(make([]float32, u.InputDim()))
		}
		if u, err := UnmarshalModel(reseal(append(b, make([]byte, sha256.Size)...))); err == nil {
			u.Predict(make([]float32, u.InputDim()))
		}
	})
}
