package spread

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ldpsql/ldpsql/training/internal/jsonconf"
)

// Config holds the training hyperparameters. Its JSON form (the tags) is what
// [ParseConfig] reads. Zero fields mean the defaults of [DefaultConfig]
// (Seed 0 is a seed like any other).
type Config struct {
	// Samples is S, the importance samples drawn per datapoint and iteration
	// (default 8). It must be ≥ 2: the weights are self-normalised over a
	// datapoint's S samples, so with S = 1 every weight is 1 and the
	// privatised features (and, with sampled labels, the labels) would be
	// imputed without regard to the classifier. With exact labels and no
	// privatised feature it does not matter (every sample is the datapoint).
	Samples int `json:"samples" conf:"default"`
	// Iterations is the number of EM iterations (default 300); each draws
	// fresh samples.
	Iterations int `json:"iterations" conf:"default"`
	// LR is Adam's base learning rate (default 0.05) for the parameters of
	// the internally standardised features; it is decayed to 0 over the run
	// by a cosine schedule.
	LR float64 `json:"lr" conf:"default"`
	// Bins is the number of bins of the categorical prior of a "laplace"
	// feature whose Channel.Bins is 0 (default 32).
	Bins int `json:"bins" conf:"default"`
	// Seed determines the initialisation and every importance sample.
	Seed uint64 `json:"seed"`
	// StepsPerIteration is the number of Adam steps on the M-step energy per
	// EM iteration, all with that iteration's samples and weights (default
	// 1, the paper's single partial M-step).
	StepsPerIteration int `json:"steps_per_iteration" conf:"default"`
	// Labels is how the E-step treats the unknown clean label (see the
	// package documentation): LabelsExact (the default) sums over the K
	// classes inside every feature sample (Rao–Blackwellisation: no
	// sampling error and no finite-S bias from the labels), LabelsSampled
	// draws c^s ~ ρ(c|c̃) like the features, Barber's original proposal.
	Labels string `json:"labels" conf:"default"`
}

// Label treatments (Config.Labels).
const (
	LabelsExact   = "exact"
	LabelsSampled = "sampled"
)

// DefaultConfig returns S = 8 samples, 300 iterations of one Adam step at
// base learning rate 0.05, 32 prior bins for Laplace-noised features and
// exact marginalisation of the labels.
func DefaultConfig() Config {
	return Config{Samples: 8, Iterations: 300, LR: 0.05, Bins: 32, StepsPerIteration: 1, Labels: LabelsExact}
}

// withDefaults fills the zero fields (all but Seed) with the defaults.
func (c Config) withDefaults() Config { return jsonconf.Defaults(c, DefaultConfig()) }

// Limits on Config values (beyond them training is meaningless or would
// exhaust memory or time).
const (
	MaxSamples    = 1 << 12
	MaxIterations = 1 << 20
	MaxSteps      = 1 << 10
	MaxBins       = 1 << 16
	MaxLR         = 10
)

// errOneSample explains why S = 1 is refused.
var errOneSample = errors.New("samples = 1: the importance weights w(s|n) are normalised over each datapoint's " +
	"S samples, so with S = 1 every weight is 1 and the E-step degenerates to multiple imputation from the " +
	"proposal, which ignores the classifier: the features are imputed without regard to the label (and with " +
	"labels \"sampled\" the labels from ρ(c|c̃), which ignores x and so cannot undo the label noise); " +
	"use samples ≥ 2")

// validate checks a configuration after withDefaults; errors name the JSON
// field.
func (c Config) validate() error {
	if c.Samples == 1 {
		return errOneSample
	}
	if c.Labels != LabelsExact && c.Labels != LabelsSampled {
		return fmt.Errorf("labels = %q: want %q (sum over the classes, the default) or %q (Barber's sampled label proposal)",
			c.Labels, LabelsExact, LabelsSampled)
	}
	return cmp.Or(
		jsonconf.Int("samples", c.Samples, 2, MaxSamples),
		jsonconf.Int("iterations", c.Iterations, 1, MaxIterations),
		jsonconf.Positive("lr", c.LR, MaxLR),
		jsonconf.Int("bins", c.Bins, 2, MaxBins),
		jsonconf.Int("steps_per_iteration", c.StepsPerIteration, 1, MaxSteps),
	)
}

// Validate reports whether the configuration, with its zero fields filled
// with defaults, is usable.
func (c Config) Validate() error { return configSpec.Wrap(c.withDefaults().validate()) }

// configSpec words ParseConfig's errors.
var configSpec = jsonconf.Spec{
	Name: "spread config",
	Noun: "key",
	Want: map[string]string{
		"seed":   "a non-negative integer below 2^64",
		"labels": fmt.Sprintf("a string, %q or %q", LabelsExact, LabelsSampled),
	},
	Omit: "leave it out for the default",
}

// ParseConfig decodes a JSON object of Config fields ({"samples": 8,
// "iterations": 300, "lr": 0.05, "bins": 32, "seed": 1,
// "steps_per_iteration": 1, "labels": "exact"}) over [DefaultConfig] and
// validates the result. Empty input and null mean all defaults. Unknown
// keys, wrong types, trailing data, explicit zeros (and "labels": "") and
// bad values are errors naming the key.
func ParseConfig(raw json.RawMessage) (Config, error) {
	return jsonconf.Parse(&configSpec, raw, DefaultConfig(), Config.validate)
}
