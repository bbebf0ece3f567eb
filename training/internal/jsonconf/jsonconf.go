// Package jsonconf is the one way a training package's Config is read from
// JSON and checked: strictly (unknown keys, wrong types and trailing data are
// errors), over the package's defaults, with every error worded for the user
// and naming the offending key.
package jsonconf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// A Spec says how one package's config errors read.
type Spec struct {
	// Name starts every error, as in "vlm config: …".
	Name string
	// Noun is what the user calls a key in "unknown <noun> …" ("key" or
	// "field").
	Noun string
	// Want overrides, per key, what a wrong type's error says the key
	// takes; absent keys get a description of the Go type.
	Want map[string]string
	// Omit is what an explicit zero's error tells the user to do for the
	// default, as in "(leave it out for the default)".
	Omit string
}

// Errorf returns an error reading "<Name>: " and the formatted message.
func (s *Spec) Errorf(format string, a ...any) error {
	return fmt.Errorf("%s: %s", s.Name, fmt.Sprintf(format, a...))
}

// Wrap returns nil for nil, else err behind "<Name>: " (still wrapped), for a
// package's own checks.
func (s *Spec) Wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", s.Name, err)
}

// A config field tagged `conf:"default"` reads its zero value as "the
// default": Defaults fills it in, and Parse refuses it given explicitly, since
// leaving the key out is how JSON asks for the default.
func isDefault(f reflect.StructField) bool { return f.Tag.Get("conf") == "default" }

// Defaults returns c, a config struct, with each zero field tagged
// `conf:"default"` set to def's.
func Defaults[T any](c, def T) T {
	v, d := reflect.ValueOf(&c).Elem(), reflect.ValueOf(def)
	for i := range v.NumField() {
		if isDefault(v.Type().Field(i)) && v.Field(i).IsZero() {
			v.Field(i).Set(d.Field(i))
		}
	}
	return c
}

// Parse returns c, a config struct holding the package's defaults, with the
// keys of raw, a JSON object, decoded over it, once validate passes. Empty
// input, null and null for a key keep the defaults. Every error, decode's,
// an explicit zero for a field tagged `conf:"default"` ("epochs = 0: want a
// positive value (<Omit>)") or validate's, reads "<Name>: …".
func Parse[T any](s *Spec, raw []byte, c T, validate func(T) error) (T, error) {
	var zero T
	v := reflect.ValueOf(&c).Elem()
	// Decode into a struct of pointers to c's fields, tags and all, so that a
	// nil pointer tells a key left out from one given as zero.
	var fields []reflect.StructField
	var index []int // fields[j] points to c's field index[j]
	for i := range v.NumField() {
		if f := v.Type().Field(i); f.IsExported() {
			fields = append(fields, reflect.StructField{Name: f.Name, Type: reflect.PointerTo(f.Type), Tag: f.Tag})
			index = append(index, i)
		}
	}
	p := reflect.New(reflect.StructOf(fields))
	if err := s.decode(raw, p.Interface()); err != nil {
		return zero, err
	}
	for j, i := range index {
		given := p.Elem().Field(j)
		if given.IsNil() {
			continue
		}
		if given.Elem().IsZero() && isDefault(fields[j]) {
			want := "a positive value"
			if given.Elem().Kind() == reflect.String {
				want = "a non-empty string"
			}
			z, _ := json.Marshal(given.Elem().Interface())
			return zero, s.Errorf("%s = %s: want %s (%s)", jsonName(fields[j]), z, want, s.Omit)
		}
		v.Field(i).Set(given.Elem())
	}
	if err := s.Wrap(validate(c)); err != nil {
		return zero, err
	}
	return c, nil
}

// decode decodes raw, a JSON object, into dst, a pointer to a struct.
// Empty input and null leave dst alone. Unknown keys, wrong types, syntax
// errors, truncation and data after the object are errors worded for the
// user; an unknown key's error lists the keys dst's json tags accept, in
// field order.
func (s *Spec) decode(raw []byte, dst any) error {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return s.jsonError(err, dst)
	}
	if _, err := dec.Token(); err != io.EOF {
		return s.Errorf("trailing data after the JSON object")
	}
	return s.exactKeys(raw, dst)
}

