package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The results table prints mean ± std (n) only over several trials: one trial has no error estimate,
// and "± 0.0" would read as no variance.
func TestReproTableIsHonestAboutTrials(t *testing.T) {
	cfg := reproConfig{exp: &reproExperiments[0], trials: 1, eps: []float64{2}, mechs: []string{"vlm", "pca"}, nAux: 1, nPriv: 1, nTest: 1, lambda: 0.7}
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

// The protocol paragraph names the run's columns and how each is classified, and no column it lacks.
func TestReproProtocolNamesTheRunsColumns(t *testing.T) {
	exp := func(name string) *reproExperiment {
		for i := range reproExperiments {
			if reproExperiments[i].name == name {
				return &reproExperiments[i]
			}
		}
		t.Fatalf("no experiment %s", name)
		return nil
	}
	for _, c := range []struct {
		exp       string
		mechs     []string
		want, not []string
	}{
		{"data-collection", []string{"vlm", "pca", "laplace", "duchi"},
			[]string{"VLM d = 8 (l, ε_pre-training per thesis Table A.3, 12 epochs) and PCA d = 8 (same l) with the Laplace randomiser and the prior-marginalised classifier (Eq 4.11); Laplace (ε_x/784 per pixel) and Duchi on the raw pixels with the forward-corrected classifier (Eq 4.12)."}, nil},
		{"linear", []string{"vlm", "vlm_linear", "pca"},
			[]string{"and PCA d = 8 (same l) with the Laplace randomiser and the prior-marginalised classifier (Eq 4.11)."}, []string{"Duchi", "raw pixels"}},
		{"randomisers", []string{"vlm", "vlm_duchi", "pca_privunit"},
			[]string{"PCA d = 8 (same l), released and classified as the paragraph above says."}, []string{"prior-marginalised classifier (Eq 4.11)"}},
		{"aux-size", []string{"vlm_eta75", "privunit", "duchi"},
			[]string{"12 epochs) with the Laplace randomiser and the prior-marginalised classifier (Eq 4.11); PrivUnit and Duchi on the raw pixels"}, []string{"PCA"}},
	} {
		cfg := reproConfig{exp: exp(c.exp), trials: 1, eps: []float64{2}, mechs: c.mechs, nAux: 1, nPriv: 1, nTest: 1, lambda: 0.7, vlmEpochs: 12}
		md := reproMarkdown(cfg, reproResults{}, time.Second)
		for _, w := range c.want {
			if !strings.Contains(md, w) {
				t.Errorf("%s %v: lacks %q:\n%s", c.exp, c.mechs, w, md)
			}
		}
		for _, n := range c.not {
			if strings.Contains(md, n) {
				t.Errorf("%s %v: names %q, which the run lacks:\n%s", c.exp, c.mechs, n, md)
			}
		}
	}
}

// --resume of a finished run writes its tables again from results.json, with its wall time and without
// loading or running anything (here no data set is at hand); results.md lists each trial's accuracies
// beside the means.
func TestReproResumeOfFinishedRunRewritesTables(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("LDPSQL_DATA", dir) // no Fashion-MNIST: a run that loaded it would fail
	cfg := reproConfig{exp: &reproExperiments[0], out: dir, trials: 3, eps: []float64{2}, mechs: []string{"vlm", "pca"},
		nAux: 45000, nPriv: 15000, nTest: 10000, lambda: 0.7, vlmEpochs: 12, clfEpochs: 60, seed: 4}
	if _, err := writeReproResults(cfg, reproResults{"vlm": {"2": {0.25, 0.3, 0.2}}, "pca": {"2": {0.1, 0.15, 0.2}}}, 68*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "results.md")); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	if err := reproCmd([]string{"data-collection", "--eps", "2", "--mechanisms", "vlm,pca", "--trials", "3", "--seed", "4", "--resume", "--out", dir}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	md, err := os.ReadFile(filepath.Join(dir, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 25.0 ± 5.0 (3) | 15.0 ± 5.0 (3) |", "Wall time 1h8m0s.", "Per trial (seeds 4–6, in that order):", "| 2 | 25.0 / 30.0 / 20.0 | 10.0 / 15.0 / 20.0 |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("results.md lacks %q:\n%s", want, md)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "repro.duckdb")); err == nil {
		t.Error("the rewrite opened a database")
	}
}

// A run stopped after some of its trials says so: its table is not the one asked for.
func TestReproTableSaysWhenPartial(t *testing.T) {
	cfg := reproConfig{exp: &reproExperiments[0], trials: 3, eps: []float64{2}, mechs: []string{"vlm"}, nAux: 1, nPriv: 1, nTest: 1, lambda: 0.7}
	md := reproMarkdown(cfg, reproResults{"vlm": {"2": {0.5, 0.7}}}, time.Second)
	if !strings.Contains(md, "Partial results: 2 of 3 trials finished in every cell") || !strings.Contains(md, "| 60.0 ± 14.1 (2) |") {
		t.Errorf("two of three trials:\n%s", md)
	}
	full := reproMarkdown(cfg, reproResults{"vlm": {"2": {0.5, 0.7, 0.6}}}, time.Second)
	if strings.Contains(full, "Partial") {
		t.Errorf("three of three trials:\n%s", full)
	}
}

// --resume keeps every value of a stopped run, the cells of the trial it stopped in included, starts at
// the first trial some cell lacks, with that trial's seed; it takes more ε or columns than the file
// holds (their cells then lack every trial), refuses fewer, and refuses a results.json of another protocol.
func TestReproResumeKeepsFinishedTrials(t *testing.T) {
	dir := t.TempDir()
	cfg := reproConfig{exp: &reproExperiments[0], out: dir, trials: 3, eps: []float64{2, 4, 6}, mechs: []string{"vlm", "pca"}, nAux: 10, nPriv: 5, nTest: 3,
		lambda: 0.7, vlmEpochs: 20, clfEpochs: 60, seed: 7}
	// Trial 1 finished; trial 2 finished ε 2 and 4 of vlm and ε 2 of pca.
	stopped := reproResults{"vlm": {"2": {0.5, 0.9}, "4": {0.6, 0.65}, "6": {0.7}}, "pca": {"2": {0.4, 0.3}, "4": {0.45}, "6": {0.5}}}
	if _, err := writeReproResults(cfg, stopped, 90*time.Minute); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "results.md"))
	if !strings.Contains(string(md), "Partial results: 1 of 3 trials finished in every cell, 2 in some cells (those with 2 values)") {
		t.Errorf("results.md of the stopped run:\n%s", md)
	}
	again := cfg
	got, err := resumeRepro(&again)
	if err != nil {
		t.Fatal(err)
	}
	if again.first != 1 || again.prevWall != 90*time.Minute || again.seed != 7 {
		t.Errorf("first %d, prevWall %v, seed %d; want 1, 1h30m, 7", again.first, again.prevWall, again.seed)
	}
	for m, byEps := range stopped {
		for e, xs := range byEps {
			if !slices.Equal(got[m][e], xs) {
				t.Errorf("%s at ε %s kept %v, want %v", m, e, got[m][e], xs)
			}
		}
	}
	if counts := resumeCounts(again, got); counts != "vlm 1–2, pca 1–2 of 3" {
		t.Errorf("resumeCounts = %q", counts)
	}
	other := cfg
	other.vlmEpochs = 12
	if _, err := resumeRepro(&other); err == nil || !strings.Contains(err.Error(), "20 VLM") {
		t.Errorf("a run of other epochs resumed: %v", err)
	}
	// An ε and a column added: their cells lack every trial, so the run starts again at trial 1 (for them).
	more := cfg
	more.eps, more.mechs = []float64{2, 4, 6, 8}, []string{"vlm", "clm_tabular", "pca"}
	got, err = resumeRepro(&more)
	if err != nil || more.first != 0 {
		t.Fatalf("a run given ε 8 and clm_tabular: first %d, %v; want 0, nil", more.first, err)
	}
	if !slices.Equal(got["vlm"]["4"], []float64{0.6, 0.65}) || len(got["vlm"]["8"]) != 0 || len(got["clm_tabular"]["2"]) != 0 {
		t.Errorf("a run given ε 8 and clm_tabular kept %v", got)
	}
	if counts := resumeCounts(more, got); counts != "vlm 0–2, clm_tabular 0, pca 0–2 of 3" {
		t.Errorf("resumeCounts = %q", counts)
	}
	fewer := cfg
	fewer.mechs = []string{"vlm"}
	if _, err := resumeRepro(&fewer); err == nil || !strings.Contains(err.Error(), "with vlm,pca; this run asks for ε 2,4,6 with vlm, which would drop column(s) pca") {
		t.Errorf("a run that drops a column resumed: %v", err)
	}
	narrower := cfg
	narrower.eps = []float64{2, 6}
	if _, err := resumeRepro(&narrower); err == nil || !strings.Contains(err.Error(), "which would drop ε 4") {
		t.Errorf("a run that drops an ε resumed: %v", err)
	}
	done := cfg
	done.trials = 1
	if _, err := resumeRepro(&done); err == nil || !strings.Contains(err.Error(), "already holds 2 trial(s), more than --trials 1") {
		t.Errorf("a run holding more trials than asked for: %v", err)
	}
	stopped["pca"]["4"], stopped["pca"]["6"], stopped["vlm"]["6"] = []float64{0.45, 0.5}, []float64{0.5, 0.55}, []float64{0.7, 0.75}
	if _, err := writeReproResults(cfg, stopped, 90*time.Minute); err != nil {
		t.Fatal(err)
	}
	two := cfg
	two.trials = 2
	if _, err := resumeRepro(&two); err != nil || two.first != 2 {
		t.Errorf("a run holding every trial asked for: first %d, %v; want 2 (nothing left to run)", two.first, err)
	}
}

