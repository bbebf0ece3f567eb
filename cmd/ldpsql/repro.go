package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dolthub/go-mysql-server/sql"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/training/datasets"
	"github.com/ldpsql/ldpsql/udf"
)

// repro data-collection runs the thesis's Table 4.1 protocol (Mansbridge, Sec 4.3.1; digest §9.2) end to
// end through ldpsql's SQL functions and jobs, on Fashion-MNIST:
//
//   - D1: 45,000 training images, unlabelled, train the mechanisms (CALL ldp_train_mechanism for the VLM,
//     CALL ldp_fit_mechanism for PCA and for the identity box of the raw-feature baselines);
//   - D2: the other 15,000 are privatised with CALL ldp_privatize at total ε, λ = 0.7 (ε_x = 0.7ε to the
//     features, ε_y = 0.3ε to the label by k-RR), and split 9:1 into classifier training and validation
//     by TRAIN_NOISY_CLASSIFIER (objective 'marginal' with D1 as the prior for the latent mechanisms,
//     'forward' for the raw-feature baselines, whose D1 prior would be 784-dimensional);
//   - the 10,000 clean test images are classified with PREDICT.
//
// ε = ∞ is the no-privacy reference: a classifier on the clean latents (VLM, PCA) or on the raw clean
// pixels (Laplace and Duchi share it) of D2 with clean labels.

// vlmSetting is one row of the thesis's Table A.3 (MNIST, clean inference): the VLM's ℓ1 radius and
// pre-training ε for a total ε. ε_pre = 0 means a learnt training scale (the ε = ∞ row).
type vlmSetting struct{ l, epsPre float64 }

var tableA3 = map[float64]vlmSetting{
	1: {5, 7}, 2: {7.5, 7}, 4: {7.5, 13}, 6: {5, 19}, 8: {5, 32}, 10: {10, 33}, math.Inf(1): {10, 0},
}

// reproCLMD is the CLM column's latent dimension: the VLM's d, not the thesis's CIFAR-10 d = 32. With l
// fixed, every coordinate of a release carries the same Laplace noise 2l/ε_x while d coordinates share the
// ℓ1 radius l, so fewer coordinates carry more signal each. On seed 1's split at ε = 10 (one trial each,
// docs/results/clm-fmnist.md) d = 32 with l = 5 gave 64.5 %, d = 8 with the VLM's l = 10 69.3 %.
const reproCLMD = 8

// reproCLMWeakNoise is the CLM column's ε_pre-training where Table B.1 trains without noise (ε ≥ 8):
// b = 2l/100, a fiftieth of the ball's radius. On seed 1's split at ε = 10 (one trial each) it gave
// 70.6 %, none 69.3 %, ε_pre 33 45.6 % and ε_pre 20 46.8 %.
const reproCLMWeakNoise float64 = 100

// settingFor returns Table A.3's setting for eps, or that of the nearest ε it lists.
func settingFor(eps float64) vlmSetting {
	if s, ok := tableA3[eps]; ok {
		return s
	}
	best, dist := vlmSetting{}, math.Inf(1)
	for e, s := range tableA3 {
		if d := math.Abs(math.Log(e) - math.Log(eps)); d < dist {
			best, dist = s, d
		}
	}
	return best
}

type reproConfig struct {
	exp                          *reproExperiment
	out                          string
	trials                       int
	eps                          []float64
	mechs                        []string
	nAux, nPriv, nTest           int
	vlmEpochs, clfEpochs, lambda float64
	seed                         uint64
	quick                        bool
	first                        int           // trials already in the results (--resume): the run starts at trial first
	prevWall                     time.Duration // their wall time, added to this run's
}

// cdpEpsilon is the central-DP ε of the VLM variants trained with DP-SGD on D1 (the thesis's Table 4.1
// columns "VLM (ε_CDP = 5)" and "(ε_CDP = 1)"); δ is left to its default 1/|D1|.
var cdpEpsilon = map[string]float64{"vlm_cdp5": 5, "vlm_cdp1": 1}

func reproCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) >= 1 && args[0] == "task-aware" {
		return reproTaskAwareCmd(args[1:], stdout, stderr)
	}
	if len(args) >= 1 && args[0] == "all" {
		return reproAllCmd(args[1:], stdout, stderr)
	}
	if len(args) >= 1 && args[0] == "clm" {
		return reproCLMCmd(args[1:], stdout, stderr)
	}
	var exp *reproExperiment
	if len(args) >= 1 {
		exp, _ = experimentNamed(args[0])
	}
	if exp == nil {
		return fmt.Errorf("usage: ldpsql repro %s|all|clm --dataset fashion-mnist [--out DIR] [--trials N] [--quick]\n"+
			"       ldpsql repro task-aware --dataset breast-cancer [--out DIR] [--trials N] [--epochs N] [--eps LIST]", strings.Join(experimentNames(), "|"))
	}
	fs := newFlagSet("repro "+exp.name, fmt.Sprintf(`Run the thesis's %s experiment end to end through the SQL functions and jobs, with the
data-collection protocol of Table 4.1: mechanisms trained on D1 (45,000 unlabelled images), D2 (15,000)
privatised at each ε with λ = 0.7 and split 9:1 for classifier training and validation, the clean
10,000 test images classified (experiments: %s).
Writes results.md (rows ε, columns mechanisms, test accuracy %%), results.json and accuracy.png to --out.
Build with scripts/build.sh first: the VLM trains several times faster with OpenBLAS.`, exp.table, strings.Join(experimentNames(), ", ")),
		fmt.Sprintf(`  bin/ldpsql repro %s --dataset fashion-mnist --trials 3 --out repro-out
  bin/ldpsql repro %s --dataset fashion-mnist --quick --out /tmp/quick
`, exp.name, exp.name), stderr)
	dataset := fs.String("dataset", "fashion-mnist", "data set (fashion-mnist)")
	out := fs.String("out", "repro-out", "directory for results.md, results.json, accuracy.png and the DuckDB file")
	trials := fs.Int("trials", 1, "independent trials (split, training and noise seeds); the table reports mean ± std")
	epsList := fs.String("eps", exp.eps, "total ε values (inf = no privacy)")
	mechList := fs.String("mechanisms", strings.Join(exp.mechs, ","), "columns to compare: "+strings.Join(reproMechanisms, ", ")+
		" (vlm_cdp5 and vlm_cdp1: the VLM trained under central DP at ε_CDP = 5 and 1; clm: the contrastive Laplace mechanism of thesis ch. 5 in the VLM's latent (d = 8, Table A.3's l); "+
		"vlm_linear: the linear VLM; X_duchi, X_privunit: encoder X's latents through Duchi or PrivUnit; vlm_etaNN: the VLM trained on NN % of the training images)")
	vlmEpochs := fs.Int("vlm-epochs", 12, "VLM training epochs")
	clfEpochs := fs.Int("classifier-epochs", 60, "maximum classifier epochs (early stopping on the validation split)")
	quick := fs.Bool("quick", false, "a reduced run for tests: 3,000/1,500/1,000 images, ε ∈ {2, 10, ∞}, few epochs (barber: 500/500 images, ε ∈ {16, 64, ∞}, 50 EM iterations)")
	seed := fs.Uint64("seed", 1, "seed of the first trial")
	resume := fs.Bool("resume", false, "keep every value the run in --out holds (same sizes and epochs) and run only the cells that lack a trial, with the seeds they would have had: the rest of a stopped run, or the columns and ε added to a finished one with --mechanisms and --eps (on the same splits); when none lacks one, only write results.md, results.json and accuracy.png again")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *dataset != "fashion-mnist" {
		return fmt.Errorf("--dataset %q: only fashion-mnist is supported", *dataset)
	}
	cfg := reproConfig{exp: exp, out: *out, trials: *trials, nAux: 45000, nPriv: 15000, nTest: 10000,
		vlmEpochs: float64(*vlmEpochs), clfEpochs: float64(*clfEpochs), lambda: 0.7, seed: *seed, quick: *quick}
	if exp.pair != nil {
		// No D1 (the box is the pixels' public range); D2 is 2,000 of the two classes' 12,000 training
		// images (Barber's run has 500: EM fits 784 weights from releases of tiny per-pixel ε), the test
		// set all 2,000 of their test images.
		cfg.nAux, cfg.nPriv, cfg.nTest = 0, 2000, 2000
	}
	if *quick {
		cfg.nAux, cfg.nPriv, cfg.nTest = 3000, 1500, 1000
		if exp.pair != nil {
			cfg.nAux, cfg.nPriv, cfg.nTest = 0, 500, 500 // Barber's 500 training images
		}
		if !flagSet(fs, "eps") {
			*epsList = "2,10"
			if strings.Contains(exp.eps, "inf") {
				*epsList += ",inf"
			}
			if exp.quickEps != "" {
				*epsList = exp.quickEps
			}
		}
		if !flagSet(fs, "vlm-epochs") {
			cfg.vlmEpochs = 2
		}
		if !flagSet(fs, "classifier-epochs") {
			// 30, not 8: the marginal classifier takes batches of 512, so 8 epochs of 1,350 rows were 24
			// Adam steps, and the CLM column's ε = 10 accuracy (TestReproQuickCLM) was 26.8 ± 2.9 % (35
			// runs) with a tail down to 16.5 %; at 30 epochs it is 41.4 ± 2.6 % (60 runs), for about 4
			// CPU-s more over the whole quick run (60 epochs: 43.8 ± 3.4 %, 15 runs, no wider margin).
			cfg.clfEpochs = 30
		}
	}
	if cfg.trials < 1 {
		return fmt.Errorf("--trials %d must be at least 1", cfg.trials)
	}
	var err error
	if cfg.eps, err = parseEpsList(*epsList, true, math.Inf(1)); err != nil {
		return err
	}
	for _, m := range strings.Split(*mechList, ",") {
		m = strings.TrimSpace(m)
		if !slices.Contains(reproMechanisms, m) {
			return fmt.Errorf("--mechanisms: unknown %q (choose from %s)", m, strings.Join(reproMechanisms, ", "))
		}
		cfg.mechs = append(cfg.mechs, m)
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	var prev reproResults
	if *resume {
		if prev, err = resumeRepro(&cfg); err != nil {
			return fmt.Errorf("--resume: %w", err)
		}
	}
	// Each ε a trial finishes rewrites the results, so a long run that is stopped keeps what it finished.
	res, wall, err := runRepro(cfg, prev, stderr, func(res reproResults, wall time.Duration) error {
		_, err := writeReproResults(cfg, res, wall)
		return err
	})
	if err != nil {
		return err
	}
	md, err := writeReproResults(cfg, res, wall)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, md)
	fmt.Fprintf(stdout, "\nwrote %s, %s and %s\n", filepath.Join(cfg.out, "results.md"), filepath.Join(cfg.out, "results.json"), filepath.Join(cfg.out, "accuracy.png"))
	return nil
}

