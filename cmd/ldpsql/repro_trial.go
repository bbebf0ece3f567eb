package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/ldpsql/ldpsql/training/clm"
	"github.com/ldpsql/ldpsql/training/datasets"
)

// reproTrial is one trial of a repro experiment: its splits of the training images, the encoders it
// trains or fits on D1, and a classifier per table cell (ε, column), all through SQL in the run's database.
// Every table it writes is named with the trial's prefix p, so the trials of a run share one database.
type reproTrial struct {
	r     *reproRun
	cfg   reproConfig
	seed  uint64
	p     string // the prefix of the trial's tables and models ("t1_")
	train *datasets.Images
	perm  []int // the training images in the trial's order: D1 is a prefix, D2 what follows
	res   reproResults

	testTable string // the clean test images, relabelled as the experiment's classes
	k         int    // classes
	box       string // the raw pixels' box, fitted on Table 4.1's D1 (the pixel baselines' encoder)

	loaded   map[string]bool    // the splits loaded so far
	encoders map[string]bool    // the encoders trained or fitted so far
	clean    map[string]float64 // the ε = ∞ accuracy of each encoder on each D2 ("mechanism@d2")
}

// trial runs the whole protocol once with seed, as trial index of the run: every ε but those whose
// every column res already holds for it (a resumed run's), calling checkpoint after each.
func (r *reproRun) trial(index int, seed uint64, train *datasets.Images, res reproResults, checkpoint func() error) error {
	t := &reproTrial{r: r, cfg: r.cfg, seed: seed, p: fmt.Sprintf("t%d_", seed), train: train, res: res,
		loaded: map[string]bool{}, encoders: map[string]bool{}, clean: map[string]float64{}}
	t.perm = rand.New(rand.NewPCG(seed, 0xfa5)).Perm(len(train.Pixels))
	if pair := t.cfg.exp.pair; pair != nil {
		t.perm = ofPair(t.perm, train.Labels, pair)
	}
	if err := t.setUp(); err != nil {
		return err
	}
	for _, eps := range t.cfg.eps {
		if !slices.ContainsFunc(t.cfg.mechs, func(m string) bool { return len(res[m][epsName(eps)]) <= index }) {
			r.logf("trial seed %d: ε = %s kept from the stopped run", seed, epsLabel(eps))
			continue
		}
		for _, mech := range t.cfg.mechs {
			if len(res[mech][epsName(eps)]) > index {
				continue // kept from the stopped run
			}
			if err := t.cell(mech, eps); err != nil {
				return err
			}
		}
		if err := checkpoint(); err != nil {
			return err
		}
	}
	return nil
}

// setUp loads Table 4.1's D1 and D2 and fits the pixel baselines' box on that D1.
func (t *reproTrial) setUp() error {
	baseD1, _, err := t.splitOf(reproColumn{})
	if err != nil {
		return err
	}
	t.testTable = "fmnist_test"
	if t.cfg.exp.novel > 0 {
		t.testTable = "fmnist_test_novel"
	}
	if t.cfg.exp.pair != nil {
		t.testTable = "fmnist_test_pair"
	}
	t.k = t.cfg.exp.classes()
	t.box = t.p + "box"
	if needsBox(t.cfg.mechs, t.cfg.exp) {
		if _, err := t.r.query(fmt.Sprintf("CALL ldp_fit_mechanism('%s', 'identity', '%s', 'features', '{}')", t.box, baseD1)); err != nil {
			return err
		}
	}
	return nil
}

// load loads the training images idx as table name, once: labelled for a D2, without its labels (not
// loaded at all) for a D1. Novel-class and pair experiments cut and relabel them to their two classes.
func (t *reproTrial) load(name string, idx []int, labelled bool) (string, error) {
	if t.loaded[name] {
		return name, nil
	}
	novel, pair, labels := t.cfg.exp.novel, t.cfg.exp.pair, t.train.Labels
	if novel > 0 {
		if labelled {
			idx = balancedNovel(idx, labels, novel)
		} else {
			idx = slices.DeleteFunc(slices.Clone(idx), func(i int) bool { return labels[i] == novel })
		}
	}
	x, y := make([][]float32, len(idx)), make([]int, len(idx))
	for k, i := range idx {
		x[k], y[k] = t.train.Pixels[i], labels[i]
		if novel > 0 {
			y[k] = map[bool]int{true: 1, false: 0}[y[k] == novel]
		}
		if pair != nil {
			y[k] = slices.Index(pair, y[k])
		}
	}
	if !labelled {
		y = nil
	}
	if _, err := loadVectors(context.Background(), newEmbedded(t.r.e), name, x, y); err != nil {
		return "", err
	}
	t.loaded[name] = true
	t.r.logf("trial seed %d: loaded %s (%d)", t.seed, name, len(x))
	return name, nil
}

