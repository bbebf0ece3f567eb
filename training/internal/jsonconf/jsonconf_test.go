package jsonconf

import (
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
		if err := spec.Decode([]byte(raw), &c); err != nil || c.N != nil || c.Name != nil {
			t.Errorf("Decode(%q) = %v, %+v; want no error and nothing set", raw, err, c)
		}
	}
	var c conf
	if err := spec.Decode([]byte(`{"n": 3, "x": 0.5, "name": "a", "on": true, "list": [1, 2], "seed": 7}`), &c); err != nil {
		t.Fatal(err)
	}
	if *c.N != 3 || *c.X != 0.5 || *c.Name != "a" || !*c.On || len(*c.List) != 2 || *c.Seed != 7 {
		t.Errorf("got %+v", c)
	}
}

func TestDecodeErrors(t *testing.T) {
	for raw, want := range map[string]string{
		`{"m": 1}`:       `test config: unknown key "m" (known: n, x, name, on, list, seed)`,
		`{"Skip": 1}`:    `test config: unknown key "Skip"`,
		`{"n": 1.5}`:     "test config: n: got JSON number 1.5, want an integer",
		`{"x": "a"}`:     "test config: x: got JSON string, want a number",
		`{"name": 1}`:    "test config: name: got JSON number, want a string",
		`{"on": 1}`:      "test config: on: got JSON number, want true or false",
		`{"list": "a"}`:  "test config: list: got JSON string, want an array of integers",
		`{"seed": -1}`:   "test config: seed: got JSON number -1, want a seed",
		`[1]`:            "test config: want a JSON object, got array",
		`{"n": 1} {}`:    "test config: trailing data after the JSON object",
		`{"n": 1} x`:     "test config: trailing data after the JSON object",
		`{"n": 1`:        "test config: truncated JSON",
		`{"n": 1,}`:      "test config: invalid JSON at byte ",
		`{"n": 1} }`:     "test config: trailing data",
		`{"n" 1}`:        "test config: invalid JSON at byte 6",
		`nul`:            "test config: ",
		`{"n": 1, "n":}`: "test config: invalid JSON",
	} {
		var c conf
		err := spec.Decode([]byte(raw), &c)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Decode(%s) = %v, want an error starting %q", raw, err, want)
		}
	}
}

func TestSetNonZero(t *testing.T) {
	n, x := 5, 0.5
	if err := SetNonZero(&spec, &n, nil, "n"); err != nil || n != 5 {
		t.Errorf("absent: %v, %d", err, n)
	}
	v := -2
	if err := SetNonZero(&spec, &n, &v, "n"); err != nil || n != -2 {
		t.Errorf("-2: %v, %d (range checks are the caller's)", err, n)
	}
	var zero float64
	err := SetNonZero(&spec, &x, &zero, "x")
	if want := "test config: x = 0: want a positive value (omit it for the default)"; err == nil || err.Error() != want || x != 0.5 {
		t.Errorf("zero: %v, %v; want %q and x unchanged", err, x, want)
	}
}
