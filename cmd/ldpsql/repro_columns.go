package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The experiments `ldpsql repro` runs with the data-collection protocol (repro.go): each is a set of
// columns — a mechanism trained on D1, a randomiser, a classifier objective — over the same splits,
// privatisation and test, so they share one implementation and differ only in their columns and text.

// reproExperiment is one thesis table reproduced by the data-collection protocol.
type reproExperiment struct {
	name     string   // the subcommand
	table    string   // the thesis table it reproduces
	title    string   // results.md's heading and the plot's title
	mechs    []string // the columns run when --mechanisms is left out
	eps      string   // the ε list when --eps is left out
	protocol string   // what differs from Table 4.1's protocol (results.md)
	// privateTest: the test images are privatised too (features only, at ε_x = λε, through the column's
	// mechanism and randomiser) and classified by a classifier of the releases (Eq 4.12).
	privateTest bool
	// novel: the class (Fashion-MNIST's 9, ankle boot, as the thesis's MNIST 9) left out of D1; D2 and the
	// test images become that class against the rest, balanced, K = 2. 0: none.
	novel int
	// pair: only these two Fashion-MNIST classes are used, relabelled 0 and 1 (K = 2), with no D1 (the
	// columns' box is the pixels' public range [0, 1]); nil: all ten classes.
	pair []int
	// quickEps: the ε list of --quick ("" for 2, 10 and ∞ where the experiment has ∞).
	quickEps string
}

// classes is the number of labels the experiment's classifiers tell apart.
func (e *reproExperiment) classes() int {
	if e.novel > 0 || e.pair != nil {
		return 2
	}
	return 10
}

// pixels is the number of coordinates of a raw-pixel release (Fashion-MNIST's 28 × 28).
const pixels = 784