// splitOf loads column c's D1 and D2: Table 4.1's, or the cut of an aux-size column (and every
// training image as the D2 of aux-size's pixel baselines).
func (t *reproTrial) splitOf(c reproColumn) (d1, d2 string, err error) {
	n := t.cfg.nAux + t.cfg.nPriv
	cut, suffix := t.cfg.nAux, ""
	if t.cfg.exp.novel > 0 {
		suffix = "_novel"
	}
	if c.eta > 0 && etaSplit(c.eta, n) != t.cfg.nAux {
		cut, suffix = etaSplit(c.eta, n), suffix+fmt.Sprintf("_eta%.0f", 100*c.eta)
	}
	if cut > 0 { // no D1 when nothing is trained or fitted on one
		if d1, err = t.load(t.p+"d1"+suffix, t.perm[:cut], false); err != nil {
			return "", "", err
		}
	}
	if c.allD2 {
		d2, err = t.load(t.p+"d2_all"+suffix, t.perm[:n], true)
	} else {
		d2, err = t.load(t.p+"d2"+suffix, t.perm[cut:n], true)
	}
	return d1, d2, err
}

// clfParams is TRAIN_NOISY_CLASSIFIER's configuration of a classifier called model, with extra (JSON
// members, each after a comma) appended.
func (t *reproTrial) clfParams(model, objective string, extra string) string {
	if objective == "em" { // spread's own config: iterations, not epochs
		if t.cfg.quick {
			extra += `,"iterations":50`
		}
		return fmt.Sprintf(`{"model":"%s","objective":"em","seed":%d%s}`, model, t.seed, extra)
	}
	if t.cfg.exp.pair != nil {
		extra += `,"hidden":[]` // Barber's baselines are logistic regression
	}
	if t.cfg.quick {
		extra += `,"restarts":1` // a pipeline test: one start keeps it short
	}
	return fmt.Sprintf(`{"model":"%s","objective":"%s","seed":%d,"epochs":%d%s}`, model, objective, t.seed, int(t.cfg.clfEpochs), extra)
}

// classifier trains model on table with TRAIN_NOISY_CLASSIFIER, as a job.
func (t *reproTrial) classifier(model, table, objective, extra string) error {
	return t.r.job("classifier "+model, fmt.Sprintf(`SELECT TRAIN_NOISY_CLASSIFIER('%s', '%s')`, table, t.clfParams(model, objective, extra)))
}

// testAccuracy is model's accuracy on the clean test images.
func (t *reproTrial) testAccuracy(model string) (float64, error) {
	rows, err := t.r.query(fmt.Sprintf("SELECT AVG(CASE WHEN PREDICT('%s', features) = label THEN 1.0 ELSE 0.0 END) FROM %s", model, t.testTable))
	if err != nil {
		return 0, err
	}
	return toFloat64(rows[0][0])
}

// record adds a cell's accuracy to the results.
func (t *reproTrial) record(mech string, eps, acc float64) {
	if t.res[mech] == nil {
		t.res[mech] = map[string][]float64{}
	}
	t.res[mech][epsName(eps)] = append(t.res[mech][epsName(eps)], acc)
	t.r.logf("%s at ε = %s: test accuracy %.1f%%", mech, epsLabel(eps), 100*acc)
}

