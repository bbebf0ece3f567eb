package vlm

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/ldpsql/ldpsql/training/dp"
	"github.com/ldpsql/ldpsql/training/internal/jsonconf"
)

// Likelihoods accepted in Config.Likelihood.
const (
	Bernoulli = "bernoulli"
	Gaussian  = "gaussian"
)

// Limits on Config values (beyond them training is either meaningless or
// would exhaust memory).
const (
	MaxD      = 4096
	MaxHidden = 1 << 16 // per layer
	MaxLayers = 16      // hidden layers
	MaxL      = 1e9     // keeps L·(anything we compute) far inside float32 range
	MaxEpochs = 1 << 20
	MaxBatch  = 1 << 16
	MaxLR     = 1
)

// Config holds the VLM's architecture and training hyperparameters. Its JSON
// form (field names in the tags) is what [ParseConfig] reads. Zero values
// mean the defaults (see [DefaultConfig]), except EpsPretrain, where 0 means a
// learnt scale, Linear and Seed.
type Config struct {
	// D is the latent dimension (default 8).
	D int `json:"d" conf:"default"`
	// L is the ℓ1 radius of the clipped encoder mean (default 10); the
	// encoder's ℓ1 sensitivity is 2L.
	L float64 `json:"l" conf:"default"`
	// EpsPretrain fixes the training posterior scale at b_train =
	// 2L/EpsPretrain (the thesis's ε_pre-training). 0 means b is a learnt
	// scalar (b = exp(ρ), ρ initialised to log(1/(2√2))). Neither is the
	// privatisation scale.
	EpsPretrain float64 `json:"eps_pretrain"`
	// Hidden are the encoder's hidden layer sizes, input side first; the
	// decoder uses them reversed. Empty: chosen by Train from the input
	// dimension (see Resolve; {400, 150, 50}, the thesis's, from 100 inputs
	// on). Must be empty when Linear is set.
	Hidden []int `json:"hidden"`
	// Likelihood is "bernoulli" (features in [0, 1]) or "gaussian" (unit
	// variance on features that the model standardises itself with the
	// training rows' means and standard deviations). Empty: chosen by Train
	// from the rows, bernoulli when every value lies in [0, 1] (images),
	// else gaussian (tabular data of any scale).
	Likelihood string `json:"likelihood" conf:"default"`
	// Linear selects the linear VLM: linear encoder and decoder, still
	// ν-clipped and still noised in training.
	Linear bool `json:"linear"`
	// Epochs (0: chosen by Train from the number of rows, see Resolve) and
	// BatchSize (default 64) of Adam training.
	Epochs    int `json:"epochs" conf:"default"`
	BatchSize int `json:"batch_size" conf:"default"`
	// LR is Adam's learning rate (default 5e-4).
	LR float64 `json:"lr" conf:"default"`
	// Seed determines initialisation, shuffling and training noise (not the noise of CDP training,
	// which must be unpredictable: it comes from crypto/rand).
	Seed uint64 `json:"seed"`
	// CDP, when set, trains under central differential privacy (DP-SGD, see TrainCDP): the auxiliary
	// rows are protected at (epsilon, delta); delta left out is 1/rows (the thesis's δ = 1/|D1|).
	CDP *CDPTarget `json:"cdp,omitempty"`
	// MaxGradNorm is CDP training's per-example gradient clip C (default 1 when CDP is set).
	MaxGradNorm float64 `json:"max_grad_norm,omitempty"`
}

// CDPTarget is the central DP a training run must meet, and after training what it met (dp.Target).
type CDPTarget = dp.Target

// DefaultConfig returns the thesis's MNIST settings (§9.3, §9.4) with a
// learnt training scale: D 8, L 10, hidden {400, 150, 50}, 20 epochs of
// batch 64 at learning rate 5e-4, and the likelihood chosen from the data
// (Bernoulli on MNIST's pixels).
func DefaultConfig() Config {
	return Config{
		D:         8,
		L:         10,
		BatchSize: 64,
		LR:        5e-4,
	}
}

// withDefaults fills zero fields with the defaults and normalises Hidden
// (nil for the linear variant and when left for Resolve, a copy otherwise).
func (c Config) withDefaults() Config {
	c = jsonconf.Defaults(c, DefaultConfig())
	if c.CDP != nil {
		cdp := *c.CDP
		c.CDP = &cdp
		if c.MaxGradNorm == 0 {
			c.MaxGradNorm = 1
		}
	}
	if c.Linear || len(c.Hidden) == 0 {
		c.Hidden = nil
	} else {
		c.Hidden = slices.Clone(c.Hidden)
	}
	return c
}

// EpsPretrainFor is the ε_pre-training (b_train = 2l/ε_pre-training) for a VLM whose latent will be
// released at epsX (the feature share ε_x of the release, "eps_target" in ldp_train_mechanism's
// params): 5·epsX, and at least 7. It follows the thesis's Table A.3 (MNIST), which gives ε_pre-training
// 7, 7, 13, 19, 32, 33 for total ε 1, 2, 4, 6, 8, 10 at λ = 0.7, i.e. ε_x 0.7 … 7: the ratio
// ε_pre-training/ε_x is 10, 5, 4.6, 4.5, 5.7, 4.7, and the floor of 7 covers the two smallest ε.
func EpsPretrainFor(epsX float64) float64 { return max(7, 5*epsX) }

// The rules of Resolve.
const (
	// AutoMinSteps: automatic Epochs give at least this many Adam steps,
	// and at least AutoMinEpochs (the thesis's 20) and at most AutoMaxEpochs
	// epochs.
	AutoMinSteps  = 3000
	AutoMinEpochs = 20
	AutoMaxEpochs = 2000
)