// exactKeys refuses what encoding/json lets through: a key that matches a known one only when case is
// ignored ("D" for "d"), and a key given twice (the last would win silently).
func (s *Spec) exactKeys(raw []byte, dst any) error {
	known := map[string]bool{}
	for _, k := range keys(dst) {
		known[k] = true
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil // decode has accepted it: not an object only when null
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return s.Errorf("invalid JSON: %v", err)
		}
		k, _ := t.(string)
		if !known[k] {
			return s.Errorf("unknown %s %q (keys are case-sensitive; known: %s)", s.Noun, k, strings.Join(keys(dst), ", "))
		}
		if seen[k] {
			return s.Errorf("%s %q given twice", s.Noun, k)
		}
		seen[k] = true
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return s.Errorf("invalid JSON: %v", err)
		}
	}
	return nil
}

// jsonError rewords encoding/json's errors so they name the key.
func (s *Spec) jsonError(err error, dst any) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		if te.Field == "" {
			return s.Errorf("want a JSON object, got %s", te.Value)
		}
		want, ok := s.Want[te.Field]
		if !ok {
			want = kind(te.Type.Kind())
		}
		return s.Errorf("%s: got JSON %s, want %s", te.Field, te.Value, want)
	case errors.As(err, &se):
		return s.Errorf("invalid JSON at byte %d: %v", se.Offset, err)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return s.Errorf("unknown %s %s (known: %s)", s.Noun,
			strings.TrimPrefix(err.Error(), "json: unknown field "), strings.Join(keys(dst), ", "))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return s.Errorf("truncated JSON")
	}
	return s.Errorf("%v", err)
}

// kind describes, for the user, the JSON a Go kind decodes from.
func kind(k reflect.Kind) string {
	switch k {
	case reflect.Int, reflect.Int64, reflect.Uint64:
		return "an integer"
	case reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		return "an array of integers"
	}
	return k.String()
}

// keys returns the JSON keys of the struct dst points to, in field order.
func keys(dst any) []string {
	t := reflect.TypeOf(dst)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil
	}
	var ks []string
	for i := range t.Elem().NumField() {
		if f := t.Elem().Field(i); f.IsExported() && jsonName(f) != "-" {
			ks = append(ks, jsonName(f))
		}
	}
	return ks
}

// jsonName is the key encoding/json reads f from ("-": none).
func jsonName(f reflect.StructField) string {
	if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" {
		return name
	}
	return f.Name
}

// The checks below word a package's range errors alike; their errors name the
// key and leave the "<Name>: " to Parse and Wrap.

// Int is nil if lo ≤ v ≤ hi, else the error "key = v: want lo ≤ key ≤ hi".
func Int(key string, v, lo, hi int) error {
	if v < lo || v > hi {
		return fmt.Errorf("%s = %d: want %d ≤ %s ≤ %d", key, v, lo, key, hi)
	}
	return nil
}

// Auto is Int(key, v, 1, hi) that also takes 0, which asks for a value
// chosen from the data when training starts.
func Auto(key string, v, hi int) error {
	if err := Int(key, v, 1, hi); v != 0 && err != nil {
		return fmt.Errorf("%w (or omit it for the automatic rule)", err)
	}
	return nil
}

// Positive is nil if 0 < v ≤ hi (so not NaN), else the error
// "key = v: want a number in (0, hi]".
func Positive(key string, v, hi float64) error {
	if !(v > 0 && v <= hi) {
		return fmt.Errorf("%s = %v: want a number in (0, %g]", key, v, hi)
	}
	return nil
}

// Sizes checks a list of layer sizes: at most maxLen of them, each in
// 1..hi.
func Sizes(key string, s []int, maxLen, hi int) error {
	if len(s) > maxLen {
		return fmt.Errorf("%s has %d layers: want at most %d", key, len(s), maxLen)
	}
	for i, v := range s {
		if err := Int(fmt.Sprintf("%s[%d]", key, i), v, 1, hi); err != nil {
			return err
		}
	}
	return nil
}