// resumeRepro reads the results.json of a stopped run in cfg.out, checks that it ran the protocol cfg
// asks for, and returns every value it holds, setting cfg.first (the fewest trials any cell holds) and
// cfg.prevWall. The run resumes cell by cell: trial t then runs each column at each ε that lacks its
// t-th value, with trial t's seed, so a run that stopped part way through a trial finishes it, and a
// finished run given more columns or ε (--mechanisms, --eps) fills in only those, on the same splits.
// Asking for fewer columns or ε than the file holds is refused: their values would be lost. A run that
// holds every trial asked for gets cfg.first = cfg.trials, and runRepro then only writes its tables again.
func resumeRepro(cfg *reproConfig) (reproResults, error) {
	path := filepath.Join(cfg.out, "results.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var prev struct {
		Experiment       string
		D1, D2, Test     int
		Lambda           float64
		VLMEpochs        float64 `json:"vlm_epochs"`
		ClassifierEpochs float64 `json:"classifier_epochs"`
		Quick            bool
		WallS            float64  `json:"wall_s"`
		EpsGrid          []string `json:"eps_grid"`   // absent before 2026-11-27
		Mechanisms       []string `json:"mechanisms"` // likewise
		Results          []struct {
			Mechanism, Eps string
			Accuracy       []float64
		}
	}
	if err := json.Unmarshal(raw, &prev); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if prev.Experiment == "" {
		prev.Experiment = "data-collection" // written before there were others
	}
	if prev.Experiment != cfg.exp.name {
		return nil, fmt.Errorf("%s holds a run of repro %s, not %s", path, prev.Experiment, cfg.exp.name)
	}
	if prev.D1 != cfg.nAux || prev.D2 != cfg.nPriv || prev.Test != cfg.nTest || prev.Lambda != cfg.lambda ||
		prev.VLMEpochs != cfg.vlmEpochs || prev.ClassifierEpochs != cfg.clfEpochs || prev.Quick != cfg.quick {
		return nil, fmt.Errorf("%s ran D1 %d, D2 %d, test %d, λ %g, %g VLM and %g classifier epochs (quick %v); this run asks for %d, %d, %d, %g, %g and %g (quick %v)",
			path, prev.D1, prev.D2, prev.Test, prev.Lambda, prev.VLMEpochs, prev.ClassifierEpochs, prev.Quick,
			cfg.nAux, cfg.nPriv, cfg.nTest, cfg.lambda, cfg.vlmEpochs, cfg.clfEpochs, cfg.quick)
	}
	grid := make([]string, len(cfg.eps))
	for i, eps := range cfg.eps {
		grid[i] = epsName(eps)
	}
	// A file that records its grid may lack values of any cell (a column or ε added, a trial that
	// stopped part way); of an older one, a cell with no value could as well be an ε or a column that
	// run never had, so each must hold a value.
	recorded := prev.EpsGrid != nil
	if recorded {
		if lost := notIn(prev.Mechanisms, cfg.mechs); len(lost) > 0 {
			return nil, fmt.Errorf("%s ran ε %s with %s; this run asks for ε %s with %s, which would drop column(s) %s (a resumed run keeps every column: add them to --mechanisms)",
				path, strings.Join(prev.EpsGrid, ","), strings.Join(prev.Mechanisms, ","), strings.Join(grid, ","), strings.Join(cfg.mechs, ","), strings.Join(lost, ","))
		}
		if lost := notIn(prev.EpsGrid, grid); len(lost) > 0 {
			return nil, fmt.Errorf("%s ran ε %s with %s; this run asks for ε %s with %s, which would drop ε %s (a resumed run keeps every ε: add them to --eps)",
				path, strings.Join(prev.EpsGrid, ","), strings.Join(prev.Mechanisms, ","), strings.Join(grid, ","), strings.Join(cfg.mechs, ","), strings.Join(lost, ","))
		}
	}
	got := reproResults{}
	for _, c := range prev.Results {
		if got[c.Mechanism] == nil {
			got[c.Mechanism] = map[string][]float64{}
		}
		got[c.Mechanism][c.Eps] = c.Accuracy
	}
	res := reproResults{}
	for _, m := range cfg.mechs {
		res[m] = map[string][]float64{}
		for _, eps := range cfg.eps {
			xs := got[m][epsName(eps)]
			if len(xs) == 0 && !recorded {
				return nil, fmt.Errorf("%s has no finished trial of %s at ε %s (written before runs recorded their ε and columns, so it cannot say whether its first trial stopped there)",
					path, m, epsLabel(eps))
			}
			res[m][epsName(eps)] = xs
		}
	}
	fewest, most := cellTrials(cfg.eps, res, cfg.mechs...)
	if most > cfg.trials {
		return nil, fmt.Errorf("%s already holds %d trial(s), more than --trials %d asks for", path, most, cfg.trials)
	}
	cfg.first, cfg.prevWall = fewest, time.Duration(prev.WallS*float64(time.Second))
	return res, nil
}

