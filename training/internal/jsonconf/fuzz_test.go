package jsonconf_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ldpsql/ldpsql/training/classifier"
	"github.com/ldpsql/ldpsql/training/clm"
	"github.com/ldpsql/ldpsql/training/spread"
	"github.com/ldpsql/ldpsql/training/taskaware"
	"github.com/ldpsql/ldpsql/training/vlm"
)

// configParser is one training package's JSON config reader, as ldp_train_mechanism,
// ldp_fit_mechanism and TRAIN_NOISY_CLASSIFIER call it on a user's params.
type configParser struct {
	prefix string                    // what every error starts with
	parse  func([]byte) (any, error) // the package's ParseConfig
	check  func(any) error           // its Validate, where it has one
}

func parser[T any](prefix string, parse func(json.RawMessage) (T, error), validate func(T) error) configParser {
	return configParser{
		prefix: prefix,
		parse:  func(b []byte) (any, error) { return parse(b) },
		check: func(c any) error {
			if validate == nil {
				return nil
			}
			return validate(c.(T))
		},
	}
}

var configParsers = []configParser{
	parser("vlm config: ", vlm.ParseConfig, vlm.Config.Validate),
	parser("clm params: ", clm.ParseConfig, clm.Config.Validate),
	parser("classifier config: ", classifier.ParseConfig, classifier.Config.Validate),
	parser("spread config: ", spread.ParseConfig, spread.Config.Validate),
	parser("task_aware params: ", taskaware.ParseTrainConfig, nil),
	parser("task_aware_linear params: ", func(b json.RawMessage) (taskaware.Params, error) { return taskaware.ParseParams(b) }, nil),
}

// FuzzParseConfig reads arbitrary JSON with every training package's config parser. A config it
// accepts must validate again and read back unchanged from its own JSON (what the job records in
// ldp_jobs.params); an error must be worded for the user.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		``, `null`, `{}`, `[]`, `{"d": 8, "l": 10, "eps_pretrain": 33, "hidden": [400, 150, 50], "likelihood": "bernoulli", "epochs": 20, "batch_size": 64, "lr": 5e-4, "seed": 1}`,
		`{"d": 0}`, `{"l": -1}`, `{"lr": 1e309}`, `{"hidden": []}`, `{"hidden": [1e9]}`, `{"linear": true, "hidden": [3]}`,
		`{"cdp": {"epsilon": 5}, "eps_pretrain": 10}`, `{"cdp": {"epsilon": 5, "delta": 1}}`, `{"max_grad_norm": 2}`,
		`{"epochs": 10, "patience": 3, "restarts": 2, "hidden": [50], "lr": 0.001, "batch_size": 128}`,
		`{"samples": 2, "iterations": 3, "bins": 16, "labels": "sampled"}`, `{"labels": "x"}`,
		`{"seed": -1}`, `{"seed": 18446744073709551616}`, `{"d": 1.5}`, `{"d": "8"}`, `{"unknown": 1}`,
		`{"d": 8} trailing`, `{"d": 8`, `{"d": 8, "d": 9}`, `{"D": 8}`,
	} {
		for i := range configParsers {
			f.Add([]byte(s), uint8(i))
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte, which uint8) {
		p := configParsers[int(which)%len(configParsers)]
		c, err := p.parse(raw)
		if err != nil {
			msg := err.Error()
			if msg == "" || !strings.HasPrefix(msg, p.prefix) || strings.Contains(msg, "panic") || strings.Contains(msg, "runtime error") {
				t.Fatalf("%q: error %q", raw, msg)
			}
			return
		}
		if err := p.check(c); err != nil {
			t.Fatalf("%q was accepted as %+v, which does not validate: %v", raw, c, err)
		}
		again, out, err := reparse(p, c)
		if err != nil {
			t.Fatalf("%q was accepted as %+v, whose JSON %s is refused: %v", raw, c, out, err)
		}
		// Compared as JSON: an empty list and a missing one are the same config.
		if first, second, _ := remarshal(c, again); first != second {
			t.Fatalf("%q was accepted as %s; that JSON reads back as %s", raw, first, second)
		}
	})
}

// reparse writes c as JSON and reads it back. A key holding the zero of a field whose zero means "the
// default" (epochs 0: chosen from the data) is refused given explicitly, so such keys are left out, as a
// user writes them.
func reparse(p configParser, c any) (any, []byte, error) {
	out, err := json.Marshal(c)
	if err != nil {
		return nil, out, err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(out, &obj); err != nil {
		return nil, out, err
	}
	for {
		again, err := p.parse(out)
		if err == nil {
			return again, out, nil
		}
		dropped := false
		for key := range obj {
			if strings.HasPrefix(err.Error(), p.prefix+key+" = ") && strings.Contains(err.Error(), "for the default") {
				delete(obj, key)
				dropped = true
			}
		}
		if !dropped {
			return nil, out, err
		}
		if out, err = json.Marshal(obj); err != nil {
			return nil, out, err
		}
	}
}

func remarshal(a, b any) (string, string, error) {
	x, err := json.Marshal(a)
	if err != nil {
		return "", "", err
	}
	y, err := json.Marshal(b)
	return string(x), string(y), err
}
