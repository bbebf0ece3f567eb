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
	if !slices.Equal(c.Hidden, []int{50}) || c.Epochs != 100 || c.BatchSize != 128 || c.Patience != 5 || c.LR != 1e-3 ||
		c.Seed != 1 || c.MemoryBudget != 4<<30 {
		t.Fatalf("DefaultConfig() = %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	// Zero values mean defaults, except Hidden (empty = logistic regression).
	z := Config{}.withDefaults()
	if len(z.Hidden) != 0 || z.Epochs != 100 || z.BatchSize != 128 || z.Patience != 5 || z.LR != 1e-3 || z.MemoryBudget != 4<<30 {
		t.Fatalf("Config{}.withDefaults() = %+v", z)
	}
}

func TestParseConfig(t *testing.T) {
	for _, raw := range []string{"", "null", " {} "} {
		c, err := ParseConfig(json.RawMessage(raw))
		if err != nil || !slices.Equal(c.Hidden, []int{50}) || c.Epochs != 100 {
			t.Errorf("ParseConfig(%q) = %+v, %v; want the defaults", raw, c, err)
		}
	}
	c, err := ParseConfig(json.RawMessage(`{"hidden": [400, 150], "epochs": 7, "batch_size": 64, "patience": 2, "lr": 0.01, "seed": 0}`))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Hidden, []int{400, 150}) || c.Epochs != 7 || c.BatchSize != 64 || c.Patience != 2 || c.LR != 0.01 || c.Seed != 0 ||
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