// notIn returns the members of have that want lacks, in have's order.
func notIn(have, want []string) []string {
	var lost []string
	for _, x := range have {
		if !slices.Contains(want, x) {
			lost = append(lost, x)
		}
	}
	return lost
}

// writeReproResults writes results.md, results.json and accuracy.png to cfg.out and returns the markdown.
func writeReproResults(cfg reproConfig, res reproResults, wall time.Duration) (string, error) {
	md := reproMarkdown(cfg, res, wall)
	files := map[string][]byte{"results.md": []byte(md)}
	var err error
	if files["results.json"], err = json.MarshalIndent(reproJSON(cfg, res, wall), "", "  "); err != nil {
		return "", err
	}
	if files["accuracy.png"], err = reproPlot(cfg, res); err != nil {
		return "", err
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(cfg.out, name), b, 0o644); err != nil {
			return "", err
		}
	}
	return md, nil
}

// parseEpsList parses an --eps list: ε values in (0, most], and inf (or ∞: no privacy) where allowInf,
// sorted.
func parseEpsList(list string, allowInf bool, most float64) ([]float64, error) {
	var eps []float64
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if allowInf && (s == "inf" || s == "∞") {
			eps = append(eps, math.Inf(1))
			continue
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || !(v > 0 && v <= most) || math.IsInf(v, 0) {
			want := fmt.Sprintf("a number in (0, %g]", most)
			if math.IsInf(most, 1) {
				want = "a positive number"
			}
			if allowInf {
				want += " or inf"
			}
			return nil, fmt.Errorf("--eps: %q is not %s", s, want)
		}
		eps = append(eps, v)
	}
	sort.Float64s(eps)
	return eps, nil
}

// flagSet says whether the flag called name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// reproResults holds test accuracies: mechanism → ε (as formatted by epsName) → one value per trial.
type reproResults map[string]map[string][]float64

func epsName(eps float64) string {
	if math.IsInf(eps, 1) {
		return "inf"
	}
	return strings.ReplaceAll(strconv.FormatFloat(eps, 'g', -1, 64), ".", "_")
}

func epsLabel(eps float64) string {
	if math.IsInf(eps, 1) {
		return "∞ (no privacy)"
	}
	return strconv.FormatFloat(eps, 'g', -1, 64)
}

// reproRun is one run's engine and log.
type reproRun struct {
	cfg   reproConfig
	e     *engine.Engine
	log   io.Writer
	start time.Time
}

