package spread

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/ldpsql/ldpsql/training/internal/jsonconf"
)

// Limits on Config values (beyond them training is meaningless or would
// exhaust memory or time).
const (
	MaxSamples    = 1 << 12
	MaxIterations = 1 << 20
	MaxSteps      = 1 << 10
	MaxBins       = 1 << 16
	MaxLR         = 10
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
	Samples int `json:"samples"`
	// Iterations is the number of EM iterations (default 300); each draws
	// fresh samples.
	Iterations int `json:"iterations"`
	// LR is Adam's base learning rate (default 0.05) for the parameters of
	// the internally standardised features; it is decayed to 0 over the run
	// by a cosine schedule.
	LR float64 `json:"lr"`
	// Bins is the number of bins of the categorical prior of a "laplace"
	// feature whose Channel.Bins is 0 (default 32).
	Bins int `json:"bins"`
	// Seed determines the initialisation and every importance sample.
	Seed uint64 `json:"seed"`
	// StepsPerIteration is the number of Adam steps on the M-step energy per
	// EM iteration, all with that iteration's samples and weights (default
	// 1, the paper's single partial M-step).
	StepsPerIteration int `json:"steps_per_iteration"`
	// Labels is how the E-step treats the unknown clean label (see the
	// package documentation): LabelsExact (the default) sums over the K
	// classes inside every feature sample (Rao–Blackwellisation: no
	// sampling error and no finite-S bias from the labels), LabelsSampled
	// draws c^s ~ ρ(c|c̃) like the features, Barber's original proposal.
	Labels string `json:"labels"`
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

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Samples == 0 {
		c.Samples = d.Samples
	}
	if c.Iterations == 0 {
		c.Iterations = d.Iterations
	}
	if c.LR == 0 {
		c.LR = d.LR
	}
	if c.Bins == 0 {
		c.Bins = d.Bins
	}
	if c.StepsPerIteration == 0 {
		c.StepsPerIteration = d.StepsPerIteration
	}
	if c.Labels == "" {
		c.Labels = d.Labels
	}
	return c
}

// errOneSample explains why S = 1 is refused.
var errOneSample = errors.New("samples = 1: the importance weights w(s|n) are normalised over each datapoint's " +
	"S samples, so with S = 1 every weight is 1 and the E-step degenerates to multiple imputation from the " +
	"proposal, which ignores the classifier: the features are imputed without regard to the label (and with " +
	"labels \"sampled\" the labels from ρ(c|c̃), which ignores x and so cannot undo the label noise); " +
	"use samples ≥ 2")

// validate checks a configuration after withDefaults; errors name the JSON
// field.
func (c Config) validate() error {
	switch {
	case c.Samples == 1:
		return errOneSample
	case c.Samples < 2 || c.Samples > MaxSamples:
		return fmt.Errorf("samples = %d: want 2 ≤ samples ≤ %d", c.Samples, MaxSamples)
	case c.Iterations < 1 || c.Iterations > MaxIterations:
		return fmt.Errorf("iterations = %d: want 1 ≤ iterations ≤ %d", c.Iterations, MaxIterations)
	case math.IsNaN(c.LR) || !(c.LR > 0) || c.LR > MaxLR:
		return fmt.Errorf("lr = %v: want a number in (0, %d]", c.LR, MaxLR)
	case c.Bins < 2 || c.Bins > MaxBins:
		return fmt.Errorf("bins = %d: want 2 ≤ bins ≤ %d", c.Bins, MaxBins)
	case c.StepsPerIteration < 1 || c.StepsPerIteration > MaxSteps:
		return fmt.Errorf("steps_per_iteration = %d: want 1 ≤ steps_per_iteration ≤ %d", c.StepsPerIteration, MaxSteps)
	case c.Labels != LabelsExact && c.Labels != LabelsSampled:
		return fmt.Errorf("labels = %q: want %q (sum over the classes, the default) or %q (Barber's sampled label proposal)",
			c.Labels, LabelsExact, LabelsSampled)
	}
	return nil
}

// Validate reports whether the configuration, with its zero fields filled
// with defaults, is usable.
func (c Config) Validate() error {
	if err := c.withDefaults().validate(); err != nil {
		return fmt.Errorf("spread config: %w", err)
	}
	return nil
}

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
// "steps_per_iteration": 1, "labels": "exact"}), fills absent fields with
// defaults and validates the result. Empty input and null mean all defaults.
// Unknown keys, wrong types, trailing data, explicit zeros (and "labels": "")
// and bad values are errors naming the key.
func ParseConfig(raw json.RawMessage) (Config, error) {
	// Pointer fields tell "absent" from an explicit zero.
	var p struct {
		Samples           *int     `json:"samples"`
		Iterations        *int     `json:"iterations"`
		LR                *float64 `json:"lr"`
		Bins              *int     `json:"bins"`
		Seed              *uint64  `json:"seed"`
		StepsPerIteration *int     `json:"steps_per_iteration"`
		Labels            *string  `json:"labels"`
	}
	if err := configSpec.Decode(raw, &p); err != nil {
		return Config{}, err
	}
	var c Config
	// Every key is set; the first error wins.
	if err := cmp.Or(
		jsonconf.SetNonZero(&configSpec, &c.Samples, p.Samples, "samples"),
		jsonconf.SetNonZero(&configSpec, &c.Iterations, p.Iterations, "iterations"),
		jsonconf.SetNonZero(&configSpec, &c.Bins, p.Bins, "bins"),
		jsonconf.SetNonZero(&configSpec, &c.StepsPerIteration, p.StepsPerIteration, "steps_per_iteration"),
		jsonconf.SetNonZero(&configSpec, &c.LR, p.LR, "lr"),
	); err != nil {
		return Config{}, err
	}
	if p.Seed != nil {
		c.Seed = *p.Seed
	}
	if p.Labels != nil {
		if *p.Labels == "" {
			return Config{}, configSpec.Errorf("labels = \"\": want %q or %q (leave it out for the default)", LabelsExact, LabelsSampled)
		}
		c.Labels = *p.Labels
	}
	c = c.withDefaults()
	if err := c.validate(); err != nil {
		return Config{}, fmt.Errorf("spread config: %w", err)
	}
	return c, nil
}
