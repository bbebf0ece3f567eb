package classifier

import (
	"context"
	"math"
	"strings"
	"testing"
)

func TestKRRMatrix(t *testing.T) {
	for _, tc := range []struct {
		eps        float64
		k          int
		keep, flip float64
	}{
		{1.2, 4, math.Exp(1.2) / (math.Exp(1.2) + 3), 1 / (math.Exp(1.2) + 3)},
		{0, 3, 1.0 / 3, 1.0 / 3},
		{math.Inf(1), 5, 1, 0},
		{800, 2, 1, 0}, // e^800 overflows; the stable form does not
	} {
		r := KRRMatrix(tc.eps, tc.k)
		if len(r) != tc.k {
			t.Fatalf("KRRMatrix(%v, %d) has %d rows", tc.eps, tc.k, len(r))
		}
		for i := range r {
			for j := range r[i] {
				want := tc.flip
				if i == j {
					want = tc.keep
				}
				if math.Abs(r[i][j]-want) > 1e-15 {
					t.Errorf("KRRMatrix(%v, %d)[%d][%d] = %v, want %v", tc.eps, tc.k, i, j, r[i][j], want)
				}
			}
		}
		if _, err := checkChannel(r); err != nil {
			t.Errorf("KRRMatrix(%v, %d) is not a valid channel: %v", tc.eps, tc.k, err)
		}
	}
	for _, bad := range []struct {
		eps float64
		k   int
	}{{1, 1}, {1, 0}, {-1, 3}, {math.NaN(), 3}} {
		if r := KRRMatrix(bad.eps, bad.k); r != nil {
			t.Errorf("KRRMatrix(%v, %d) = %v, want nil", bad.eps, bad.k, r)
		}
	}
}