func (r *reproRun) logf(format string, args ...any) {
	fmt.Fprintf(r.log, "[%6.0fs] %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
}

// query runs one statement and returns its rows.
func (r *reproRun) query(q string) ([]sql.Row, error) {
	_, rows, err := r.e.Query(r.e.NewContext(context.Background()), q)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", firstLine(q), err)
	}
	return rows, nil
}

// job runs a statement that returns a job id and waits for the job, logging its progress.
func (r *reproRun) job(what, q string) error {
	rows, err := r.query(q)
	if err != nil {
		return err
	}
	id, ok := rows[0][0].(int64)
	if !ok {
		return fmt.Errorf("%s: expected a job id, got %v", what, rows[0][0])
	}
	last := time.Now()
	for {
		time.Sleep(200 * time.Millisecond)
		job, err := r.e.Jobs.Get(context.Background(), id)
		if err != nil {
			return err
		}
		if job.State != engine.JobRunning {
			if job.State != engine.JobSucceeded {
				return fmt.Errorf("%s: job %d %s: %s", what, id, job.State, job.Error)
			}
			secs := job.Finished.Sub(job.Started).Seconds()
			r.logf("%s: done in %.0f s (%d epochs, loss %.3f)", what, secs, job.Epoch, job.Loss)
			return nil
		}
		if time.Since(last) > 30*time.Second {
			r.logf("%s: %s", what, strings.TrimSpace(progressLine(job)))
			last = time.Now()
		}
	}
}

// runRepro runs cfg.trials trials, calling epsDone with the results so far after each ε of each.
// prev holds the cfg.first trials already finished, and any ε of the next that finished (nil for none).
func runRepro(cfg reproConfig, prev reproResults, log io.Writer, epsDone func(reproResults, time.Duration) error) (reproResults, time.Duration, error) {
	if cfg.first > 0 && cfg.first >= cfg.trials {
		// --resume of a finished run: its tables are written again from results.json, with its own
		// wall time, and nothing is loaded or run.
		fmt.Fprintf(log, "every trial asked for is in %s: writing its tables again\n", filepath.Join(cfg.out, "results.json"))
		return prev, cfg.prevWall, nil
	}
	start := time.Now().Add(-cfg.prevWall)
	path := filepath.Join(cfg.out, "repro.duckdb")
	for _, p := range []string{path, path + ".wal"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, 0, err
		}
	}
	e, err := openEngine(path, udf.Config{})
	if err != nil {
		return nil, 0, err
	}
	defer e.Close()
	r := &reproRun{cfg: cfg, e: e, log: log, start: start}
	train, from, err := datasets.LoadFashionMNIST("train")
	if err != nil {
		return nil, 0, err
	}
	test, _, err := datasets.LoadFashionMNIST("test")
	if err != nil {
		return nil, 0, err
	}
	nTrain, nTest := len(train.Pixels), len(test.Pixels)
	if pair := cfg.exp.pair; pair != nil {
		nTrain, nTest = len(ofPair(allRows(nTrain), train.Labels, pair)), len(ofPair(allRows(nTest), test.Labels, pair))
	}
	if nTrain < cfg.nAux+cfg.nPriv || nTest < cfg.nTest {
		return nil, 0, fmt.Errorf("Fashion-MNIST at %s has %d training and %d test images (of the classes used); need %d and %d", from,
			nTrain, nTest, cfg.nAux+cfg.nPriv, cfg.nTest)
	}
	r.logf("Fashion-MNIST from %s; D1 = %d, D2 = %d, test = %d; ε = %v; %d trial(s)", from, cfg.nAux, cfg.nPriv, cfg.nTest, cfg.eps, cfg.trials)
	if _, err := loadVectors(context.Background(), newEmbedded(e), "fmnist_test", test.Pixels[:cfg.nTest], test.Labels[:cfg.nTest]); err != nil {
		return nil, 0, err
	}
	if c := cfg.exp.novel; c > 0 {
		idx := balancedNovel(allRows(cfg.nTest), test.Labels, c)
		x, y := make([][]float32, len(idx)), make([]int, len(idx))
		for k, i := range idx {
			x[k], y[k] = test.Pixels[i], map[bool]int{true: 1, false: 0}[test.Labels[i] == c]
		}
		if _, err := loadVectors(context.Background(), newEmbedded(e), "fmnist_test_novel", x, y); err != nil {
			return nil, 0, err
		}
		r.logf("novel class %d: %d balanced test images", c, len(idx))
	}
	if pair := cfg.exp.pair; pair != nil {
		idx := ofPair(allRows(len(test.Pixels)), test.Labels, pair)[:cfg.nTest]
		x, y := make([][]float32, len(idx)), make([]int, len(idx))
		for k, i := range idx {
			x[k], y[k] = test.Pixels[i], slices.Index(pair, test.Labels[i])
		}
		if _, err := loadVectors(context.Background(), newEmbedded(e), "fmnist_test_pair", x, y); err != nil {
			return nil, 0, err
		}
		r.logf("classes %v as 0 and 1: %d test images", pair, len(idx))
	}
	res := reproResults{}
	for m, byEps := range prev {
		res[m] = map[string][]float64{}
		for k, xs := range byEps {
			res[m][k] = slices.Clone(xs)
		}
	}
	if prev != nil {
		r.logf("resuming from %s: trials %d–%d (seeds %d–%d) run each cell that lacks them (%s)", filepath.Join(cfg.out, "results.json"),
			cfg.first+1, cfg.trials, cfg.seed+uint64(cfg.first), cfg.seed+uint64(cfg.trials-1), resumeCounts(cfg, prev))
	}
	checkpoint := func() error { return epsDone(res, time.Since(start)) }
	for t := cfg.first; t < cfg.trials; t++ {
		if err := r.trial(t, cfg.seed+uint64(t), train, res, checkpoint); err != nil {
			return nil, 0, err
		}
	}
	return res, time.Since(start), e.Close()
}

