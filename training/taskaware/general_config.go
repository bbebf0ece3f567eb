package taskaware

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/ldpsql/ldpsql/training/dp"
	"github.com/ldpsql/ldpsql/training/internal/jsonconf"
)

// The task, encoder and design names of TrainConfig.
const (
	TaskClassification = "classification"
	TaskRegression     = "regression"

	EncoderLinear = "linear" // φ = A·u + b
	EncoderMLP    = "mlp"    // φ = W₂·σ(W₁·u + b₁) + b₂, one sigmoid hidden layer of n units

	// DesignTaskAware is Algorithm 1: encoder and decoder trained together through the task model
	// with the noise in the latent.
	DesignTaskAware = "task_aware"
	// DesignPrivacyAgnostic trains encoder and decoder without noise, then freezes the encoder and
	// trains the decoder with it (the paper's privacy-agnostic baseline, A.7.4).
	DesignPrivacyAgnostic = "privacy_agnostic"
	// DesignTaskAgnostic releases the scaled input itself (Z = n) and trains only the decoder (the
	// paper's task-agnostic baseline).
	DesignTaskAgnostic = "task_agnostic"
)

// Limits of TrainConfig.
const (
	MaxTrainEpochs = 100_000
	MaxSteps       = 100
	MaxBatch       = 1 << 16
	MaxLR          = 1
	MaxEta         = 100
	MaxClasses     = 1000
	MaxTaskHidden  = 4096
)

// TrainConfig is the JSON params of a trained task-aware encoder (Algorithm 1, spec II.4):
//
//	{"label": "diagnosis", "task": "classification", "eps": 20, "z": 3, "encoder": "mlp"}
//
// Defaults are the paper's breast-cancer settings (A.8): Adam lr 1e-3, 2000 epochs of 15 steps, η =
// 0.001, Z = 3, and a task model f with one ReLU hidden layer of ⌈1.5·n⌉ units trained for 4000 steps.
type TrainConfig struct {
	// Label is the auxiliary table's label column, read by the SQL layer (the task model's targets:
	// integer classes 0..K−1 for classification, numbers for regression).
	Label string `json:"label"`
	// Task is "classification" (cross-entropy) or "regression" (squared error on the label scaled to
	// the auxiliary rows' [min, max]).
	Task string `json:"task" conf:"default"`
	// Eps is the ε the encoder is trained for (its training noise is Laplace(Δ1/ε)). Required.
	Eps float64 `json:"eps"`
	// Z is the latent dimension (1..MaxZ), ignored by the task-agnostic design (Z = n).
	Z int `json:"z" conf:"default"`
	// Encoder is "linear" or "mlp"; the decoder mirrors it (linear Z → n, or Z → n sigmoid → n).
	Encoder string `json:"encoder" conf:"default"`
	// Design is "task_aware" (Algorithm 1), or a baseline: "privacy_agnostic", "task_agnostic".
	Design string `json:"design" conf:"default"`
	// Eta is the encoder's weight decay, added to its gradient as η·θ (biases too, as the paper's
	// code does with PyTorch's weight_decay; the paper's η is half of it).
	Eta float64 `json:"eta" conf:"default"`
	// Epochs of Steps optimiser steps per batch (an encoder step, then a decoder step).
	Epochs int `json:"epochs" conf:"default"`
	Steps  int `json:"steps" conf:"default"`
	// BatchSize: 0 (left out) is the whole table up to 2,048 rows, else 64 (the paper's minibatch
	// variant, used for MNIST).
	BatchSize int     `json:"batch_size"`
	LR        float64 `json:"lr" conf:"default"`
	// TaskModel is f's architecture, "mlp" (one ReLU hidden layer of TaskHidden units) or "linear";
	// TaskEpochs its training epochs (one step per batch).
	TaskModel  string `json:"task_model" conf:"default"`
	TaskHidden int    `json:"task_hidden"`
	TaskEpochs int    `json:"task_epochs" conf:"default"`
	Seed       uint64 `json:"seed" conf:"default"`

	// CDP, when set, trains the task model and the encoder under central DP (DP-SGD on the labelled
	// auxiliary rows, see TrainCDP in general_cdp.go): Poisson batches of expected size BatchSize
	// (required), one step per batch, per-example gradients clipped to MaxGradNorm (default 1). The
	// input domain and the label range must then be public, not read from the rows: InputRange
	// [lo, hi] for every feature, Classes (classification) or LabelRange [lo, hi] (regression).
	CDP         *dp.Target `json:"cdp,omitempty"`
	MaxGradNorm float64    `json:"max_grad_norm,omitempty"`
	InputRange  []float64  `json:"input_range,omitempty"`
	Classes     int        `json:"classes,omitempty"`
	LabelRange  []float64  `json:"label_range,omitempty"`
}

// DefaultTrainConfig returns the defaults (Eps has none).
func DefaultTrainConfig() TrainConfig {
	return TrainConfig{Task: TaskClassification, Z: 3, Encoder: EncoderLinear, Design: DesignTaskAware, Eta: 0.001,
		Epochs: 2000, Steps: 15, LR: 1e-3, TaskModel: EncoderMLP, TaskEpochs: 4000, Seed: 1}
}

