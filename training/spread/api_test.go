package spread

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/ldpsql/ldpsql/training/nn"
)

func TestSamplesOneRejected(t *testing.T) {
	d := mixedData(50)
	_, err := Train(context.Background(), Config{Samples: 1}, d, nil)
	if err == nil || !strings.Contains(err.Error(), "samples = 1") || !strings.Contains(err.Error(), "every weight is 1") {
		t.Fatalf("Train with S = 1: %v, want an error explaining why S = 1 is refused", err)
	}
	if _, err := ParseConfig(json.RawMessage(`{"samples": 1}`)); err == nil || !strings.Contains(err.Error(), "samples ≥ 2") {
		t.Fatalf("ParseConfig samples 1: %v", err)
	}
	if err := (Config{Samples: 1}).Validate(); err == nil {
		t.Fatal("Validate accepted S = 1")
	}
}

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig(nil)
	if err != nil || c != DefaultConfig() {
		t.Fatalf("empty: %+v %v", c, err)
	}
	if c, err = ParseConfig(json.RawMessage(" null ")); err != nil || c != DefaultConfig() {
		t.Fatalf("null: %+v %v", c, err)
	}
	if c.Labels != LabelsExact || (Config{}).withDefaults().Labels != LabelsExact {
		t.Fatalf("default labels %q, want %q", c.Labels, LabelsExact)
	}
	c, err = ParseConfig(json.RawMessage(`{"samples": 16, "iterations": 50, "lr": 0.1, "bins": 64, "seed": 18446744073709551615, "steps_per_iteration": 3, "labels": "sampled"}`))
	want := Config{Samples: 16, Iterations: 50, LR: 0.1, Bins: 64, Seed: math.MaxUint64, StepsPerIteration: 3, Labels: LabelsSampled}
	if err != nil || c != want {
		t.Fatalf("full: %+v %v, want %+v", c, err, want)
	}
	c, err = ParseConfig(json.RawMessage(`{"iterations": 5}`))
	if err != nil || c.Iterations != 5 || c.Samples != 8 || c.LR != 0.05 || c.Bins != 32 || c.StepsPerIteration != 1 || c.Labels != LabelsExact {
		t.Fatalf("partial: %+v %v", c, err)
	}
	if c, err = ParseConfig(json.RawMessage(`{"labels": "exact"}`)); err != nil || c != DefaultConfig() {
		t.Fatalf("labels exact: %+v %v", c, err)
	}
	if err := (Config{Labels: "Exact"}).Validate(); err == nil || !strings.Contains(err.Error(), `labels = "Exact"`) {
		t.Fatalf("Validate labels Exact: %v", err)
	}
	for raw, frag := range map[string]string{
		`{"sample": 8}`:                 "unknown key \"sample\"",
		`{"samples": 8, "momentum": 1}`: "unknown key \"momentum\"",
		`{"samples": 0}`:                "samples = 0",
		`{"samples": -3}`:               "samples = -3",
		`{"samples": 5000}`:             "samples = 5000",
		`{"samples": 2.5}`:              "samples",
		`{"iterations": 0}`:             "iterations = 0",
		`{"lr": 0}`:                     "lr = 0",
		`{"lr": -1}`:                    "lr = -1",
		`{"lr": 11}`:                    "lr = 11",
		`{"lr": "x"}`:                   "lr",
		`{"bins": 1}`:                   "bins = 1",
		`{"seed": -1}`:                  "seed",
		`{"steps_per_iteration": 0}`:    "steps_per_iteration = 0",
		`{"steps_per_iteration": 2000}`: "steps_per_iteration = 2000",
		`{"labels": ""}`:                `labels = ""`,
		`{"labels": "marginal"}`:        `labels = "marginal": want "exact"`,
		`{"labels": 1}`:                 `labels: got JSON number, want a string, "exact" or "sampled"`,
		`{"label": "exact"}`:            "unknown key \"label\"",
		`{"samples": 8} {}`:             "trailing data",
		`[1]`:                           "want a JSON object",
		`{"samples": 8`:                 "truncated",
	} {
		if _, err := ParseConfig(json.RawMessage(raw)); err == nil || !strings.Contains(err.Error(), frag) {
			t.Errorf("ParseConfig(%s) = %v, want an error containing %q", raw, err, frag)
		}
	}
}

