// Command thirdparty-encoder is an example encoder plugin written by a third
// party against plugins/sdk alone: "mean pooling".
//
// It averages consecutive groups of Group features (784 MNIST pixels in
// groups of 16 → 49 values) and scales the result into the L1 ball of radius
// Radius, which it declares as its output set: z = ν(pool(x)) with
// ν(h) = h·min(1, Radius/‖h‖₁). It needs no model, so it implements neither
// Fitter nor Loader; it implements Decoder (each mean repeated Group times).
//
// See README.md for building and registering it.
package main

import (
	"fmt"
	"math"

	"github.com/ldpsql/ldpsql/plugins/sdk"
)

const (
	InputDim = 784
	Group    = 16
	Radius   = 10.0
)

type meanPool struct{}

func (meanPool) Describe() sdk.Description {
	return sdk.Description{
		Name:       "mean-pool",
		Version:    "0.1.0",
		InputDim:   InputDim,
		OutputDim:  InputDim / Group,
		OutputSet:  sdk.L1Ball(Radius),
		HasDecoder: true,
	}
}

func (meanPool) Encode(rows [][]float32) ([][]float32, error) {
	out := make([][]float32, len(rows))
	for i, x := range rows {
		h := make([]float64, InputDim/Group)
		norm := 0.0
		for j := range h {
			s := 0.0
			for _, v := range x[j*Group : (j+1)*Group] {
				s += float64(v)
			}
			h[j] = s / Group
			norm += math.Abs(h[j])
		}
		if math.IsNaN(norm) || math.IsInf(norm, 0) {
			return nil, fmt.Errorf("row %d is not finite", i)
		}
		scale := 1.0
		if norm > Radius {
			scale = Radius / norm * (1 - 1e-6) // margin for float32 rounding
		}
		z := make([]float32, len(h))
		for j := range h {
			z[j] = float32(h[j] * scale)
		}
		out[i] = z
	}
	return out, nil
}

func (meanPool) Decode(latents [][]float32) ([][]float32, error) {
	out := make([][]float32, len(latents))
	for i, z := range latents {
		x := make([]float32, InputDim)
		for k := range x {
			x[k] = z[k/Group]
		}
		out[i] = x
	}
	return out, nil
}

func main() { sdk.Serve(meanPool{}) }