var reproExperiments = []reproExperiment{
	{name: "data-collection", table: "Table 4.1", title: "Data collection on Fashion-MNIST: test accuracy (%) on clean test images",
		mechs: []string{"vlm", "pca", "laplace", "duchi"}, eps: "1,2,4,6,8,10,inf"},
	{name: "linear", table: "Table 4.4", title: "VLM vs linear VLM vs PCA on Fashion-MNIST (all d = 8): test accuracy (%) on clean test images",
		mechs: []string{"vlm", "vlm_linear", "pca"}, eps: "1,2,4,6,8,10,inf",
		protocol: "The linear VLM is the VLM with a linear encoder and decoder (no hidden layers), trained like the VLM; PCA keeps the same l."},
	{name: "feature-level", table: "Table 4.2", title: "Releases classified as latents or decoded to pixels, Fashion-MNIST: test accuracy (%) on clean test images",
		mechs: []string{"vlm", "vlm_feature", "privunit", "duchi", "laplace"}, eps: "1,2,4,6,8,10,inf",
		protocol: "VLM (feature): the same VLM releases are decoded to pixels (LDP_DECODE, the thesis's x̃ = decoder(z̃)) and a classifier of " +
			"pixels is trained on them with the forward-corrected objective (Eq 4.12), then reads the clean test images (the raw pixels' " +
			"box, fitted on D1). At ε = ∞ it is trained on releases at ε = 64 decoded (the largest ε LDP_ENCODE accepts; SQL has no clean " +
			"encoding: nearly clean for an 8-d latent)."},
	{name: "aux-size", table: "Table 4.3", title: "Auxiliary-set size on Fashion-MNIST: test accuracy (%) on clean test images",
		mechs: []string{"vlm_eta75", "vlm_eta50", "vlm_eta25", "vlm_eta10", "privunit", "duchi"}, eps: "1,2,4,6,8,10",
		protocol: "η is the fraction of the training images (D1 + D2 of Table 4.1) that trains the VLM (its D1, unlabelled); the rest is its D2, " +
			"privatised and classified as in Table 4.1 (η = 0.75 is Table 4.1's split). The raw-pixel baselines (PrivUnit, Duchi) privatise all the " +
			"training images as their D2, as the thesis's benchmarks use 100 % of the training set; Laplace is left out, as in the thesis."},
	{name: "private-inference", table: "Table 4.7", title: "Classifying privatised test points, Fashion-MNIST: test accuracy (%)",
		mechs: []string{"vlm", "privunit", "duchi", "laplace", "bound"}, eps: "1,2,4,6,8,10,inf", privateTest: true,
		protocol: "Each column's classifier is trained on D2's releases with the forward-corrected objective (Eq 4.12: p(y|z̃)), and the test " +
			"images are released like D2's features (ε_test = λε, no label) and classified as releases. The upper bound is LDP_ACCURACY_BOUND(ε_test, 10): " +
			"the best accuracy any classifier can reach on a release at ε_test (thesis §4.4). The ∞ row classifies clean test images."},
	{name: "novel-class", table: "Table 4.5", title: "A class the mechanism never saw, Fashion-MNIST: test accuracy (%), ankle boot vs the rest",
		mechs: []string{"vlm", "privunit", "duchi", "laplace"}, eps: "1,2,4,6,8,10,inf", novel: 9,
		protocol: "D1 holds no ankle boots (class 9): the mechanisms never see one. D2 and the clean test images are relabelled ankle boot (1) vs " +
			"the rest (0) and balanced (every ankle boot and as many others), and privatised with K = 2. Every classifier uses the " +
			"forward-corrected objective (Eq 4.12), since D1's prior has no ankle boots; chance is 50 %."},
	{name: "randomisers", table: "the thesis's future work (ch. 6)", title: "Randomisers on learned latents, Fashion-MNIST: test accuracy (%) on clean test images",
		mechs: []string{"vlm", "vlm_duchi", "vlm_privunit", "pca", "pca_duchi", "pca_privunit"}, eps: "1,2,4,6,8,10,inf",
		protocol: "The same trained VLM and fitted PCA at each ε release their latents through Laplace, Duchi or PrivUnit at the same ε_x. " +
			"Laplace releases are classified with the prior-marginalised objective (Eq 4.11), which models Laplace noise; Duchi and PrivUnit " +
			"releases with the forward-corrected objective (Eq 4.12), which models only the label noise."},
	{name: "barber", table: "Barber (seed 002) §6", title: "Randomised response per pixel, Fashion-MNIST T-shirt/top vs shirt: test accuracy (%) on clean test images",
		mechs: []string{"rr2_em", "rr2_lr", "rr16_em", "rr16_lr"}, eps: "8,16,32,64,inf", quickEps: "16,64,inf", pair: []int{0, 6},
		protocol: "Barber's discrete-pixel experiment (MNIST 7 vs 9 there) on two Fashion-MNIST classes that are hard to tell apart, T-shirt/top (0) " +
			"and shirt (6). The pixels, in [0, 1], pass through the identity mechanism on the box [0, 1]^784 and are released by per-pixel " +
			"randomised response on B bins (randomiser rrB: each pixel's bin kept with probability 1 − F, else one of the other B − 1 " +
			"uniformly, at ε_x/784 per pixel, so the image's release is ε_x-LDP by composition; the release is the bin centre); the label " +
			"by k-RR at ε_y. EM: TRAIN_NOISY_CLASSIFIER's 'em' objective (logistic regression fitted to the spread likelihood by " +
			"importance-sampled EM, with the prior learnt, Barber's \"SD learn prior\"), whose channels come from the table's metadata. " +
			"LR: logistic regression on the releases as if they were clean (Barber's \"log reg noise\": objective 'clean', no hidden " +
			"layer, on a copy of the releases without their metadata). The ∞ row is logistic regression on the clean pixels and labels " +
			"(Barber's \"log reg\"), the same for every column.\n\n" +
			"The paper's own setting is not run: 256 states per pixel with flip rates 0.1, 0.2, 0.3, 0.4 cost 7.74, 6.93, 6.39, 5.95 per " +
			"pixel (ε = ln((1 − p)·255/p)), 6,069, 5,433, 5,010 and 4,663 for a 784-pixel image (the spec's §I.3.5), far above the ε = 64 " +
			"ldpsql accepts for a release; its Gaussian variant (σ² = 0.1 per pixel, 94.4 % against 95.5 % clean on MNIST 7 vs 9) gives " +
			"no pure ε-LDP at all (about ε = 429 at δ = 10⁻⁵ by the classic bound). Here the same idea is quantised to fewer states at a " +
			"smaller per-pixel ε, which the table prints beside each total.\n\n" +
			"What a release keeps of a pixel: at ε = 64 (ε_x/784 = 0.057) B = 2 keeps its bin with probability 0.514, so a release's " +
			"expected pixel moves only 1 − FB/(B − 1) = 0.029 of the way from 0.5 towards the true bin's centre (B = 16: 0.0037; at ε = 8 " +
			"0.0036 and 0.0004), against 0.6–0.9 in Barber's runs. EM's estimate is consistent because it undoes that attenuation, which " +
			"multiplies the noise of a few thousand releases by the same large factor; logistic regression on the releases keeps the " +
			"attenuated, low-variance direction. Where EM falls below LR here, that variance is the likely reason (not measured apart): the spread estimator needs far more " +
			"rows, or more ε per pixel, than these."},
}