func TestBadData(t *testing.T) {
	good := func() Data {
		return Data{
			X:        [][]float64{{0.5, 1, 2}, {0.2, -1, 9}},
			Labels:   []int{0, 1},
			Channels: []Channel{{Kind: KindRR, Lo: 0, Hi: 1, Bins: 4, FlipProb: 0.2}, {Kind: KindLaplace, Lo: -2, Hi: 2, Scale: 1}, {Kind: KindClean}},
			R:        krr(2, 0.2),
		}
	}
	cfg := Config{Iterations: 2}
	if _, err := Train(context.Background(), cfg, good(), nil); err != nil {
		t.Fatalf("good data: %v", err)
	}
	for _, tc := range []struct {
		name, frag string
		mod        func(*Data)
	}{
		{"no R", "R has 0 rows", func(d *Data) { d.R = nil }},
		{"ragged R", "R[1] has 1 entries", func(d *Data) { d.R[1] = d.R[1][:1] }},
		{"R not a probability", "R[0][1] = -0.1", func(d *Data) { d.R[0][1] = -0.1 }},
		{"R column sum", "column 0 of R sums to", func(d *Data) { d.R[0][0] = 0.7 }},
		{"R singular", "R is singular", func(d *Data) { d.R = krr(2, 0.5) }},
		{"no channels", "0 channels", func(d *Data) { d.Channels = nil }},
		{"no rows", "X has no rows", func(d *Data) { d.X, d.Labels = nil, nil }},
		{"label count", "1 labels for 2 rows", func(d *Data) { d.Labels = d.Labels[:1] }},
		{"ragged X", "X[1] has 2 features", func(d *Data) { d.X[1] = d.X[1][:2] }},
		{"NaN", "X[0][2] = NaN", func(d *Data) { d.X[0][2] = math.NaN() }},
		{"Inf", "X[1][1] = +Inf", func(d *Data) { d.X[1][1] = math.Inf(1) }},
		{"label range", "Labels[1] = 2", func(d *Data) { d.Labels[1] = 2 }},
		{"negative label", "Labels[0] = -1", func(d *Data) { d.Labels[0] = -1 }},
		{"rr out of range", "X[1][0] = 1.5 is outside the rr channel's range", func(d *Data) { d.X[1][0] = 1.5 }},
		{"unknown kind", `Channels[2]: channel Kind "gaussian"`, func(d *Data) { d.Channels[2].Kind = "gaussian" }},
		{"empty kind", "Channels[2]: channel Kind is empty", func(d *Data) { d.Channels[2].Kind = "" }},
		{"rr bins", "Channels[0]: rr channel Bins = 1", func(d *Data) { d.Channels[0].Bins = 1 }},
		{"rr flip", "rr channel FlipProb = 1.2", func(d *Data) { d.Channels[0].FlipProb = 1.2 }},
		{"rr uninformative", "carries no information", func(d *Data) { d.Channels[0].FlipProb = 0.75 }},
		{"rr range", "rr channel range [1, 0]", func(d *Data) { d.Channels[0].Lo, d.Channels[0].Hi = 1, 0 }},
		{"laplace scale", "Channels[1]: laplace channel Scale = 0", func(d *Data) { d.Channels[1].Scale = 0 }},
		{"laplace range", "laplace channel range [0, +Inf]", func(d *Data) { d.Channels[1].Lo, d.Channels[1].Hi = 0, math.Inf(1) }},
		{"laplace bins", "laplace channel Bins = 1", func(d *Data) { d.Channels[1].Bins = 1 }},
	} {
		d := good()
		tc.mod(&d)
		_, err := Train(context.Background(), cfg, d, nil)
		if err == nil || !strings.Contains(err.Error(), tc.frag) || !strings.HasPrefix(err.Error(), "spread data: ") {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.frag)
		}
	}
	if _, err := Train(context.Background(), Config{Bins: 1}, good(), nil); err == nil || !strings.Contains(err.Error(), "bins = 1") {
		t.Errorf("config bins 1: %v", err)
	}
}

