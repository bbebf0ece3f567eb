package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The synthetic closed forms print the spec's Fig. 3 reference values (II.3, to 4 decimals).
func TestReproTaskAwareSynthetic(t *testing.T) {
	dir := t.TempDir()
	var out, errs strings.Builder
	if err := reproCmd([]string{"task-aware", "--dataset", "synthetic", "--out", dir}, &out, &errs); err != nil {
		t.Fatal(err)
	}
	if png, err := os.ReadFile(filepath.Join(dir, "loss.png")); err != nil || len(png) < 1000 || string(png[1:4]) != "PNG" {
		t.Errorf("loss.png: %d bytes, %v", len(png), err)
	}
	for _, want := range []string{
		"| setting 1 | [4 0 0 0] | 0.1 | 0.08 | 0.2963 | 1 | 0.9697 | 0.5517 |",
		"| setting 2 | [4 1 1 1] | 0.5 | 2 | 5.6667 | 1 | 6.2222 | 6.0000 |",
		"| setting 3 | [4 2 2 2] | 0.25 | 0.5 | 6.4951 | 4 | 6.6667 | 7.0000 |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no row %q in\n%s", want, out.String())
		}
	}
}

// A short breast-cancer run writes the table (one trial: no "±"), the JSON and the plot.
func TestReproTaskAwareBreastCancerWritesResults(t *testing.T) {
	dir := t.TempDir()
	var out, errs strings.Builder
	if err := reproCmd([]string{"task-aware", "--dataset", "breast-cancer", "--epochs", "3", "--eps", "20", "--out", dir}, &out, &errs); err != nil {
		t.Fatalf("%v\n%s", err, errs.String())
	}
	md, _ := os.ReadFile(filepath.Join(dir, "results.md"))
	if !strings.Contains(string(md), "| 20 | ") || strings.Contains(string(md), "±") || !strings.Contains(string(md), "1 trial") {
		t.Errorf("results.md:\n%s", md)
	}
	var res taResults
	raw, _ := os.ReadFile(filepath.Join(dir, "results.json"))
	if err := json.Unmarshal(raw, &res); err != nil || res.Done != 1 || len(res.Loss["task_aware"]["20"]) != 1 {
		t.Errorf("results.json %s: %v", raw, err)
	}
	if png, err := os.ReadFile(filepath.Join(dir, "loss.png")); err != nil || len(png) < 1000 {
		t.Errorf("loss.png: %d bytes, %v", len(png), err)
	}
	// --resume keeps the finished trial and runs the second (seed 2) only.
	if err := reproCmd([]string{"task-aware", "--dataset", "breast-cancer", "--epochs", "3", "--eps", "20", "--trials", "2", "--resume", "--out", dir}, &out, &errs); err != nil {
		t.Fatalf("--resume: %v\n%s", err, errs.String())
	}
	raw, _ = os.ReadFile(filepath.Join(dir, "results.json"))
	var res2 taResults
	if err := json.Unmarshal(raw, &res2); err != nil || res2.Done != 2 || len(res2.Loss["task_aware"]["20"]) != 2 || res2.Loss["task_aware"]["20"][0] != res.Loss["task_aware"]["20"][0] {
		t.Errorf("after --resume: %s: %v", raw, err)
	}
	if err := reproCmd([]string{"task-aware", "--epochs", "3", "--eps", "10", "--trials", "2", "--resume", "--out", dir}, &out, &errs); err == nil || !strings.Contains(err.Error(), "--resume") {
		t.Errorf("--resume with other ε: %v", err)
	}
	if err := reproCmd([]string{"task-aware", "--dataset", "mnist"}, &out, &errs); err == nil || !strings.Contains(err.Error(), "breast-cancer, fashion-mnist or synthetic") {
		t.Errorf("an unknown data set: %v", err)
	}
	if err := reproCmd([]string{"task-aware", "--designs", "task_aware,random"}, &out, &errs); err == nil || !strings.Contains(err.Error(), `unknown "random"`) {
		t.Errorf("an unknown design: %v", err)
	}
}
