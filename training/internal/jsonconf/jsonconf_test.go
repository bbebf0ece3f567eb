package jsonconf

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

type conf struct {
	N    *int     `json:"n"`
	X    *float64 `json:"x,omitempty"`
	Name *string  `json:"name"`
	On   *bool    `json:"on"`
	List *[]int   `json:"list"`
	Seed *uint64  `json:"seed"`
	Skip int      `json:"-"`
	_    int
}

var spec = Spec{Name: "test config", Noun: "key", Want: map[string]string{"seed": "a seed"}, Omit: "omit it for the default"}

func TestDecode(t *testing.T) {
	for _, raw := range []string{"", "  ", "null", " null\n"} {
		var c conf
		if err := spec.decode([]byte(raw), &c); err != nil || c.N != nil || c.Name != nil {
			t.Errorf("Decode(%q) = %v, %+v; want no error and nothing set", raw, err, c)
		}
	}
	var c conf
	if err := spec.decode([]byte(`{"n": 3, "x": 0.5, "name": "a", "on": true, "list": [1, 2], "seed": 7}`), &c); err != nil {
		t.Fatal(err)
	}
	if *c.N != 3 || *c.X != 0.5 || *c.Name != "a" || !*c.On || len(*c.List) != 2 || *c.Seed != 7 {
		t.Errorf("got %+v", c)
	}
}

func TestDecodeErrors(t *testing.T) {
	for raw, want := range map[string]string{
		`{"m": 1}`:         `test config: unknown key "m" (known: n, x, name, on, list, seed)`,
		`{"Skip": 1}`:      `test config: unknown key "Skip"`,
		`{"n": 1.5}`:       "test config: n: got JSON number 1.5, want an integer",
		`{"x": "a"}`:       "test config: x: got JSON string, want a number",
		`{"name": 1}`:      "test config: name: got JSON number, want a string",
		`{"on": 1}`:        "test config: on: got JSON number, want true or false",
		`{"list": "a"}`:    "test config: list: got JSON string, want an array of integers",
		`{"seed": -1}`:     "test config: seed: got JSON number -1, want a seed",
		`[1]`:              "test config: want a JSON object, got array",
		`{"n": 1} {}`:      "test config: trailing data after the JSON object",
		`{"n": 1} x`:       "test config: trailing data after the JSON object",
		`{"n": 1`:          "test config: truncated JSON",
		`{"n": 1,}`:        "test config: invalid JSON at byte ",
		`{"n": 1} }`:       "test config: trailing data",
		`{"n" 1}`:          "test config: invalid JSON at byte 6",
		`nul`:              "test config: ",
		`{"n": 1, "n":}`:   "test config: invalid JSON",
		`{"N": 1}`:         `test config: unknown key "N" (keys are case-sensitive; known: n, x, name, on, list, seed)`,
		`{"n": 1, "n": 2}`: `test config: key "n" given twice`,
	} {
		var c conf
		err := spec.decode([]byte(raw), &c)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Decode(%s) = %v, want an error starting %q", raw, err, want)
		}
	}
}

// plain is a config struct as Parse and Defaults take it.
type plain struct {
	N    int     `json:"n" conf:"default"`
	X    float64 `json:"x" conf:"default"`
	S    string  `json:"s" conf:"default"`
	List []int   `json:"list"`
	Seed uint64  `json:"seed"`
	Skip int     `json:"-" conf:"default"`
}

// Parse and Defaults.
func TestParse(t *testing.T) {
	def := plain{N: 5, X: 0.5, S: "a", List: []int{1}, Seed: 1, Skip: 3}
	ok := func(plain) error { return nil }
	for _, raw := range []string{"", "null", "{}", `{"n": null, "list": null}`} {
		if c, err := Parse(&spec, []byte(raw), def, ok); err != nil || !reflect.DeepEqual(c, def) {
			t.Errorf("Parse(%q) = %+v, %v; want the defaults", raw, c, err)
		}
	}
	c, err := Parse(&spec, []byte(`{"n": -2, "x": 2, "s": "b", "list": [], "seed": 0}`), def, ok)
	if want := (plain{N: -2, X: 2, S: "b", List: []int{}, Skip: 3}); err != nil || !reflect.DeepEqual(c, want) {
		t.Errorf("got %+v, %v; want %+v (range checks are validate's)", c, err, want)
	}
	for raw, want := range map[string]string{
		`{"x": 0}`:   "test config: x = 0: want a positive value (omit it for the default)",
		`{"n": 0}`:   "test config: n = 0: want a positive value (omit it for the default)",
		`{"s": ""}`:  `test config: s = "": want a non-empty string (omit it for the default)`,
		`{"m": 1}`:   `test config: unknown key "m" (known: n, x, s, list, seed)`,
		`{"n": 1.5}`: "test config: n: got JSON number 1.5, want an integer",
		`{"n": 9}`:   "test config: n = 9: want 1 ≤ n ≤ 8",
	} {
		c, err := Parse(&spec, []byte(raw), def, func(c plain) error { return Int("n", c.N, 1, 8) })
		if err == nil || err.Error() != want || !reflect.DeepEqual(c, plain{}) {
			t.Errorf("Parse(%s) = %+v, %v; want %q and no config", raw, c, err, want)
		}
	}
	if c := Defaults(plain{X: 2}, def); !reflect.DeepEqual(c, plain{N: 5, X: 2, S: "a", Skip: 3}) {
		t.Errorf("got %+v; want the zero fields tagged default filled, and only those", c)
	}
}

func TestChecks(t *testing.T) {
	for i, c := range []struct {
		err  error
		want string
	}{
		{Int("n", 0, 1, 8), "n = 0: want 1 ≤ n ≤ 8"},
		{Int("n", 8, 1, 8), ""},
		{Auto("n", 0, 8), ""},
		{Auto("n", -1, 8), "n = -1: want 1 ≤ n ≤ 8 (or omit it for the automatic rule)"},
		{Positive("lr", 0, 1), "lr = 0: want a number in (0, 1]"},
		{Positive("lr", math.NaN(), 1), "lr = NaN: want a number in (0, 1]"},
		{Positive("l", 2e9, 1e9), "l = 2e+09: want a number in (0, 1e+09]"},
		{Positive("lr", 1, 1), ""},
		{Sizes("hidden", []int{3, 0}, 2, 9), "hidden[1] = 0: want 1 ≤ hidden[1] ≤ 9"},
		{Sizes("hidden", []int{1, 1, 1}, 2, 9), "hidden has 3 layers: want at most 2"},
		{Sizes("hidden", nil, 2, 9), ""},
	} {
		if (c.err == nil) != (c.want == "") || (c.err != nil && c.err.Error() != c.want) {
			t.Errorf("check %d: %v, want %q", i, c.err, c.want)
		}
	}
}