// A run that stopped in its first trial resumes too: it keeps every cell it finished and runs the rest
// of trial 1 (cfg.first 0). A results.json written before runs recorded their grid
// cannot tell an ε it stopped before from one it never had, and is refused as before.
func TestReproResumeOfFirstTrial(t *testing.T) {
	dir := t.TempDir()
	cfg := reproConfig{exp: &reproExperiments[0], out: dir, trials: 3, eps: []float64{2, 4, 6}, mechs: []string{"vlm", "pca"}, nAux: 10, nPriv: 5, nTest: 3,
		lambda: 0.7, vlmEpochs: 20, clfEpochs: 60, seed: 7}
	// Trial 1 finished ε 2, and stopped after vlm at ε 4 (a plugin call that timed out).
	if _, err := writeReproResults(cfg, reproResults{"vlm": {"2": {0.5}, "4": {0.6}}, "pca": {"2": {0.4}}}, 20*time.Minute); err != nil {
		t.Fatal(err)
	}
	again := cfg
	got, err := resumeRepro(&again)
	if err != nil {
		t.Fatal(err)
	}
	if again.first != 0 || again.prevWall != 20*time.Minute {
		t.Errorf("first %d, prevWall %v; want 0, 20m", again.first, again.prevWall)
	}
	want := reproResults{"vlm": {"2": {0.5}, "4": {0.6}, "6": {}}, "pca": {"2": {0.4}, "4": {}, "6": {}}}
	for m, byEps := range want {
		for e, xs := range byEps {
			if !slices.Equal(got[m][e], xs) {
				t.Errorf("%s at ε %s kept %v, want %v", m, e, got[m][e], xs)
			}
		}
	}
	// The same file without its grid, as runs wrote it before.
	path := filepath.Join(dir, "results.json")
	raw, _ := os.ReadFile(path)
	var old map[string]any
	if err := json.Unmarshal(raw, &old); err != nil {
		t.Fatal(err)
	}
	delete(old, "eps_grid")
	delete(old, "mechanisms")
	raw, _ = json.Marshal(old)
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	legacy := cfg
	if _, err := resumeRepro(&legacy); err == nil || !strings.Contains(err.Error(), "no finished trial of vlm at ε 6 (written before runs recorded") {
		t.Errorf("an old file with an empty cell resumed: %v", err)
	}
}