// Resolve fills what Train chooses from the data for n rows of inputDim
// values (after withDefaults):
//
//	Epochs = clamp(⌈AutoMinSteps / ⌈n / BatchSize⌉⌉, AutoMinEpochs, AutoMaxEpochs)
//	Hidden = {min(400, 4·inputDim), min(150, 2·inputDim), min(50, inputDim)}
//
// On Fashion-MNIST's 45,000 auxiliary images this is the thesis's 20 epochs
// and {400, 150, 50}; on small tables it trains longer and narrower. Measured
// with a clean classifier on the 8-d latents (3 seeds, test accuracy): raw
// WDBC (400 rows, 30 features) 0.923/0.923/0.929 with the fixed 20 epochs and
// {400, 150, 50}, 0.947/0.947/0.941 with both rules (PCA 0.959); 1,000
// Fashion-MNIST images 0.737/0.733/0.729, 0.769/0.770/0.762 (PCA 0.726).
func (c Config) Resolve(n, inputDim int) Config {
	if c.Epochs == 0 {
		steps := max(1, (n+c.BatchSize-1)/max(1, c.BatchSize))
		c.Epochs = min(AutoMaxEpochs, max(AutoMinEpochs, (AutoMinSteps+steps-1)/steps))
	}
	if !c.Linear && len(c.Hidden) == 0 {
		c.Hidden = []int{min(400, 4*inputDim), min(150, 2*inputDim), min(50, inputDim)}
	}
	return c
}

// validate checks a configuration after withDefaults; errors name the JSON
// field.
func (c Config) validate() error {
	switch {
	case math.IsNaN(c.EpsPretrain) || math.IsInf(c.EpsPretrain, 0) || c.EpsPretrain < 0:
		return fmt.Errorf("eps_pretrain = %v: want 0 (learnt scale) or a finite number > 0", c.EpsPretrain)
	case c.Likelihood != "" && c.Likelihood != Bernoulli && c.Likelihood != Gaussian:
		return fmt.Errorf("likelihood = %q: want %q or %q (or leave it out to choose from the data)", c.Likelihood, Bernoulli, Gaussian)
	case c.Linear && len(c.Hidden) > 0:
		return errors.New("hidden must be empty when linear is true")
	}
	if err := cmp.Or(
		jsonconf.Int("d", c.D, 1, MaxD),
		jsonconf.Positive("l", c.L, MaxL),
		jsonconf.Auto("epochs", c.Epochs, MaxEpochs),
		jsonconf.Int("batch_size", c.BatchSize, 1, MaxBatch),
		jsonconf.Positive("lr", c.LR, MaxLR),
		jsonconf.Sizes("hidden", c.Hidden, MaxLayers, MaxHidden),
	); err != nil {
		return err
	}
	if c.CDP != nil {
		switch {
		case !(c.CDP.Epsilon > 0 && c.CDP.Epsilon <= 100):
			return fmt.Errorf("cdp.epsilon = %v: want a number in (0, 100]", c.CDP.Epsilon)
		case c.CDP.Delta != 0 && !(c.CDP.Delta > 0 && c.CDP.Delta < 1):
			return fmt.Errorf("cdp.delta = %v: want a number in (0, 1) (or leave it out for 1/rows)", c.CDP.Delta)
		case c.EpsPretrain == 0:
			return errors.New("cdp needs a fixed training scale: give eps_pretrain (or eps_target, from which ldp_train_mechanism sets it); a learnt scale has no per-example gradient bound")
		case c.Likelihood == Gaussian:
			return errors.New("cdp needs the bernoulli likelihood (features in [0, 1]): the gaussian likelihood standardises with the rows' own means and deviations, which CDP does not protect")
		case c.MaxGradNorm != 0 && !(c.MaxGradNorm > 0 && c.MaxGradNorm <= 1e6):
			return fmt.Errorf("max_grad_norm = %v: want a number in (0, 1e6] (or leave it out for 1)", c.MaxGradNorm)
		}
	} else if c.MaxGradNorm != 0 {
		return errors.New("max_grad_norm is for cdp training: give \"cdp\": {\"epsilon\": …} too")
	}
	if b := 2 * c.L / c.EpsPretrain; c.EpsPretrain > 0 && (!(b > 1e-6) || b > 1e6) {
		return fmt.Errorf("eps_pretrain = %v: training scale b = 2l/eps_pretrain = %v is outside [1e-6, 1e6]", c.EpsPretrain, b)
	}
	return nil
}

// Validate reports whether the configuration, with its zero fields filled
// with defaults, is usable.
func (c Config) Validate() error { return configSpec.Wrap(c.withDefaults().validate()) }

// configSpec words ParseConfig's errors.
var configSpec = jsonconf.Spec{Name: "vlm config", Noun: "field", Omit: "leave it out for the default"}

// ParseConfig decodes a JSON object of Config fields ({"d": 8, "l": 10,
// "eps_pretrain": 33, "hidden": [400, 150, 50], "likelihood": "bernoulli",
// "linear": false, "epochs": 20, "batch_size": 64, "lr": 5e-4, "seed": 1})
// over [DefaultConfig] and validates the result. Empty input and null mean
// all defaults. Unknown fields, wrong types, trailing data, explicit zeros
// (and "likelihood": "") and bad values are errors naming the field.
func ParseConfig(raw json.RawMessage) (Config, error) {
	c, err := jsonconf.Parse(&configSpec, raw, DefaultConfig(), func(c Config) error {
		// In Go an empty Hidden is left to Resolve; written out in JSON it
		// reads as a request for no layers, which only linear means.
		if c.Hidden != nil && len(c.Hidden) == 0 && !c.Linear {
			return errors.New("hidden = []: give at least one layer size, or set linear")
		}
		return c.validate()
	})
	if err != nil {
		return Config{}, err
	}
	return c.withDefaults(), nil
}