var trainSpec = jsonconf.Spec{Name: "task_aware params", Noun: "key", Omit: "omit the key for the default"}

// ParseTrainConfig reads the params JSON over the defaults.
func ParseTrainConfig(raw json.RawMessage) (TrainConfig, error) {
	return jsonconf.Parse(&trainSpec, raw, DefaultTrainConfig(), TrainConfig.validate)
}

func (c TrainConfig) validate() error {
	oneOf := func(key, v string, allowed ...string) error {
		for _, a := range allowed {
			if v == a {
				return nil
			}
		}
		return fmt.Errorf("%s = %q: want one of %q", key, v, allowed)
	}
	for _, err := range []error{
		oneOf("task", c.Task, TaskClassification, TaskRegression),
		oneOf("encoder", c.Encoder, EncoderLinear, EncoderMLP),
		oneOf("design", c.Design, DesignTaskAware, DesignPrivacyAgnostic, DesignTaskAgnostic),
		oneOf("task_model", c.TaskModel, EncoderMLP, EncoderLinear),
		jsonconf.Positive("eps", c.Eps, MaxEps),
		jsonconf.Int("z", c.Z, 1, MaxZ),
		jsonconf.Positive("eta", c.Eta, MaxEta),
		jsonconf.Int("epochs", c.Epochs, 1, MaxTrainEpochs),
		jsonconf.Int("steps", c.Steps, 1, MaxSteps),
		jsonconf.Auto("batch_size", c.BatchSize, MaxBatch),
		jsonconf.Positive("lr", c.LR, MaxLR),
		jsonconf.Auto("task_hidden", c.TaskHidden, MaxTaskHidden),
		jsonconf.Int("task_epochs", c.TaskEpochs, 1, MaxTrainEpochs),
	} {
		if err != nil {
			return err
		}
	}
	if c.Label == "" {
		return fmt.Errorf(`give "label": the auxiliary table's column the task model learns to predict`)
	}
	if c.InputRange != nil && (len(c.InputRange) != 2 || !(c.InputRange[0] < c.InputRange[1]) || math.IsInf(c.InputRange[0], 0) || math.IsInf(c.InputRange[1], 0)) {
		return fmt.Errorf("input_range = %v: want [lo, hi] with lo < hi, finite", c.InputRange)
	}
	if c.LabelRange != nil && (len(c.LabelRange) != 2 || !(c.LabelRange[0] < c.LabelRange[1]) || math.IsInf(c.LabelRange[0], 0) || math.IsInf(c.LabelRange[1], 0)) {
		return fmt.Errorf("label_range = %v: want [lo, hi] with lo < hi, finite", c.LabelRange)
	}
	if c.Classes != 0 && (c.Classes < 2 || c.Classes > MaxClasses || c.Task != TaskClassification) {
		return fmt.Errorf("classes = %d: want 2 to %d, for classification", c.Classes, MaxClasses)
	}
	if c.CDP == nil {
		if c.MaxGradNorm != 0 {
			return errors.New(`max_grad_norm is for cdp training: give "cdp": {"epsilon": …} too`)
		}
		return nil
	}
	switch {
	case !(c.CDP.Epsilon > 0 && c.CDP.Epsilon <= 100):
		return fmt.Errorf("cdp.epsilon = %v: want a number in (0, 100]", c.CDP.Epsilon)
	case c.CDP.Delta != 0 && !(c.CDP.Delta > 0 && c.CDP.Delta < 1):
		return fmt.Errorf("cdp.delta = %v: want a number in (0, 1) (or leave it out for 1/rows)", c.CDP.Delta)
	case c.MaxGradNorm != 0 && !(c.MaxGradNorm > 0 && c.MaxGradNorm <= 1e6):
		return fmt.Errorf("max_grad_norm = %v: want a number in (0, 1e6] (or leave it out for 1)", c.MaxGradNorm)
	case c.Design != DesignTaskAware:
		return fmt.Errorf("cdp trains the %q design only", DesignTaskAware)
	case c.BatchSize == 0:
		return errors.New("cdp needs batch_size: the expected size of its Poisson batches (sampling rate batch_size/rows)")
	case c.InputRange == nil:
		return errors.New(`cdp needs a public input domain: "input_range": [lo, hi] for every feature (the rows' own range would not be protected)`)
	case c.Task == TaskClassification && c.Classes == 0:
		return errors.New(`cdp needs "classes": the number of label classes (the labels' own maximum would not be protected)`)
	case c.Task == TaskRegression && c.LabelRange == nil:
		return errors.New(`cdp needs "label_range": [lo, hi] for the label (the labels' own range would not be protected)`)
	}
	return nil
}

// batchSize is the rows per step for n rows.
func (c TrainConfig) batchSize(n int) int {
	if c.BatchSize > 0 {
		return min(c.BatchSize, n)
	}
	if n <= 2048 {
		return n
	}
	return 64
}