// repro barber's columns are the unit box released by rrB and classified by EM or by logistic
// regression on the releases; its table prints each total ε's per-pixel share (λε/784) and, in its
// text, the paper's own per-pixel and per-image ε, which ldpsql does not accept.
func TestReproBarberTable(t *testing.T) {
	exp, ok := experimentNamed("barber")
	if !ok || exp.classes() != 2 {
		t.Fatalf("barber: %v, %+v", ok, exp)
	}
	for mech, want := range map[string]reproColumn{
		"rr2_em":  {encoder: "unitbox", randomiser: "rr2", objective: "em"},
		"rr16_lr": {encoder: "unitbox", randomiser: "rr16", objective: "naive"},
	} {
		if got := columnOf(mech, exp); got != want {
			t.Errorf("columnOf(%q) = %+v, want %+v", mech, got, want)
		}
	}
	cfg := reproConfig{exp: exp, trials: 1, eps: []float64{8, math.Inf(1)}, mechs: exp.mechs, nPriv: 2000, nTest: 2000, lambda: 0.7}
	md := reproMarkdown(cfg, reproResults{"rr2_em": {"8": {0.5}, "inf": {0.9}}}, time.Second)
	for _, want := range []string{"| ε | ε_x per pixel | EM, B = 2 | LR, B = 2 | EM, B = 16 | LR, B = 16 |",
		"| 8 | 0.00714 | 50.0 | – | – | – |", "| ∞ (no privacy) | – | 90.0 |", "6,069, 5,433, 5,010 and 4,663", "D2 = 2000 training images"} {
		if !strings.Contains(md, want) {
			t.Errorf("results.md lacks %q:\n%s", want, md)
		}
	}
}