func TestValidation(t *testing.T) {
	good := func() (MarginalData, MarginalData) {
		aux := [][]float32{{0, 1}, {1, 0}, {2, 2}}
		tr := MarginalData{Aux: aux, Noisy: [][]float32{{0.5, 1}, {1, 1}}, Labels: []int{0, 2}, Scale: 1, R: KRRMatrix(1, 3)}
		return tr, MarginalData{Noisy: [][]float32{{0, 0}}, Labels: []int{1}}
	}
	nan := float32(math.NaN())
	cases := map[string]struct {
		mut  func(tr, va *MarginalData)
		want string
	}{
		"empty aux":        {func(tr, va *MarginalData) { tr.Aux = nil }, "train Aux is empty"},
		"empty noisy":      {func(tr, va *MarginalData) { tr.Noisy, tr.Labels = nil, nil }, "train Noisy is empty"},
		"ragged aux":       {func(tr, va *MarginalData) { tr.Aux[1] = []float32{1} }, "train Aux row 1 has 1 features, want 2"},
		"noisy dim":        {func(tr, va *MarginalData) { tr.Noisy[0] = []float32{1, 2, 3} }, "train Noisy row 0 has 3 features, want 2"},
		"nan aux":          {func(tr, va *MarginalData) { tr.Aux[2][1] = nan }, "train Aux[2][1] = NaN"},
		"inf noisy":        {func(tr, va *MarginalData) { tr.Noisy[1][0] = float32(math.Inf(1)) }, "train Noisy[1][0] = +Inf"},
		"label range":      {func(tr, va *MarginalData) { tr.Labels[1] = 3 }, "label 1 is 3: want 0 ≤ label < K = 3"},
		"negative label":   {func(tr, va *MarginalData) { tr.Labels[0] = -1 }, "label 0 is -1"},
		"label count":      {func(tr, va *MarginalData) { tr.Labels = tr.Labels[:1] }, "1 labels for 2 rows"},
		"scale 0":          {func(tr, va *MarginalData) { tr.Scale = 0 }, "train Scale = 0"},
		"scale negative":   {func(tr, va *MarginalData) { tr.Scale = -1 }, "train Scale = -1"},
		"scale NaN":        {func(tr, va *MarginalData) { tr.Scale = math.NaN() }, "train Scale = NaN"},
		"no R":             {func(tr, va *MarginalData) { tr.R = nil }, "R is empty"},
		"R not square":     {func(tr, va *MarginalData) { tr.R[1] = tr.R[1][:2] }, "R row 1 has 2 entries"},
		"R column sum":     {func(tr, va *MarginalData) { tr.R[0][0] += 0.1 }, "column 0 of R sums to"},
		"R negative":       {func(tr, va *MarginalData) { tr.R[0][1] = -0.1 }, "R[0][1] = -0.1"},
		"R 1x1":            {func(tr, va *MarginalData) { tr.R = [][]float64{{1}} }, "2 ≤ K"},
		"val dim":          {func(tr, va *MarginalData) { va.Noisy[0] = []float32{1} }, "val Noisy row 0 has 1 features, want 2"},
		"val K":            {func(tr, va *MarginalData) { va.R = KRRMatrix(1, 4) }, "both splits need the same K"},
		"val label":        {func(tr, va *MarginalData) { va.Labels[0] = 7 }, "val label 0 is 7"},
		"val aux dim":      {func(tr, va *MarginalData) { va.Aux = [][]float32{{1, 2, 3}} }, "val Aux row 0 has 3 features"},
		"val scale":        {func(tr, va *MarginalData) { va.Scale = math.Inf(1) }, "val Scale = +Inf"},
		"val labels count": {func(tr, va *MarginalData) { va.Labels = nil }, "val has 0 labels for 1 rows"},
	}
	for name, tc := range cases {
		tr, va := good()
		tc.mut(&tr, &va)
		_, err := TrainMarginal(context.Background(), DefaultConfig(), tr, va, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
	tr, va := good()
	if _, err := TrainMarginal(context.Background(), Config{Epochs: 1}, tr, va, nil); err != nil {
		t.Errorf("valid data: %v", err)
	}
	fd := ForwardData{X: [][]float32{{1, 2}, {3, 4}}, Labels: []int{0, 1}, R: KRRMatrix(1, 2)}
	fcases := map[string]struct {
		mut  func(tr, va *ForwardData)
		want string
	}{
		"empty":      {func(tr, va *ForwardData) { tr.X, tr.Labels = nil, nil }, "train X is empty"},
		"ragged":     {func(tr, va *ForwardData) { tr.X = [][]float32{{1, 2}, {3}} }, "train X row 1 has 1 features, want 2"},
		"nan":        {func(tr, va *ForwardData) { tr.X = [][]float32{{1, 2}, {3, nan}} }, "train X[1][1] = NaN"},
		"label":      {func(tr, va *ForwardData) { tr.Labels = []int{0, 2} }, "label 1 is 2"},
		"val dim":    {func(tr, va *ForwardData) { va.X, va.Labels = [][]float32{{1}}, []int{0} }, "val X row 0 has 1 features, want 2"},
		"R zero row": {func(tr, va *ForwardData) { tr.R = [][]float64{{1, 1}, {0, 0}} }, "label 1 is 1, which R can never report"},
		"R columns":  {func(tr, va *ForwardData) { tr.R = [][]float64{{0.5, 0.5}, {0.6, 0.5}} }, "column 0 of R sums to 1.1"},
	}
	for name, tc := range fcases {
		tr, va := fd, ForwardData{}
		tc.mut(&tr, &va)
		_, err := TrainForward(context.Background(), DefaultConfig(), tr, va, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("forward %s: error %v, want one containing %q", name, err, tc.want)
		}
	}
	if _, err := NaiveTrain(context.Background(), DefaultConfig(), fd.X, fd.Labels, nil, nil, 1, nil); err == nil || !strings.Contains(err.Error(), "K = 1") {
		t.Errorf("NaiveTrain K = 1: %v", err)
	}
	if _, err := TrainForward(context.Background(), Config{Epochs: -1}, fd, ForwardData{}, nil); err == nil || !strings.Contains(err.Error(), "epochs = -1") {
		t.Errorf("bad config: %v", err)
	}
}
