// Package jsonconf decodes a JSON object into a training package's config
// struct strictly — unknown keys, wrong types and trailing data are errors —
// and words every error for the user, naming the offending key.
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

// Decode decodes raw, a JSON object, into dst, a pointer to a struct whose
// fields are usually pointers (to tell an absent key from an explicit zero).
// Empty input and null leave dst alone (all defaults). Unknown keys, wrong
// types, syntax errors, truncation and data after the object are errors
// worded for the user; an unknown key's error lists the keys dst's json
// tags accept, in field order.
func (s *Spec) Decode(raw []byte, dst any) error {
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
	return nil
}

// SetNonZero copies *v into *dst when the key was given (v is not nil). An
// explicit zero is an error naming key: zero asks for the default, which is
// done by leaving the key out.
func SetNonZero[T int | float64](s *Spec, dst, v *T, key string) error {
	if v == nil {
		return nil
	}
	if *v == 0 {
		return s.Errorf("%s = 0: want a positive value (%s)", key, s.Omit)
	}
	*dst = *v
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
	t = t.Elem()
	var ks []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		ks = append(ks, name)
	}
	return ks
}