func TestModelRoundTripAndCorruption(t *testing.T) {
	m, err := Train(context.Background(), Config{Iterations: 20, Seed: 3}, mixedData(300), nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Classes() != 3 || m.InputDim() != 3 {
		t.Fatalf("Classes %d, InputDim %d", m.Classes(), m.InputDim())
	}
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	m2, err := UnmarshalModel(b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.w, m2.w) || !slices.Equal(m.b, m2.b) || m.Config() != m2.Config() || m2.Classes() != 3 || m2.InputDim() != 3 {
		t.Fatal("round trip changed the model")
	}
	for _, x := range [][]float64{{0, 4, 1}, {-2, 8, -1}, {1.3, 0, 0}} {
		p, p2 := m.Probabilities(x), m2.Probabilities(x)
		if !slices.Equal(p, p2) || m.Predict(x) != m2.Predict(x) {
			t.Fatalf("predictions differ after the round trip at %v", x)
		}
		s := 0.0
		for _, v := range p {
			s += v
		}
		if math.Abs(s-1) > 1e-12 || m.Predict(x) != slices.Index(p, slices.Max(p)) {
			t.Fatalf("probabilities %v / prediction %d inconsistent", p, m.Predict(x))
		}
	}
	if m.Probabilities([]float64{1, 2}) != nil || m.Predict([]float64{1, 2, 3, 4}) != -1 || m.Predict([]float64{math.NaN(), 0, 0}) != -1 {
		t.Fatal("bad inputs must give nil / −1")
	}
	w, bias := m.Weights()
	for i := range 3 {
		if s := w[0][i] + w[1][i] + w[2][i]; math.Abs(s) > 1e-9 {
			t.Fatalf("W column %d sums to %v, want centred", i, s)
		}
	}
	w[0][0], bias[0] = 1e9, 1e9 // copies: the model is unchanged
	if m.w[0] == 1e9 || m.b[0] == 1e9 {
		t.Fatal("Weights returned the model's own slices")
	}

	bad := func(name string, data []byte, frag string) {
		t.Helper()
		_, err := UnmarshalModel(data)
		if !errors.Is(err, ErrBadArtifact) || !strings.Contains(err.Error(), frag) {
			t.Errorf("%s: %v, want ErrBadArtifact with %q", name, err, frag)
		}
	}
	flip := func(i int) []byte { c := bytes.Clone(b); c[i] ^= 1; return c }
	bad("empty", nil, "too short")
	bad("truncated", b[:len(b)-1], "checksum")
	bad("magic", flip(0), "magic")
	bad("version", flip(8), "format version")
	bad("payload bit", flip(len(b)-40), "checksum")
	bad("header bit", flip(20), "checksum")
	bad("appended", append(bytes.Clone(b), 0), "checksum")

	// Well-formed checksums around bad contents.
	reseal := func(body []byte) []byte {
		sum := sha256Sum(body)
		return append(body, sum[:]...)
	}
	body := bytes.Clone(b[:len(b)-32])
	hl := int(body[12]) | int(body[13])<<8
	header := string(body[16 : 16+hl])
	rehead := func(h string) []byte {
		out := append([]byte(nil), body[:12]...)
		out = append(out, byte(len(h)), byte(len(h)>>8), 0, 0)
		out = append(out, h...)
		return reseal(append(out, body[16+hl:]...))
	}
	bad("classes", rehead(strings.Replace(header, `"classes":3`, `"classes":4`, 1)), "bytes of weights")
	bad("one class", rehead(strings.Replace(header, `"classes":3`, `"classes":1`, 1)), "classes 1")
	bad("unknown header field", rehead(strings.Replace(header, `{`, `{"extra":1,`, 1)), "unknown field")
	bad("format", rehead(strings.Replace(header, "ldpsql-spread-logreg", "ldpsql-vlm", 1)), "header format")
	bad("config", rehead(strings.Replace(header, `"samples":8`, `"samples":1`, 1)), "config")
	bad("bad labels", rehead(strings.Replace(header, `"labels":"exact"`, `"labels":"both"`, 1)), `labels = "both"`)
	bad("no labels in v2", rehead(strings.Replace(header, `,"labels":"exact"`, "", 1)), "no labels in a version 2 artifact")

	// Version 1 (before Config.Labels): the header's config has no
	// "labels" and the model loads as trained with sampled labels.
	v1 := func(h string) []byte {
		a := rehead(h)
		a = a[:len(a)-32]
		a[8] = 1
		return reseal(a)
	}
	if !strings.Contains(header, `,"labels":"exact"}`) {
		t.Fatalf("header %s does not end its config with the labels", header)
	}
	m1, err := UnmarshalModel(v1(strings.Replace(header, `,"labels":"exact"`, "", 1)))
	if err != nil {
		t.Fatalf("version 1 artifact: %v", err)
	}
	if want := func() Config { c := m.Config(); c.Labels = LabelsSampled; return c }(); m1.Config() != want ||
		!slices.Equal(m1.w, m.w) || !slices.Equal(m1.b, m.b) {
		t.Fatalf("version 1 artifact loaded as config %+v, want %+v and the same weights", m1.Config(), want)
	}
	bad("labels in v1", v1(header), `labels = "exact" in a version 1 artifact`)
	bad("version 3", func() []byte { a := bytes.Clone(body); a[8] = 3; return reseal(a) }(), "format version 3, this build reads versions 1 and 2")
	nan := bytes.Clone(body)
	copy(nan[len(nan)-8:], []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x7f})
	bad("NaN weight", reseal(nan), "non-finite")
	bad("short payload", reseal(bytes.Clone(body[:len(body)-8])), "bytes of weights")
}