// repro clm --resume resumes each experiment that holds a results.json and starts the others afresh:
// here Table 5.1 is finished (its tables are written again, nothing is loaded) and Table 5.2 was never
// reached, so it runs without --resume and fails for want of the data set.
func TestReproSeriesResume(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("LDPSQL_DATA", dir) // no Fashion-MNIST: a run that loaded it fails
	exp, _ := experimentNamed("data-collection")
	table51 := filepath.Join(dir, "table-5.1")
	if err := os.MkdirAll(table51, 0o755); err != nil {
		t.Fatal(err)
	}
	mechs := strings.Split("clm,vlm,pca,privunit,duchi,laplace", ",")
	cfg := reproConfig{exp: exp, out: table51, trials: 1, eps: []float64{2}, mechs: mechs,
		nAux: 45000, nPriv: 15000, nTest: 10000, lambda: 0.7, vlmEpochs: 12, clfEpochs: 60, seed: 1}
	res := reproResults{}
	for _, m := range mechs {
		res[m] = map[string][]float64{"2": {0.3}}
	}
	if _, err := writeReproResults(cfg, res, 50*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(table51, "results.md")); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	err := reproCmd([]string{"clm", "--eps", "2", "--resume", "--out", dir}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "repro novel-class") || strings.Contains(err.Error(), "--resume") {
		t.Fatalf("want Table 5.2 run afresh and failing for want of data, got %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "every trial asked for is in "+filepath.Join(table51, "results.json")) {
		t.Errorf("Table 5.1 was not resumed:\n%s", stderr.String())
	}
	if _, err := os.Stat(filepath.Join(table51, "results.md")); err != nil {
		t.Errorf("Table 5.1's tables were not written again: %v", err)
	}
	if !strings.Contains(stderr.String(), "== repro novel-class --dataset fashion-mnist --out "+filepath.Join(dir, "table-5.2")+" --trials 1 --seed 1 --mechanisms clm,vlm,privunit,duchi,laplace --eps 2\n") {
		t.Errorf("Table 5.2 was not started afresh:\n%s", stderr.String())
	}
}

// A series' index gives an experiment's wall time from its results.json, which counts the time a
// resumed run spent before it stopped.
func TestReproWallTimeFromResults(t *testing.T) {
	dir := t.TempDir()
	if got := reproWallTime(dir, 3*time.Second); got != 3*time.Second {
		t.Errorf("no results.json: %v", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), []byte(`{"wall_s": 5400}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := reproWallTime(dir, 3*time.Second); got != 90*time.Minute {
		t.Errorf("results.json of 5400 s: %v", got)
	}
}

// The CLM column with tabular views trains the same CLM with the views the CLM makes of tabular rows,
// and results.md says so.
func TestReproCLMTabularColumn(t *testing.T) {
	exp, _ := experimentNamed("data-collection")
	if got, want := columnOf("clm_tabular", exp), (reproColumn{encoder: "clm_tabular", randomiser: "laplace", objective: "marginal"}); got != want {
		t.Errorf("columnOf(clm_tabular) = %+v, want %+v", got, want)
	}
	if !slices.Contains(reproMechanisms, "clm_tabular") || mechTitles["clm_tabular"] == "" {
		t.Error("clm_tabular is not a column --mechanisms accepts, with a title")
	}
	if notes := columnNotes([]string{"clm_tabular"}, 12); !strings.Contains(notes, "trained on the views it makes of tabular rows") {
		t.Errorf("results.md's notes on clm_tabular: %q", notes)
	}
}

// --eps lists: repro's experiments take inf (no privacy) and any positive ε, task-aware only ε in
// (0, 64]; each sorts them, and each names the value it refuses.
func TestParseEpsList(t *testing.T) {
	got, err := parseEpsList("10, inf,2", true, math.Inf(1))
	if err != nil || !slices.Equal(got, []float64{2, 10, math.Inf(1)}) {
		t.Errorf("repro's 10, inf,2: %v, %v", got, err)
	}
	got, err = parseEpsList("50,5", false, 64)
	if err != nil || !slices.Equal(got, []float64{5, 50}) {
		t.Errorf("task-aware's 50,5: %v, %v", got, err)
	}
	for _, c := range []struct {
		list     string
		allowInf bool
		most     float64
		want     string
	}{
		{"2,0", true, math.Inf(1), `"0" is not a positive number or inf`},
		{"2,x", true, math.Inf(1), `"x" is not a positive number or inf`},
		{"2,+Inf", true, math.Inf(1), `"+Inf" is not a positive number or inf`},
		{"5,100", false, 64, `"100" is not a number in (0, 64]`},
		{"5,inf", false, 64, `"inf" is not a number in (0, 64]`},
		{"5,-1", true, 64, `"-1" is not a number in (0, 64] or inf`},
	} {
		if _, err := parseEpsList(c.list, c.allowInf, c.most); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseEpsList(%q, %v, %g): %v, want %q", c.list, c.allowInf, c.most, err, c.want)
		}
	}
}