// encoderFor trains or fits a column's encoder on d1 for ε, once: the columns that only change the
// randomiser share it.
func (t *reproTrial) encoderFor(c reproColumn, eps float64, d1 string) (string, error) {
	if c.encoder == "box" {
		return t.box, nil
	}
	if c.encoder == "unitbox" {
		return t.r.unitBox(t.p + "unitbox")
	}
	tag := t.p + c.encoder + "_e" + epsName(eps) + strings.TrimPrefix(d1, t.p+"d1")
	if t.encoders[tag] {
		return tag, nil
	}
	set, epochs, seed := settingFor(eps), int(t.cfg.vlmEpochs), t.seed
	var err error
	switch c.encoder {
	case "vlm", "vlm_linear":
		linear := map[bool]string{true: `,"linear":true`, false: ""}[c.encoder == "vlm_linear"]
		params := fmt.Sprintf(`{"d":8,"l":%g,"eps_pretrain":%g,"epochs":%d,"seed":%d%s}`, set.l, set.epsPre, epochs, seed, linear)
		err = t.r.job("train "+mechTitles[c.encoder]+" "+tag, fmt.Sprintf("CALL ldp_train_mechanism('%s', 'vlm', '%s', 'features', '%s')", tag, d1, params))
	case "vlm_cdp5", "vlm_cdp1":
		// CDP needs a fixed training scale: the ε = ∞ row uses the ε = 10 row's ε_pre-training.
		// The classifier's marginal prior still reads D1's encodings (the thesis's protocol): the
		// CDP protects what the mechanism's weights reveal, not that prior.
		epsPre := set.epsPre
		if epsPre == 0 {
			epsPre = tableA3[10].epsPre
		}
		params := fmt.Sprintf(`{"d":8,"l":%g,"eps_pretrain":%g,"epochs":%d,"seed":%d,"cdp":{"epsilon":%g}}`, set.l, epsPre, epochs, seed, cdpEpsilon[c.encoder])
		err = t.r.job("train VLM (CDP) "+tag, fmt.Sprintf("CALL ldp_train_mechanism('%s', 'vlm', '%s', 'features', '%s')", tag, d1, params))
	case "clm", "clm_tabular":
		// The VLM's latent (d 8, Table A.3's l) with a contrastive learner, trained as many epochs
		// as the VLM, so the column compares learners and not latent sizes (see reproCLMD), with
		// Table B.1's training noise for clean inference, weak noise where it has none (see
		// reproCLMWeakNoise), and an MLP encoder on image views (training/clm).
		epsPre := 0.0
		if !math.IsInf(eps, 1) {
			if epsPre = clm.EpsPretrainFor(t.cfg.lambda * eps); epsPre == 0 {
				epsPre = reproCLMWeakNoise
			}
		}
		views := `"image_shape":[28,28]`
		if c.encoder == "clm_tabular" {
			views = `"augment":"tabular"`
		}
		params := fmt.Sprintf(`{"d":%d,"l":%g,"eps_pretrain":%g,%s,"epochs":%d,"seed":%d}`,
			reproCLMD, set.l, epsPre, views, epochs, seed)
		err = t.r.job("train CLM "+tag, fmt.Sprintf("CALL ldp_train_mechanism('%s', 'clm', '%s', 'features', '%s')", tag, d1, params))
	case "pca":
		_, err = t.r.query(fmt.Sprintf(`CALL ldp_fit_mechanism('%s', 'pca', '%s', 'features', '{"d":8,"l":%g}')`, tag, d1, set.l))
	default:
		err = fmt.Errorf("no encoder %q", c.encoder)
	}
	if err != nil {
		return "", err
	}
	t.encoders[tag] = true
	return tag, nil
}

// cell fills the table's cell of column mech at ε: its encoder trained or fitted, D2 released through
// it, a classifier trained on the releases and its accuracy recorded.
func (t *reproTrial) cell(mech string, eps float64) error {
	if mech == "bound" {
		return t.bound(eps)
	}
	c := columnOf(mech, t.cfg.exp)
	d1, d2, err := t.splitOf(c)
	if err != nil {
		return err
	}
	mechanism, err := t.encoderFor(c, eps, d1)
	if err != nil {
		return err
	}
	var acc float64
	tag := t.p + mech + "_e" + epsName(eps)
	switch {
	case c.decode:
		acc, err = t.featureLevel(c, tag, eps, d2, mechanism)
	case math.IsInf(eps, 1):
		acc, err = t.cleanReference(c, tag+"_clf", d2, mechanism)
	default:
		acc, err = t.releases(c, tag, eps, d1, d2, mechanism)
	}
	if err != nil {
		return err
	}
	t.record(mech, eps, acc)
	return nil
}

// bound records the best accuracy any classifier reaches on a latent release at ε_test (thesis §4.4).
func (t *reproTrial) bound(eps float64) error {
	acc := 1.0
	if !math.IsInf(eps, 1) {
		rows, err := t.r.query(fmt.Sprintf("SELECT LDP_ACCURACY_BOUND(%g, %d)", t.cfg.lambda*eps, t.k))
		if err != nil {
			return err
		}
		if acc, err = toFloat64(rows[0][0]); err != nil {
			return err
		}
	}
	t.record("bound", eps, acc)
	return nil
}

