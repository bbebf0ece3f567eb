package classifier

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig()
	if !slices.Equal(c.Hidden, []int{50}) || c.Epochs != 0 || c.BatchSize != 128 || c.Patience != 0 || c.Restarts != 0 || c.LR != 1e-3 ||
		c.Seed != 1 || c.MemoryBudget != 4<<30 {
		t.Fatalf("DefaultConfig() = %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	// Zero values mean defaults, except Hidden (empty = logistic regression).
	z := Config{}.withDefaults()
	if len(z.Hidden) != 0 || z.Epochs != 0 || z.BatchSize != 128 || z.Patience != 0 || z.LR != 1e-3 || z.MemoryBudget != 4<<30 {
		t.Fatalf("Config{}.withDefaults() = %+v", z)
	}
}

func TestParseConfig(t *testing.T) {
	for _, raw := range []string{"", "null", " {} "} {
		c, err := ParseConfig(json.RawMessage(raw))
		if err != nil || !slices.Equal(c.Hidden, []int{50}) || c.Epochs != 0 || c.Patience != 0 || c.Restarts != 0 {
			t.Errorf("ParseConfig(%q) = %+v, %v; want the defaults", raw, c, err)
		}
	}
	c, err := ParseConfig(json.RawMessage(`{"hidden": [400, 150], "epochs": 7, "batch_size": 64, "patience": 2, "restarts": 4, "lr": 0.01, "seed": 0}`))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Hidden, []int{400, 150}) || c.Epochs != 7 || c.BatchSize != 64 || c.Patience != 2 || c.Restarts != 4 || c.LR != 0.01 || c.Seed != 0 ||
		c.MemoryBudget != DefaultMemoryBudget {
		t.Errorf("got %+v", c)
	}
	c, err = ParseConfig(json.RawMessage(`{"hidden": []}`))
	if err != nil || c.Hidden == nil || len(c.Hidden) != 0 {
		t.Errorf(`{"hidden": []}: %+v, %v; want logistic regression`, c, err)
	}
	bad := map[string]string{
		`{"epoch": 3}`:         `unknown key "epoch"`,
		`{"memory_budget": 1}`: `unknown key "memory_budget"`,
		`{"epochs": "3"}`:      "epochs",
		`{"epochs": 0}`:        "epochs = 0",
		`{"epochs": -1}`:       "epochs = -1",
		`{"batch_size": 0}`:    "batch_size = 0",
		`{"patience": -2}`:     "patience = -2",
		`{"patience": 0}`:      "patience = 0",
		`{"restarts": 0}`:      "restarts = 0",
		`{"restarts": 65}`:     "restarts = 65",
		`{"lr": 0}`:            "lr = 0",
		`{"lr": 2}`:            "lr = 2",
		`{"hidden": [0]}`:      "hidden[0] = 0",
		`{"hidden": [50, -1]}`: "hidden[1] = -1",
		`{"hidden": 50}`:       "hidden",
		`{"seed": -1}`:         "seed",
		`{} {}`:                "trailing data",
		`{"epochs": 3`:         "truncated",
		`[1]`:                  "JSON object",
		`{"hidden": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}`: "17 layers",
	}
	for raw, want := range bad {
		_, err := ParseConfig(json.RawMessage(raw))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseConfig(%s): error %v, want one mentioning %q", raw, err, want)
		}
	}
	if err := (Config{LR: math.NaN()}).Validate(); err == nil || !strings.Contains(err.Error(), "lr") {
		t.Errorf("NaN lr: %v", err)
	}
}

// Resolve's automatic values over a range of table sizes: enough Adam steps
// and patience in steps (not epochs), the thesis's 100 epochs and patience 5
// on large tables, restarts only for the marginal objective on small
// validated tables, and explicit values kept.
func TestResolveScalesWithRows(t *testing.T) {
	for _, n := range []int{10, 50, 127, 128, 129, 500, 539, 1000, 3839, 3840, 4999, 5000, 7680, 13500, 60000, 1 << 20} {
		for _, bs := range []int{1, 32, 128, 1000} {
			c := Config{BatchSize: bs, LR: 1e-3}.Resolve(n, true, ObjectiveMarginal)
			steps := (n + bs - 1) / bs
			if c.Epochs < AutoMinEpochs || c.Epochs > AutoMaxEpochs || (c.Epochs < AutoMaxEpochs && c.Epochs*steps < AutoMinSteps) {
				t.Errorf("n %d, batch %d: %d epochs of %d steps", n, bs, c.Epochs, steps)
			}
			if c.Patience < AutoMinPatience || c.Patience*steps < AutoPatienceSteps || (c.Patience > AutoMinPatience && (c.Patience-1)*steps >= AutoPatienceSteps) {
				t.Errorf("n %d, batch %d: patience %d epochs of %d steps", n, bs, c.Patience, steps)
			}
			if want := map[bool]int{true: AutoRestarts, false: 1}[n < AutoRestartRows]; c.Restarts != want {
				t.Errorf("n %d: %d restarts, want %d", n, c.Restarts, want)
			}
			if err := c.validate(); err != nil {
				t.Errorf("n %d, batch %d: %v", n, bs, err)
			}
		}
	}
	if c := (Config{BatchSize: 128}).Resolve(13500, true, ObjectiveMarginal); c.Epochs != 100 || c.Patience != 5 || c.Restarts != 1 {
		t.Errorf("Fashion-MNIST's 13,500 rows: %d epochs, patience %d, %d restarts; want the thesis's 100, 5 and one start", c.Epochs, c.Patience, c.Restarts)
	}
	if c := (Config{BatchSize: 128}).Resolve(485, true, ObjectiveForward); c.Restarts != 1 {
		t.Errorf("forward objective: %d restarts, want 1", c.Restarts)
	}
	if c := (Config{BatchSize: 128, Restarts: 5}).Resolve(485, false, ObjectiveMarginal); c.Restarts != 1 {
		t.Errorf("no validation split: %d restarts, want 1 (nothing to choose by)", c.Restarts)
	}
	if c := (Config{BatchSize: 128, Epochs: 7, Patience: 2, Restarts: 4}).Resolve(485, true, ObjectiveMarginal); c.Epochs != 7 || c.Patience != 2 || c.Restarts != 4 {
		t.Errorf("explicit values changed: %+v", c)
	}
}