// cellTrials returns the fewest and the most trials a cell of the columns mechs holds at the ε values eps.
func cellTrials(eps []float64, res reproResults, mechs ...string) (fewest, most int) {
	fewest = math.MaxInt
	for _, m := range mechs {
		for _, e := range eps {
			n := len(res[m][epsName(e)])
			fewest, most = min(fewest, n), max(most, n)
		}
	}
	return fewest, most
}

// resumeCounts says how many trials each column of a resumed run holds: "vlm 3, clm 0–1 of 3".
func resumeCounts(cfg reproConfig, res reproResults) string {
	parts := make([]string, len(cfg.mechs))
	for i, m := range cfg.mechs {
		fewest, most := cellTrials(cfg.eps, res, m)
		parts[i] = fmt.Sprintf("%s %d", m, fewest)
		if most > fewest {
			parts[i] = fmt.Sprintf("%s %d–%d", m, fewest, most)
		}
	}
	return strings.Join(parts, ", ") + fmt.Sprintf(" of %d", cfg.trials)
}

// unitBox fits the identity mechanism called name on the box [0, 1]^784 (the pixels' public range: a table
// of an all-zero and an all-one image), once.
func (r *reproRun) unitBox(name string) (string, error) {
	if rows, err := r.query(fmt.Sprintf("SELECT COUNT(*) FROM ldpsql_catalog.ldp_mechanisms WHERE name = '%s'", name)); err != nil {
		return "", err
	} else if n, _ := toFloat64(rows[0][0]); n > 0 {
		return name, nil
	}
	zero, one := make([]float32, pixels), make([]float32, pixels)
	for i := range one {
		one[i] = 1
	}
	if _, err := loadVectors(context.Background(), newEmbedded(r.e), name+"_range", [][]float32{zero, one}, nil); err != nil {
		return "", err
	}
	_, err := r.query(fmt.Sprintf("CALL ldp_fit_mechanism('%s', 'identity', '%s_range', 'features', '{}')", name, name))
	return name, err
}

// allRows returns 0, …, n−1.
func allRows(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// ofPair keeps, of the rows idx (in order), those whose label is one of pair.
func ofPair(idx []int, labels []int, pair []int) []int {
	return slices.DeleteFunc(slices.Clone(idx), func(i int) bool { return !slices.Contains(pair, labels[i]) })
}

// balancedNovel keeps, of the rows idx (in order), every one of class c and as many of the others
// (the first ones), so that c against the rest is balanced.
func balancedNovel(idx []int, labels []int, c int) []int {
	var in, out []int
	for _, i := range idx {
		if labels[i] == c {
			in = append(in, i)
		} else {
			out = append(out, i)
		}
	}
	out = out[:min(len(out), len(in))]
	keep := map[int]bool{}
	for _, i := range append(in, out...) {
		keep[i] = true
	}
	return slices.DeleteFunc(slices.Clone(idx), func(i int) bool { return !keep[i] })
}

func toFloat64(v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case float32:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case string:
		return strconv.ParseFloat(x, 64)
	case interface{ String() string }:
		return strconv.ParseFloat(x.String(), 64)
	}
	return 0, fmt.Errorf("unexpected accuracy value %v (%T)", v, v)
}

func meanStd(xs []float64) (mean, std float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) > 1 {
		for _, x := range xs {
			std += (x - mean) * (x - mean)
		}
		std = math.Sqrt(std / float64(len(xs)-1))
	}
	return mean, std
}