// featureLevel decodes the releases of d2 at ε (or, at ε = ∞, the clean latents) to pixels and trains a
// classifier of pixels on them, which then reads the clean test images.
func (t *reproTrial) featureLevel(c reproColumn, tag string, eps float64, d2, mechanism string) (float64, error) {
	src, epsX, epsY := d2, 0.0, 0.0
	// ε 64, the largest accepted, is as good as clean for a d = 8 latent of radius l.
	decoded := fmt.Sprintf("LDP_DECODE(LDP_ENCODE(features, 64, '%s'), '%s')", mechanism, mechanism)
	if !math.IsInf(eps, 1) {
		src = tag + "_d2"
		epsX, epsY = t.cfg.lambda*eps, (1-t.cfg.lambda)*eps
		if err := t.privatize(d2, src, eps, mechanism, c.randomiser); err != nil {
			return 0, err
		}
		decoded = fmt.Sprintf("LDP_DECODE(features, '%s')", mechanism)
	}
	dec := tag + "_decoded"
	if _, err := t.r.query(fmt.Sprintf("CREATE TABLE %s AS SELECT label, %s AS features FROM %s", dec, decoded, src)); err != nil {
		return 0, err
	}
	objective, extra := "forward", fmt.Sprintf(`,"mechanism":"%s","randomiser":"laplace","eps_x":%g,"eps_y":%g,"K":%d,"features_col":"features","label_col":"label"`, t.box, epsX, epsY, t.k)
	if math.IsInf(eps, 1) {
		objective, extra = "clean", fmt.Sprintf(`,"mechanism":"%s","features_col":"features","label_col":"label","K":%d`, t.box, t.k)
	}
	model := tag + "_clf"
	if err := t.classifier(model, dec, objective, extra); err != nil {
		return 0, err
	}
	return t.testAccuracy(model)
}

// cleanReference is the ε = ∞ reference: a classifier on the clean encodings (or pixels) of d2 with clean
// labels, one per encoder and D2, shared by the columns that differ only in their randomiser.
func (t *reproTrial) cleanReference(c reproColumn, model, d2, mechanism string) (float64, error) {
	key := mechanism + "@" + d2
	if acc, ok := t.clean[key]; ok {
		return acc, nil
	}
	if c.encoder == "box" {
		model = t.p + "raw_clf" + strings.TrimPrefix(d2, t.p+"d2")
	}
	if err := t.classifier(model, d2, "clean", fmt.Sprintf(`,"mechanism":"%s","features_col":"features","label_col":"label","K":%d`, mechanism, t.k)); err != nil {
		return 0, err
	}
	acc, err := t.testAccuracy(model)
	if err == nil {
		t.clean[key] = acc
	}
	return acc, err
}

// releases privatises d2 at ε through mechanism and c's randomiser, trains c's classifier on the releases
// and returns its accuracy on the clean test images, or, for private inference, on the test images
// released like D2's features.
func (t *reproTrial) releases(c reproColumn, tag string, eps float64, d1, d2, mechanism string) (float64, error) {
	extra := ""
	if c.objective == "marginal" {
		// Each step of the marginal objective runs the MLP over all of D1, so larger batches
		// (fewer steps per epoch, a larger step) are much cheaper per epoch.
		extra = fmt.Sprintf(`,"aux_table":"%s","batch_size":512,"lr":0.002`, d1)
	}
	priv := tag + "_d2"
	if err := t.privatize(d2, priv, eps, mechanism, c.randomiser); err != nil {
		return 0, err
	}
	objective := c.objective
	if objective == "naive" {
		// The releases taken for clean data: a copy without ldp_privatize's metadata, trained on
		// as raw rows.
		naive := tag + "_naive"
		if _, err := t.r.query(fmt.Sprintf("CREATE TABLE %s AS SELECT features, label FROM %s", naive, priv)); err != nil {
			return 0, err
		}
		priv, objective = naive, "clean"
		extra += fmt.Sprintf(`,"mechanism":"%s","features_col":"features","label_col":"label","K":%d`, mechanism, t.k)
	}
	model := tag + "_clf"
	if err := t.classifier(model, priv, objective, extra); err != nil {
		return 0, err
	}
	if !t.cfg.exp.privateTest {
		return t.testAccuracy(model)
	}
	// The test images released like D2's features (no label), classified as releases.
	test := tag + "_test"
	if _, err := t.r.query(fmt.Sprintf("CREATE TABLE %s AS SELECT label, LDP_ENCODE(features, %g, '%s', '%s') AS features FROM %s",
		test, t.cfg.lambda*eps, mechanism, c.randomiser, t.testTable)); err != nil {
		return 0, err
	}
	rows, err := t.r.query(fmt.Sprintf("SELECT AVG(CASE WHEN PREDICT('%s', features, 'release') = label THEN 1.0 ELSE 0.0 END) FROM %s", model, test))
	if err != nil {
		return 0, err
	}
	return toFloat64(rows[0][0])
}

// privatize releases d2 as table dst with ldp_privatize at total ε (λ of it on the features).
func (t *reproTrial) privatize(d2, dst string, eps float64, mechanism, randomiser string) error {
	_, err := t.r.query(fmt.Sprintf("CALL ldp_privatize('%s', 'features', 'label', '%s', %g, %g, '%s', '%s', %d)",
		d2, dst, eps, t.cfg.lambda, mechanism, randomiser, t.k))
	return err
}
