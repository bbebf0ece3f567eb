package taskaware

import (
	"fmt"
	"math"

	"github.com/ldpsql/ldpsql/training/internal/jsonconf"
)

// MaxEps is the largest ε a design is made for (the randomisers' bound).
const MaxEps = 64

// DefaultZ is the latent dimension cap when "z" is left out (or the input
// dimension, when it is smaller); the fitted latent dimension is
// min(z, Z′), Z′ from eq. 12.
const DefaultZ = 8

// Params are the fit's hyperparameters, JSON
//
//	{"weights": [...] | "task_matrix": [[...], ...], "eps": 5, "z": 3, "r": 0.5}
//
// Exactly one of Weights (the task is a weighted reconstruction, K =
// diag(weights)) and TaskMatrix (K itself, m × n) is given.
type Params struct {
	Weights    []float64   `json:"weights"`
	TaskMatrix [][]float64 `json:"task_matrix"`
	// Eps is the ε the encoder is designed for: its decoder is the LMMSE
	// decoder for the Laplace noise of LDP_ENCODE at this ε (a release at
	// another ε is still ε-LDP, decoded sub-optimally). Required.
	Eps float64 `json:"eps"`
	// Z caps the latent dimension (1..MaxZ; left out: min(DefaultZ, n)).
	Z int `json:"z" conf:"default"`
	// R, when given, fixes the design at the paper's c = 8r²/ε² (its
	// Theorem 1 recipe with r_max = R) instead of the c that minimises the
	// loss at the real noise; the noise and decoder are still the real
	// sensitivity's.
	R float64 `json:"r" conf:"default"`
}

var paramsSpec = jsonconf.Spec{
	Name: "task_aware_linear params",
	Noun: "key",
	Want: map[string]string{
		"weights":     "an array of numbers",
		"task_matrix": "an array of rows, each an array of numbers",
	},
	Omit: "omit the key for the default",
}

// ParseParams reads the params JSON. Checks that need the input dimension
// (the length of weights, the width of task_matrix, z ≤ n) are Fit's.
func ParseParams(raw []byte) (Params, error) {
	return jsonconf.Parse(&paramsSpec, raw, Params{}, Params.validate)
}

func (p Params) validate() error {
	switch {
	case p.Weights == nil && p.TaskMatrix == nil:
		return fmt.Errorf(`give the task: "weights" (K = diag(weights)) or "task_matrix" (K, one row per task output)`)
	case p.Weights != nil && p.TaskMatrix != nil:
		return fmt.Errorf(`give "weights" or "task_matrix", not both`)
	}
	if p.Weights != nil {
		if err := finiteNonZero("weights", p.Weights); err != nil {
			return err
		}
	} else {
		if len(p.TaskMatrix) == 0 {
			return fmt.Errorf("task_matrix is empty: want one row per task output")
		}
		nz := false
		for i, r := range p.TaskMatrix {
			if len(r) != len(p.TaskMatrix[0]) || len(r) == 0 {
				return fmt.Errorf("task_matrix row %d has %d values, row 0 has %d: want a rectangular matrix", i, len(r), len(p.TaskMatrix[0]))
			}
			for j, v := range r {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return fmt.Errorf("task_matrix[%d][%d] = %v: want a finite number", i, j, v)
				}
				nz = nz || v != 0
			}
		}
		if !nz {
			return fmt.Errorf("task_matrix is all zeros: the task would be constant")
		}
	}
	if p.Eps == 0 {
		return fmt.Errorf(`eps is required: the ε the encoder is designed for (the ε of its LDP_ENCODE releases; ε_x = λε for ldp_privatize)`)
	}
	if err := jsonconf.Positive("eps", p.Eps, MaxEps); err != nil {
		return err
	}
	if err := jsonconf.Int("z", p.Z, 0, MaxZ); err != nil {
		return fmt.Errorf("%w (the exact sensitivity enumerates 2^(z-1) sign vectors)", err)
	}
	if p.R != 0 {
		if err := jsonconf.Positive("r", p.R, math.MaxFloat64); err != nil {
			return err
		}
	}
	return nil
}

func finiteNonZero(key string, v []float64) error {
	if len(v) == 0 {
		return fmt.Errorf("%s is empty: want one weight per feature", key)
	}
	nz := false
	for i, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("%s[%d] = %v: want a finite number", key, i, x)
		}
		nz = nz || x != 0
	}
	if !nz {
		return fmt.Errorf("%s are all 0: the task would be constant", key)
	}
	return nil
}

// checkDim checks the params against the input dimension n and returns the
// latent cap.
func (p Params) checkDim(n int) (int, error) {
	if p.Weights != nil && len(p.Weights) != n {
		return 0, paramsSpec.Errorf("weights has %d values, the features have %d: want one weight per feature", len(p.Weights), n)
	}
	if p.TaskMatrix != nil && len(p.TaskMatrix[0]) != n {
		return 0, paramsSpec.Errorf("task_matrix has %d columns, the features have %d: want K with one column per feature", len(p.TaskMatrix[0]), n)
	}
	if p.Z > n {
		return 0, paramsSpec.Errorf("z = %d exceeds the input dimension %d", p.Z, n)
	}
	if p.Z == 0 {
		return min(DefaultZ, n), nil
	}
	return p.Z, nil
}