// formatCell prints a cell's accuracies (fractions) in percent: "mean ± std (n)" over n > 1 trials,
// the bare value for one trial, which has no error estimate (printing "± 0.0" would claim no variance).
func formatCell(xs []float64) string {
	mean, std := meanStd(xs)
	if len(xs) == 1 {
		return fmt.Sprintf("%.1f", 100*mean)
	}
	return fmt.Sprintf("%.1f ± %.1f (%d)", 100*mean, 100*std, len(xs))
}

// trialsNote says what the table's cells are.
func trialsNote(trials int) string {
	if trials == 1 {
		return "1 trial: each cell is one run, with no error estimate (on small tables the noise draws alone " +
			"move a cell by up to 30 points; run --trials 3 or more)"
	}
	return fmt.Sprintf("Mean ± sample standard deviation (number of trials) over %d trials", trials)
}

// columnsProtocol says how the run's columns release and classify, naming only the columns it has: the
// latent mechanisms (VLM, PCA) with Laplace and the prior-marginalised classifier, the raw-pixel
// baselines with the forward-corrected one (where the experiment's own paragraph does not say it).
func columnsProtocol(cfg reproConfig) string {
	var pixels []string
	vlm, pca := false, false
	laplaceOnly := true // every latent column is released by Laplace and classified by Eq 4.11
	for _, m := range cfg.mechs {
		c := columnOfName(m, cfg.exp)
		if c.encoder != "box" && (c.randomiser != "laplace" || c.objective != "marginal") {
			laplaceOnly = false
		}
		switch {
		case c.encoder == "box":
			pixels = append(pixels, map[string]string{"laplace": "Laplace (ε_x/784 per pixel)", "duchi": "Duchi", "privunit": "PrivUnit"}[c.randomiser])
		case strings.HasPrefix(c.encoder, "vlm"):
			vlm = true
		case c.encoder == "pca":
			pca = true
		}
	}
	var parts []string
	if vlm {
		parts = append(parts, fmt.Sprintf("VLM d = 8 (l, ε_pre-training per thesis Table A.3, %d epochs)", int(cfg.vlmEpochs)))
	}
	if pca {
		parts = append(parts, "PCA d = 8"+map[bool]string{true: " (same l)", false: ""}[vlm])
	}
	text := strings.Join(parts, " and ")
	if cfg.exp.novel > 0 || cfg.exp.privateTest {
		return strings.TrimSpace(text + " with the Laplace randomiser; every column's classifier as the paragraph above says.")
	}
	switch {
	case text != "" && laplaceOnly:
		text += " with the Laplace randomiser and the prior-marginalised classifier (Eq 4.11)"
	case text != "":
		text += ", released and classified as the paragraph above says"
	}
	if len(pixels) > 0 {
		if text != "" {
			text += "; "
		}
		last := pixels[len(pixels)-1]
		if len(pixels) > 1 {
			last = strings.Join(pixels[:len(pixels)-1], ", ") + " and " + last
		}
		text += last + " on the raw pixels with the forward-corrected classifier (Eq 4.12)"
	}
	if text == "" {
		return ""
	}
	return text + "."
}

