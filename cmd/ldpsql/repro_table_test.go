package main

import (
	"strings"
	"testing"
	"time"
)

// The results table prints mean ± std (n) only over several trials: one trial has no error estimate,
// and "± 0.0" would read as no variance.
func TestReproTableIsHonestAboutTrials(t *testing.T) {
	cfg := reproConfig{trials: 1, eps: []float64{2}, mechs: []string{"vlm", "pca"}, nAux: 1, nPriv: 1, nTest: 1, lambda: 0.7}
	one := reproMarkdown(cfg, reproResults{"vlm": {"2": {0.5}}, "pca": {"2": {0.25}}}, time.Second)
	if strings.Contains(one, "±") || !strings.Contains(one, "| 50.0 | 25.0 |") || !strings.Contains(one, "1 trial") {
		t.Errorf("one trial:\n%s", one)
	}
	cfg.trials = 3
	three := reproMarkdown(cfg, reproResults{"vlm": {"2": {0.5, 0.6, 0.7}}, "pca": {"2": {0.2, 0.2, 0.2}}}, time.Second)
	if !strings.Contains(three, "| 60.0 ± 10.0 (3) | 20.0 ± 0.0 (3) |") || !strings.Contains(three, "over 3 trials") {
		t.Errorf("three trials:\n%s", three)
	}
}

// A run stopped after some of its trials says so: its table is not the one asked for.
func TestReproTableSaysWhenPartial(t *testing.T) {
	cfg := reproConfig{trials: 3, eps: []float64{2}, mechs: []string{"vlm"}, nAux: 1, nPriv: 1, nTest: 1, lambda: 0.7}
	md := reproMarkdown(cfg, reproResults{"vlm": {"2": {0.5, 0.7}}}, time.Second)
	if !strings.Contains(md, "Partial results: 2 of 3 trials finished") || !strings.Contains(md, "| 60.0 ± 14.1 (2) |") {
		t.Errorf("two of three trials:\n%s", md)
	}
	full := reproMarkdown(cfg, reproResults{"vlm": {"2": {0.5, 0.7, 0.6}}}, time.Second)
	if strings.Contains(full, "Partial") {
		t.Errorf("three of three trials:\n%s", full)
	}
}