func experimentNamed(name string) (*reproExperiment, bool) {
	for i := range reproExperiments {
		if reproExperiments[i].name == name {
			return &reproExperiments[i], true
		}
	}
	return nil, false
}

func experimentNames() []string {
	var out []string
	for _, e := range reproExperiments {
		out = append(out, e.name)
	}
	return out
}

// reproMechanisms are the columns --mechanisms accepts.
var reproMechanisms = []string{"vlm", "pca", "laplace", "duchi", "privunit", "vlm_cdp5", "vlm_cdp1", "clm", "clm_tabular", "vlm_linear",
	"vlm_duchi", "vlm_privunit", "pca_duchi", "pca_privunit", "vlm_eta75", "vlm_eta50", "vlm_eta25", "vlm_eta10", "bound", "vlm_feature",
	"rr2_em", "rr2_lr", "rr16_em", "rr16_lr"}

var mechTitles = map[string]string{"vlm": "VLM", "pca": "PCA", "laplace": "Laplace", "duchi": "Duchi", "privunit": "PrivUnit",
	"vlm_cdp5": "VLM (ε_CDP = 5)", "vlm_cdp1": "VLM (ε_CDP = 1)", "clm": "CLM", "clm_tabular": "CLM (tabular views)", "vlm_linear": "Linear VLM",
	"vlm_duchi": "VLM + Duchi", "vlm_privunit": "VLM + PrivUnit", "pca_duchi": "PCA + Duchi", "pca_privunit": "PCA + PrivUnit",
	"vlm_eta75": "VLM η = .75", "vlm_eta50": "VLM η = .50", "vlm_eta25": "VLM η = .25", "vlm_eta10": "VLM η = .10",
	"bound": "Upper bound", "vlm_feature": "VLM (feature)",
	"rr2_em": "EM, B = 2", "rr2_lr": "LR, B = 2", "rr16_em": "EM, B = 16", "rr16_lr": "LR, B = 16"}

// reproColumn is what a column does: which encoder (trained or fitted on its D1), which randomiser
// releases its D2, and which objective classifies the releases.
type reproColumn struct {
	encoder    string // "vlm", "vlm_linear", "vlm_cdp5", "vlm_cdp1", "clm", "clm_tabular", "pca", "box" (the raw pixels' box fitted on D1) or "unitbox" ([0, 1]^784)
	randomiser string // "laplace", "duchi", "privunit" or "rrB"
	// objective: "marginal" (Eq 4.11, Laplace latents only), "forward" (Eq 4.12), "em" (spread EM) or
	// "naive" (logistic regression on the releases as if clean)
	objective string
	eta       float64 // the fraction of the training images in its D1; 0: Table 4.1's split
	allD2     bool    // a raw-pixel baseline of aux-size: every training image is its D2
	decode    bool    // feature level: the releases are decoded (LDP_DECODE) and classified as pixels
}

// columnOf parses a --mechanisms name ("bound" is not a column of releases: the trial computes it).
func columnOf(mech string, exp *reproExperiment) reproColumn {
	c := columnOfName(mech, exp)
	if exp.privateTest || exp.novel > 0 {
		c.objective = "forward"
	}
	return c
}

func columnOfName(mech string, exp *reproExperiment) reproColumn {
	switch mech {
	case "laplace", "duchi", "privunit":
		return reproColumn{encoder: "box", randomiser: mech, objective: "forward", allD2: exp.name == "aux-size"}
	}
	if rnd, obj, ok := strings.Cut(mech, "_"); ok && (obj == "em" || obj == "lr") && strings.HasPrefix(rnd, "rr") {
		return reproColumn{encoder: "unitbox", randomiser: rnd, objective: map[string]string{"em": "em", "lr": "naive"}[obj]}
	}
	if mech == "vlm_feature" {
		return reproColumn{encoder: "vlm", randomiser: "laplace", objective: "forward", decode: true}
	}
	if base, eta, ok := strings.Cut(mech, "_eta"); ok {
		v, _ := strconv.Atoi(eta)
		return reproColumn{encoder: base, randomiser: "laplace", objective: "marginal", eta: float64(v) / 100}
	}
	for _, r := range []string{"duchi", "privunit"} {
		if base, ok := strings.CutSuffix(mech, "_"+r); ok {
			return reproColumn{encoder: base, randomiser: r, objective: "forward"}
		}
	}
	return reproColumn{encoder: mech, randomiser: "laplace", objective: "marginal"}
}