func reproMarkdown(cfg reproConfig, res reproResults, wall time.Duration) string {
	var b strings.Builder
	// Trials started: the most values any cell holds; finished: the fewest (a run writes its results
	// after every ε of a trial; a resumed one may have added columns or ε).
	finished, done := cellTrials(cfg.eps, res, cfg.mechs...)
	note := trialsNote(done)
	if finished < cfg.trials {
		partWay := ""
		if done > finished {
			partWay = fmt.Sprintf(", %d in some cells (those with %d values)", done, done)
		}
		note = fmt.Sprintf("Partial results: %d of %d trials finished in every cell%s. %s", finished, cfg.trials, partWay, note)
	}
	fmt.Fprintf(&b, "# %s\n\n", cfg.exp.title)
	if cfg.exp.name != "data-collection" {
		fmt.Fprintf(&b, "Thesis %s (`ldpsql repro %s`). %s\n\n", cfg.exp.table, cfg.exp.name, cfg.exp.protocol)
	}
	if cfg.exp.pair != nil {
		fmt.Fprintf(&b, "D2 = %d training images of the two classes privatised at total ε with λ = %g (ε_x = λε to the pixels, ε_x/%d "+
			"per pixel; ε_y = (1−λ)ε to the label by k-RR, K = 2); EM trains on every row, LR keeps 10 %% for early stopping; %d clean "+
			"test images of the two classes. %s%s. Wall time %s.\n\n",
			cfg.nPriv, cfg.lambda, pixels, cfg.nTest, note, map[bool]string{true: " (--quick: reduced sizes, 50 EM iterations)", false: ""}[cfg.quick],
			wall.Round(time.Second))
	} else {
		sizes := ""
		if cfg.exp.novel > 0 {
			// The sizes above are the splits' before the novel class is taken out of D1 and D2 and the test
			// images are balanced.
			sizes = fmt.Sprintf(" (before the novel class's cut: D1 then drops its class-%d images, about a tenth; D2 and the test "+
				"images keep theirs and as many others, about a fifth)", cfg.exp.novel)
		}
		fmt.Fprintf(&b, "Thesis Table 4.1 protocol: D1 = %d unlabelled images train the mechanisms; D2 = %d images privatised at total ε with λ = %g "+
			"(ε_x = λε features, ε_y = (1−λ)ε label by k-RR, K = %d), split 9:1 for classifier training/validation; %d clean test images%s. "+
			"%s %s%s. Wall time %s.\n\n",
			cfg.nAux, cfg.nPriv, cfg.lambda, cfg.exp.classes(), cfg.nTest, sizes, columnsProtocol(cfg), note,
			map[bool]string{true: " (--quick: reduced sizes)", false: ""}[cfg.quick], wall.Round(time.Second))
	}
	b.WriteString(columnNotes(cfg.mechs, int(cfg.vlmEpochs)))
	writeReproTable(&b, cfg, res, formatCell)
	if done > 1 {
		fmt.Fprintf(&b, "\nPer trial (seeds %d–%d, in that order):\n\n", cfg.seed, cfg.seed+uint64(done)-1)
		writeReproTable(&b, cfg, res, func(xs []float64) string {
			parts := make([]string, len(xs))
			for i, x := range xs {
				parts[i] = fmt.Sprintf("%.1f", 100*x)
			}
			return strings.Join(parts, " / ")
		})
	}
	return b.String()
}

// writeReproTable writes the results as a table, rows ε (largest first), columns the run's mechanisms,
// each cell as cell prints its accuracies.
func writeReproTable(b *strings.Builder, cfg reproConfig, res reproResults, cell func([]float64) string) {
	b.WriteString("| ε |")
	if cfg.exp.pair != nil {
		b.WriteString(" ε_x per pixel |")
	}
	for _, m := range cfg.mechs {
		b.WriteString(" " + mechTitles[m] + " |")
	}
	b.WriteString("\n|---|")
	if cfg.exp.pair != nil {
		b.WriteString("---|")
	}
	for range cfg.mechs {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for i := len(cfg.eps) - 1; i >= 0; i-- {
		eps := cfg.eps[i]
		fmt.Fprintf(b, "| %s |", epsLabel(eps))
		if cfg.exp.pair != nil {
			fmt.Fprintf(b, " %s |", perPixelLabel(cfg, eps))
		}
		for _, m := range cfg.mechs {
			xs := res[m][epsName(eps)]
			if len(xs) == 0 {
				b.WriteString(" – |")
				continue
			}
			fmt.Fprintf(b, " %s |", cell(xs))
		}
		b.WriteString("\n")
	}
}

// perPixelLabel is the ε of one pixel's release at total ε: λε/784.
func perPixelLabel(cfg reproConfig, eps float64) string {
	if math.IsInf(eps, 1) {
		return "–"
	}
	return fmt.Sprintf("%.3g", cfg.lambda*eps/pixels)
}

func reproJSON(cfg reproConfig, res reproResults, wall time.Duration) any {
	type cell struct {
		Mechanism string    `json:"mechanism"`
		Eps       string    `json:"eps"`
		Accuracy  []float64 `json:"accuracy"`
		Mean, Std float64
	}
	var cells []cell
	for _, m := range cfg.mechs {
		for _, eps := range cfg.eps {
			xs := res[m][epsName(eps)]
			if len(xs) == 0 {
				continue
			}
			mean, std := meanStd(xs)
			cells = append(cells, cell{m, epsName(eps), xs, mean, std})
		}
	}
	grid := make([]string, len(cfg.eps))
	for i, eps := range cfg.eps {
		grid[i] = epsName(eps)
	}
	return map[string]any{"experiment": cfg.exp.name, "d1": cfg.nAux, "d2": cfg.nPriv, "test": cfg.nTest, "lambda": cfg.lambda, "trials": cfg.trials,
		"vlm_epochs": cfg.vlmEpochs, "classifier_epochs": cfg.clfEpochs, "quick": cfg.quick, "wall_s": wall.Seconds(),
		"eps_grid": grid, "mechanisms": cfg.mechs, "results": cells}
}