// A seed gives bit-identical models whatever GOMAXPROCS is (chunks are
// reduced in order); another seed gives another model. Both label modes.
func TestReproducible(t *testing.T) {
	d := mixedData(700) // 10 chunks
	for _, labels := range []string{LabelsSampled, LabelsExact} {
		cfg := Config{Iterations: 15, Seed: 42, StepsPerIteration: 2, Labels: labels}
		train := func(c Config, procs int) []byte {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			m, err := Train(context.Background(), c, d, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := m.MarshalBinary()
			return b
		}
		a, b := train(cfg, 1), train(cfg, 4)
		if !bytes.Equal(a, b) {
			t.Fatalf("labels %q: GOMAXPROCS 1 and 4 give different models", labels)
		}
		if c := train(cfg, 2); !bytes.Equal(a, c) {
			t.Fatalf("labels %q: two runs give different models", labels)
		}
		cfg.Seed = 43
		if c := train(cfg, 2); bytes.Equal(a, c) {
			t.Fatalf("labels %q: seeds 42 and 43 give the same model", labels)
		}
	}
}

func TestProgressAndCancel(t *testing.T) {
	d := mixedData(300)
	var got []nn.Progress
	if _, err := Train(context.Background(), Config{Iterations: 7}, d, func(p nn.Progress) { got = append(got, p) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 7 {
		t.Fatalf("%d progress calls, want 7", len(got))
	}
	for i, p := range got {
		if p.Epoch != i+1 || p.Epochs != 7 || !(p.Loss > 0) || math.IsInf(p.Loss, 0) || !(p.RowsPerSec > 0) {
			t.Fatalf("progress %d: %+v", i, p)
		}
	}
	// The ETA counts down to zero at the last iteration (it read 0 s throughout before).
	if !(got[0].ETA > 0) || got[6].ETA != 0 {
		t.Fatalf("ETA %v at the first iteration, %v at the last", got[0].ETA, got[6].ETA)
	}
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	_, err := Train(ctx, Config{Iterations: 100}, d, func(p nn.Progress) {
		calls++
		if p.Epoch == 3 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) || calls != 3 {
		t.Fatalf("cancelled at iteration 3: err %v after %d calls", err, calls)
	}
}