// needsBox reports whether a column privatises the raw pixels (through the identity box fitted on D1).
func needsBox(mechs []string, exp *reproExperiment) bool {
	return slices.ContainsFunc(mechs, func(m string) bool {
		c := columnOf(m, exp)
		return m != "bound" && (c.encoder == "box" || c.decode)
	})
}

// columnNotes are results.md's paragraphs on the columns whose settings Table 4.1's text does not cover.
func columnNotes(mechs []string, epochs int) string {
	var b strings.Builder
	if slices.Contains(mechs, "clm") {
		fmt.Fprintf(&b, "CLM (thesis ch. 5): d = %d and l per thesis Table A.3 (the VLM's latent), ε_pre-training per thesis Table B.1 (clean inference) and %g where it has none (ε ≥ 8), "+
			"an MLP encoder on image views (padded crop, flip, brightness/contrast), NT-Xent τ = 0.5, %d epochs (the VLM's), with the Laplace "+
			"randomiser, classified like the VLM.\n\n", reproCLMD, reproCLMWeakNoise, epochs)
	}
	if slices.Contains(mechs, "clm_tabular") {
		fmt.Fprintf(&b, "CLM (tabular views): the CLM (d = %d, l per thesis Table A.3, ε_pre-training per thesis Table B.1 and %g where it has none, "+
			"an MLP encoder, NT-Xent τ = 0.5, %d epochs, the Laplace randomiser, classified like the VLM) trained on the views it makes of "+
			"tabular rows: each pixel replaced with probability 0.3 by the same pixel of another image, then Gaussian noise of 0.1 of the "+
			"pixel's standard deviation (no crop, flip or brightness/contrast).\n\n", reproCLMD, reproCLMWeakNoise, epochs)
	}
	if slices.Contains(mechs, "privunit") {
		b.WriteString("PrivUnit: PrivUnit₂ with ScalarDP (Bhowmick et al. 2019) on the raw pixels' box, classified with the forward-corrected objective.\n\n")
	}
	return b.String()
}

// etaSplit returns how many of the n training images are an η column's D1.
func etaSplit(eta float64, n int) int { return int(math.Round(eta * float64(n))) }

// reproAllCmd runs every experiment of the data-collection protocol, one after another, each into
// --out/NAME with its default columns, and writes an index README.md.
func reproAllCmd(args []string, stdout, stderr io.Writer) error {
	var runs []reproSeriesRun
	for _, exp := range reproExperiments {
		runs = append(runs, reproSeriesRun{dir: exp.name, exp: exp.name, table: exp.table})
	}
	return reproSeries("repro all", "Run every experiment of the data-collection protocol ("+strings.Join(experimentNames(), ", ")+
		"), each into --out/NAME, with the flags given (every other flag at each experiment's default).",
		"  bin/ldpsql repro all --dataset fashion-mnist --quick --out /tmp/repro-all\n", "repro-all",
		"\nNot here: `repro task-aware` (its own protocol, WDBC).\n", runs, args, stdout, stderr)
}

// reproCLMColumns are the columns of thesis Tables 5.1–5.3 (CLM, PrivUnit, Duchi, Laplace), with the
// VLM beside the CLM (#14's comparison) and PCA in Table 5.1 (the baseline a learnt encoder must beat).
const reproCLMColumns = "clm,vlm,privunit,duchi,laplace"

