// Package clm trains the contrastive Laplace mechanism (thesis ch. 5, spec §6): the generic
// representation-learning recipe with a SimCLR learner. An encoder network h maps a row to d values,
// ν₁ scales them into the ℓ1 ball of radius l (so Δ1 = 2l and Laplace noise of scale 2l/ε makes a
// release ε-LDP), training adds Laplace(b) noise to that output (b = 2l/eps_pretrain, spec §6.1 step 3)
// and a projection head g = W₂σ(W₁·) over the noisy output is trained with the NT-Xent loss on two
// augmented views of each row. The head and the noise are training only: the mechanism is x ↦ ν₁(h(x)),
// which the host clips again and noises.
//
// The encoder is a multilayer perceptron, for images and tables alike: the thesis's ResNet-18 is out of
// reach without a GPU, and a convolutional encoder through gorgonia's conv2d (im2col on the CPU) is
// left until its epoch time is measured against #14's bound of 3× a VLM epoch. The image augmentations (random crop with padding, horizontal flip, brightness and contrast jitter) give
// the MLP what it cannot learn from its architecture: invariance to small shifts and lighting. Tabular
// rows get SCARF-style views: a random share of the features replaced by the same feature of another
// row (a draw from its marginal), plus Gaussian jitter.
//
// The package knows nothing of SQL or plugins. It trains on the shared foundation: layers and the
// NT-Xent op of training/nn/graph, Adam and the epoch loop of training/nn.
package clm

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/ldpsql/ldpsql/training/internal/jsonconf"
)

// Augmentation kinds of Config.Augment.
const (
	AugmentImage   = "image"
	AugmentTabular = "tabular"
)

// Limits of Config.
const (
	MaxD      = 1024
	MaxL      = 1e6
	MaxEpochs = 10_000
	MaxBatch  = 4096
	MaxLR     = 1
	MaxHidden = 8192
	MaxLayers = 8
	MaxTau    = 100
	MaxEpsPre = 1e4

	// Auto epochs: enough optimiser steps on small tables, at most AutoMaxEpochs passes.
	AutoMinSteps  = 2000
	AutoMinEpochs = 10
	AutoMaxEpochs = 200
)