// reproCLMCmd runs the thesis's chapter-5 tables for the CLM on Fashion-MNIST (no CIFAR-10 here): Table
// 5.1 on data-collection's protocol, 5.2 on novel-class's, 5.3 on private-inference's, each into
// --out/table-5.N.
func reproCLMCmd(args []string, stdout, stderr io.Writer) error {
	runs := []reproSeriesRun{
		{dir: "table-5.1", exp: "data-collection", table: "Table 5.1", mechanisms: "clm,vlm,pca,privunit,duchi,laplace"},
		{dir: "table-5.2", exp: "novel-class", table: "Table 5.2", mechanisms: reproCLMColumns},
		{dir: "table-5.3", exp: "private-inference", table: "Table 5.3", mechanisms: reproCLMColumns + ",bound"},
	}
	return reproSeries("repro clm", "Run thesis Tables 5.1 (data collection), 5.2 (novel class) and 5.3 (privatised test points) for the "+
		"contrastive Laplace mechanism on Fashion-MNIST (the thesis's CIFAR-10 is not available here), with the VLM, PrivUnit, Duchi and "+
		"Laplace beside it (and PCA in Table 5.1), each into --out/table-5.N on the protocol of repro data-collection, novel-class and "+
		"private-inference.", "  bin/ldpsql repro clm --dataset fashion-mnist --trials 3 --out repro-clm\n", "repro-clm", "", runs, args, stdout, stderr)
}

// reproWallTime is the wall time an experiment's results.json records (a resumed run's includes the
// time before it stopped), or measured where the file holds none.
func reproWallTime(dir string, measured time.Duration) time.Duration {
	raw, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return measured
	}
	var res struct {
		WallS float64 `json:"wall_s"`
	}
	if json.Unmarshal(raw, &res) != nil || res.WallS <= 0 {
		return measured
	}
	return time.Duration(res.WallS * float64(time.Second))
}

// reproSeriesRun is one experiment of a series: repro EXP into --out/DIR, with its default columns or
// the given ones.
type reproSeriesRun struct{ dir, exp, table, mechanisms string }

// reproSeries runs a series of repro experiments with the shared flags and writes the index README.md.
func reproSeries(name, about, example, defaultOut, footer string, runs []reproSeriesRun, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(name, about, example, stderr)
	dataset := fs.String("dataset", "fashion-mnist", "data set (fashion-mnist)")
	out := fs.String("out", defaultOut, "directory holding one directory per experiment and an index README.md")
	trials := fs.Int("trials", 1, "independent trials of each experiment")
	quick := fs.Bool("quick", false, "the reduced run of each experiment")
	eps := fs.String("eps", "", "total ε values for every experiment (default: each experiment's own)")
	seed := fs.Uint64("seed", 1, "seed of the first trial")
	vlmEpochs := fs.Int("vlm-epochs", 0, "training epochs of the VLM (and the CLM) in every experiment (default: each experiment's own)")
	resume := fs.Bool("resume", false, "resume the stopped series with the same flags: each experiment whose directory holds a results.json resumes from it (see repro EXP --resume), the others run from the start")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	var index strings.Builder
	fmt.Fprintf(&index, "# ldpsql %s\n\n| experiment | thesis | results | wall time |\n|---|---|---|---|\n", name)
	for _, run := range runs {
		a := []string{run.exp, "--dataset", *dataset, "--out", filepath.Join(*out, run.dir), "--trials", strconv.Itoa(*trials),
			"--seed", strconv.FormatUint(*seed, 10)}
		if run.mechanisms != "" {
			a = append(a, "--mechanisms", run.mechanisms)
		}
		if *quick {
			a = append(a, "--quick")
		}
		if *eps != "" {
			a = append(a, "--eps", *eps)
		}
		if *vlmEpochs > 0 {
			a = append(a, "--vlm-epochs", strconv.Itoa(*vlmEpochs))
		}
		dir := filepath.Join(*out, run.dir)
		if *resume {
			// An experiment the stopped series never reached has no results.json: it starts afresh.
			if _, err := os.Stat(filepath.Join(dir, "results.json")); err == nil {
				a = append(a, "--resume")
			} else if !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		fmt.Fprintf(stderr, "== repro %s\n", strings.Join(a, " "))
		start := time.Now()
		if err := reproCmd(a, io.Discard, stderr); err != nil {
			return fmt.Errorf("repro %s: %w", run.exp, err)
		}
		fmt.Fprintf(&index, "| `repro %s` | %s | [%s/results.md](%s/results.md) | %s |\n", run.exp, run.table, run.dir, run.dir,
			reproWallTime(dir, time.Since(start)).Round(time.Second))
	}
	index.WriteString(footer)
	if err := os.WriteFile(filepath.Join(*out, "README.md"), []byte(index.String()), 0o644); err != nil {
		return err
	}
	fmt.Fprint(stdout, index.String())
	return nil
}