// Config is the JSON params of a CLM:
//
//	{"d": 32, "l": 5, "eps_pretrain": 20, "tau": 0.5, "augment": "image", "image_shape": [28, 28, 1]}
//
// Defaults follow the thesis where it says (d = 32, l = 5, batch 128; spec §6.2, Table B.1) and SimCLR
// where it does not (τ = 0.5); lr 1e-3 (the thesis's 3e-4 was for a ResNet over many more epochs).
type Config struct {
	// D is the representation's dimension and L the ℓ1 radius ν₁ scales it into.
	D int     `json:"d" conf:"default"`
	L float64 `json:"l" conf:"default"`
	// EpsPretrain sets the training noise b = 2l/eps_pretrain (Table B.1); 0, the default, trains
	// without noise (Table B.1's "no noise" at ε ≥ 8).
	EpsPretrain float64 `json:"eps_pretrain"`
	// Tau is NT-Xent's temperature.
	Tau float64 `json:"tau" conf:"default"`
	// Augment is "image" (ImageShape required) or "tabular"; left out, "image" when ImageShape is
	// given, else "tabular".
	Augment    string `json:"augment"`
	ImageShape []int  `json:"image_shape,omitempty"` // [height, width] or [height, width, channels], channels last
	// Image views: a crop of the image padded by CropPad pixels (edge values), a horizontal flip with
	// probability 1/2 when Flip, brightness and contrast each scaled by a factor drawn from
	// [1 − Jitter, 1 + Jitter] with probability 0.8. Defaults: CropPad ⌈height/8⌉, Flip true, Jitter 0.4.
	CropPad int     `json:"crop_pad"`
	Flip    *bool   `json:"flip,omitempty"`
	Jitter  float64 `json:"jitter" conf:"default"`
	// Tabular views: each feature replaced with probability MaskRate by the same feature of a random
	// row, then Gaussian noise of NoiseStd standard deviations of the feature added.
	MaskRate float64 `json:"mask_rate" conf:"default"`
	NoiseStd float64 `json:"noise_std" conf:"default"`
	// Hidden are the encoder's ReLU hidden layers (left out: {min(512, 4n), min(256, 2n)} for n
	// inputs); Head the projection head's ReLU hidden layer and output sizes.
	Hidden []int `json:"hidden,omitempty"`
	Head   []int `json:"head,omitempty"`
	// Epochs 0 (left out) chooses max(AutoMinEpochs, ⌈AutoMinSteps/steps per epoch⌉), at most
	// AutoMaxEpochs.
	Epochs    int     `json:"epochs"`
	BatchSize int     `json:"batch_size" conf:"default"`
	LR        float64 `json:"lr" conf:"default"`
	Seed      uint64  `json:"seed" conf:"default"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{D: 32, L: 5, Tau: 0.5, Jitter: 0.4, MaskRate: 0.3, NoiseStd: 0.1, BatchSize: 128, LR: 1e-3, Seed: 1}
}

var configSpec = jsonconf.Spec{Name: "clm params", Noun: "key", Omit: "omit the key for the default"}

// ParseConfig reads the params JSON over the defaults.
func ParseConfig(raw json.RawMessage) (Config, error) {
	return jsonconf.Parse(&configSpec, raw, DefaultConfig(), Config.validate)
}

// Validate reports whether c, its zero fields filled with the defaults, is usable.
func (c Config) Validate() error { return configSpec.Wrap(c.withDefaults().validate()) }

func (c Config) withDefaults() Config { return jsonconf.Defaults(c, DefaultConfig()) }

func (c Config) validate() error {
	if err := errors.Join(
		jsonconf.Int("d", c.D, 1, MaxD),
		jsonconf.Positive("l", c.L, MaxL),
		jsonconf.Positive("tau", c.Tau, MaxTau),
		jsonconf.Auto("epochs", c.Epochs, MaxEpochs),
		jsonconf.Int("batch_size", c.BatchSize, 2, MaxBatch),
		jsonconf.Positive("lr", c.LR, MaxLR),
		jsonconf.Sizes("hidden", c.Hidden, MaxLayers, MaxHidden),
		jsonconf.Sizes("head", c.Head, 2, MaxHidden),
	); err != nil {
		return err
	}
	switch {
	case math.IsNaN(c.EpsPretrain) || c.EpsPretrain < 0 || c.EpsPretrain > MaxEpsPre:
		return fmt.Errorf("eps_pretrain = %v: want 0 (no training noise) or a number in (0, %g]", c.EpsPretrain, float64(MaxEpsPre))
	case c.Augment != "" && c.Augment != AugmentImage && c.Augment != AugmentTabular:
		return fmt.Errorf("augment = %q: want %q or %q", c.Augment, AugmentImage, AugmentTabular)
	case c.Augment == AugmentImage && c.ImageShape == nil:
		return errors.New(`augment "image" needs image_shape: [height, width] or [height, width, channels]`)
	case c.Augment == AugmentTabular && c.ImageShape != nil:
		return errors.New(`image_shape is for augment "image"`)
	case c.Head != nil && len(c.Head) != 2:
		return fmt.Errorf("head = %v: want [hidden, output]", c.Head)
	case !(c.Jitter >= 0 && c.Jitter < 1):
		return fmt.Errorf("jitter = %v: want a number in [0, 1)", c.Jitter)
	case !(c.MaskRate >= 0 && c.MaskRate < 1):
		return fmt.Errorf("mask_rate = %v: want a number in [0, 1)", c.MaskRate)
	case !(c.NoiseStd >= 0 && c.NoiseStd <= 10):
		return fmt.Errorf("noise_std = %v: want a number in [0, 10]", c.NoiseStd)
	case c.CropPad < 0 || c.CropPad > 64:
		return fmt.Errorf("crop_pad = %d: want 0 to 64", c.CropPad)
	}
	if c.ImageShape != nil {
		if len(c.ImageShape) < 2 || len(c.ImageShape) > 3 {
			return fmt.Errorf("image_shape = %v: want [height, width] or [height, width, channels]", c.ImageShape)
		}
		for _, s := range c.ImageShape {
			if s < 1 || s > 4096 {
				return fmt.Errorf("image_shape = %v: each size 1 to 4096", c.ImageShape)
			}
		}
	}
	return nil
}

// Resolve fills what depends on the rows: the augmentation kind, the image's channels, the crop
// padding, the hidden and head sizes and the epochs (see Config).
func (c Config) Resolve(n, inputDim int) (Config, error) {
	c = c.withDefaults()
	if c.Augment == "" {
		c.Augment = AugmentTabular
		if c.ImageShape != nil {
			c.Augment = AugmentImage
		}
	}
	if c.Augment == AugmentImage {
		if len(c.ImageShape) == 2 {
			c.ImageShape = append(c.ImageShape[:2:2], 1)
		}
		if p := c.ImageShape[0] * c.ImageShape[1] * c.ImageShape[2]; p != inputDim {
			return c, fmt.Errorf("image_shape %v holds %d values; the rows have %d features", c.ImageShape, p, inputDim)
		}
		if c.CropPad == 0 {
			c.CropPad = (c.ImageShape[0] + 7) / 8
		}
	}
	if c.Flip == nil {
		t := true
		c.Flip = &t
	}
	if c.Hidden == nil {
		c.Hidden = []int{min(512, 4*inputDim), min(256, 2*inputDim)}
	}
	if c.Head == nil {
		c.Head = []int{128, 64}
	}
	if c.Epochs == 0 {
		steps := max(1, (n+c.BatchSize-1)/c.BatchSize)
		c.Epochs = min(AutoMaxEpochs, max(AutoMinEpochs, (AutoMinSteps+steps-1)/steps))
	}
	return c, c.validate()
}

// TrainScale is the training noise's Laplace scale b = 2l/eps_pretrain, 0 without noise.
func (c Config) TrainScale() float64 {
	if c.EpsPretrain == 0 {
		return 0
	}
	return 2 * c.L / c.EpsPretrain
}

// EpsPretrainFor is Table B.1's training noise (clean inference, l = 5) for a release at total ε with
// λ = 0.7, as eps_pretrain: none at ε ≥ 8, 70 at 6, 30 at 4, 20 at 2 and below; between rows, the row
// of the larger ε below it. epsX is the features' share ε_x = 0.7ε.
func EpsPretrainFor(epsX float64) float64 {
	eps := math.Round(epsX/0.7*1e9) / 1e9 // 0.7·6/0.7 is 5.999…
	switch {
	case eps >= 8:
		return 0
	case eps >= 6:
		return 70
	case eps >= 4:
		return 30
	default:
		return 20
	}
}
