package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/mechanisms/audit"
	"github.com/ldpsql/ldpsql/plugins/sdk"
	"github.com/ldpsql/ldpsql/udf"
)

// auditMechanisms are the randomisers `ldpsql audit` knows, in the order `all` runs them.
var auditMechanisms = []string{"krr", "laplace", "laplace-ball", "laplace-box", "duchi", "privunit", "rr"}

func auditCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("audit MECHANISM", `Estimate a randomiser's privacy loss from samples and test it against the ε it claims
(package mechanisms/audit). Releases are drawn at two neighbouring inputs that maximise the loss;
an event is chosen on half of them, and a Clopper–Pearson lower confidence bound on the loss is
computed on the other half. The audit FAILS (exit status 1) if that bound exceeds the effective ε
the randomiser guarantees (its ε after discretisation and rounding, ≤ the requested ε).

MECHANISM is one of
  krr           K-ary randomised response (--k labels)
  laplace       scalar Laplace of sensitivity --sensitivity, on its power-of-two grid
  laplace-ball  vector Laplace on the ℓ1 ball of radius 1 in --dim dimensions (default 8)
  laplace-box   vector Laplace on the box [0, 1]^dim, ε/dim per coordinate (default dim 4)
  duchi         Duchi et al. on the box [0, 1]^dim (default dim 4)
  privunit      PrivUnit2 + ScalarDP on the ℓ1 ball of radius 1 (default dim 16)
  rr            randomised response on 4 bins of each coordinate of [0, 1]^dim (rr4), ε/dim each (default dim 2)
  all           every one of the above
  encode:NAME   the registered mechanism NAME in --db, through LDP_ENCODE_JSON itself (its plugin
                encoder, the host's clip into the recorded set, --randomiser): the inputs are
                candidates (--inputs, or ±10⁶ along a few directions), each encoding is estimated
                from --pilot releases, and the three pairs whose encodings lie farthest apart are
                tried (and a candidate whose statement fails, if any, against one that succeeds)`,
		`  ldpsql audit krr --eps 1
  ldpsql audit laplace-box --eps 2 --dim 6 --samples 2000000
  ldpsql audit all --eps 1 --seed 1
  ldpsql audit encode:my_pca --db ./ldpsql.duckdb --eps 1 --randomiser laplace --samples 200000
`, stderr)
	eps := fs.Float64("eps", 1, "the ε to build the randomiser for")
	samples := fs.Int("samples", audit.DefaultSamples, "releases per input (half choose the event, half test it)")
	confidence := fs.Float64("confidence", audit.DefaultConfidence, "confidence 1 − α of the lower bound")
	dim := fs.Int("dim", 0, "dimension of the vector randomisers (0: the mechanism's default)")
	k := fs.Int("k", 4, "number of labels for krr")
	sens := fs.Float64("sensitivity", 1, "sensitivity Δ for laplace")
	seed := fs.Uint64("seed", 0, "seed a deterministic noise source, for a reproducible report (0: the cryptographic source; not for encode:)")
	db := fs.String("db", engine.DefaultPath, "DuckDB file holding the mechanism (encode: only)")
	randomiser := fs.String("randomiser", mechanisms.RandomiserLaplace, "randomiser LDP_ENCODE uses (encode: only): "+mechanisms.RandomiserNamesText())
	inputs := fs.String("inputs", "", `candidate inputs as a JSON array of feature vectors (encode: only), e.g. "[[0,1],[1,0]]"`)
	pilot := fs.Int("pilot", encodeBatch, "releases per candidate to estimate its encoding (encode: only)")
	// The mechanism may come before or after the flags.
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if name == "" && fs.NArg() > 0 {
		name = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q after the flags", fs.Arg(0))
	}
	if name == "" {
		fs.Usage()
		return fmt.Errorf("name the mechanism to audit: one of %s, all", strings.Join(auditMechanisms, ", "))
	}
	names := []string{name}
	if name == "all" {
		names = auditMechanisms
	}
	cfg := audit.Config{Samples: *samples, Confidence: *confidence}
	if *seed != 0 {
		cfg.Source = mechanisms.NewSeededSource(*seed)
	}
	var results []audit.Result
	for _, n := range names {
		var m audit.Mechanism
		var err error
		if mech, ok := strings.CutPrefix(n, "encode:"); ok {
			e, err := openEngine(*db, udf.Config{})
			if err != nil {
				return err
			}
			defer e.Close()
			if m, err = encodePlan(e, mech, *randomiser, *eps, *inputs, *pilot); err != nil {
				return err
			}
		} else if m, err = auditPlan(n, *eps, *dim, *k, *sens); err != nil {
			return err
		}
		start := time.Now()
		r, err := audit.Run(m, cfg)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "%s: %d releases in %.1fs\n", r.Mechanism, r.Releases, time.Since(start).Seconds())
		results = append(results, r)
	}
	printAudit(stdout, results)
	var failed []string
	for _, r := range results {
		if !r.Pass {
			failed = append(failed, r.Mechanism)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("FAIL: the estimated privacy loss of %s exceeds its effective ε at confidence %v", strings.Join(failed, ", "), *confidence)
	}
	return nil
}

// auditPlan builds the randomiser called name and its audit plan.
func auditPlan(name string, eps float64, dim, k int, sens float64) (audit.Mechanism, error) {
	dimOr := func(def int) int {
		if dim > 0 {
			return dim
		}
		return def
	}
	vector := func(rnd string, set mechanisms.OutputSet) (audit.Mechanism, error) {
		r, err := mechanisms.NewRandomiser(rnd, set, eps)
		if err != nil {
			return audit.Mechanism{}, err
		}
		return audit.Vector(r)
	}
	unitBox := func(d int) mechanisms.Box {
		b := mechanisms.Box{Lo: make([]float64, d), Hi: make([]float64, d)}
		for i := range b.Hi {
			b.Hi[i] = 1
		}
		return b
	}
	switch name {
	case "krr":
		r, err := mechanisms.NewKRR(eps, k)
		if err != nil {
			return audit.Mechanism{}, err
		}
		return audit.KRR(r), nil
	case "laplace":
		l, err := mechanisms.NewLaplace(sens, eps, 1)
		if err != nil {
			return audit.Mechanism{}, err
		}
		return audit.Laplace(l)
	case "laplace-ball":
		return vector(mechanisms.RandomiserLaplace, mechanisms.L1Ball{D: dimOr(8), Radius: 1})
	case "laplace-box":
		return vector(mechanisms.RandomiserLaplace, unitBox(dimOr(4)))
	case "duchi":
		return vector(mechanisms.RandomiserDuchi, unitBox(dimOr(4)))
	case "privunit":
		return vector(mechanisms.RandomiserPrivUnit, mechanisms.L1Ball{D: dimOr(16), Radius: 1})
	case "rr":
		return vector(mechanisms.RRName(4), unitBox(dimOr(2)))
	}
	return audit.Mechanism{}, fmt.Errorf("unknown mechanism %q: valid are %s, all, encode:NAME", name, strings.Join(auditMechanisms, ", "))
}

// encodeBatch is how many releases one LDP_ENCODE_JSON statement of the encode: audit makes (the plugin
// is called once per 4,096 rows).
const encodeBatch = 4096

// encodePlan builds the audit of the registered mechanism name through LDP_ENCODE_JSON: the release of a
// candidate is a row of
//
//	WITH RECURSIVE n(i) AS (…4,096 rows…) SELECT LDP_ENCODE_JSON(LDP_VECTOR(x…), eps, 'name', 'rnd') FROM n
//
// so the plugin, the host's checks and clip, and the randomiser are exactly those of LDP_ENCODE. A failed
// statement is a refusal (an outcome the caller sees). The randomiser's ε and the set for the partitions
// come from the catalog record, as udf builds them.
func encodePlan(e *engine.Engine, name, rnd string, eps float64, inputsJSON string, pilot int) (audit.Mechanism, error) {
	ctx := context.Background()
	rec, err := e.Catalog.Mechanism(ctx, name)
	if err != nil {
		return audit.Mechanism{}, err
	}
	var desc sdk.Description
	if err := json.Unmarshal(rec.Description, &desc); err != nil {
		return audit.Mechanism{}, fmt.Errorf("mechanism %q: recorded description: %w", name, err)
	}
	set, ok := desc.RandomiserSet()
	if !ok {
		return audit.Mechanism{}, fmt.Errorf("mechanism %q has no fitted model (no output set): fit one with CALL ldp_fit_mechanism", name)
	}
	r, err := mechanisms.NewRandomiser(strings.ToLower(rnd), set, eps)
	if err != nil {
		return audit.Mechanism{}, err
	}
	var inputs [][]float64
	if inputsJSON != "" {
		if err := json.Unmarshal([]byte(inputsJSON), &inputs); err != nil {
			return audit.Mechanism{}, fmt.Errorf("--inputs: %w", err)
		}
		for i, x := range inputs {
			if len(x) != desc.InputDim {
				return audit.Mechanism{}, fmt.Errorf("--inputs: vector %d has %d values, mechanism %q expects %d", i, len(x), name, desc.InputDim)
			}
		}
	} else {
		inputs = encodeCandidates(desc.InputDim)
	}
	epsText := strconv.FormatFloat(eps, 'g', -1, 64)
	queries := make(map[*float64]string, len(inputs))
	for _, x := range inputs {
		if len(x) == 0 {
			return audit.Mechanism{}, fmt.Errorf("--inputs: empty vector")
		}
		args := make([]string, len(x))
		for i, v := range x {
			args[i] = strconv.FormatFloat(float64(float32(v)), 'g', -1, 32)
		}
		queries[&x[0]] = fmt.Sprintf("WITH RECURSIVE ldp_audit_rows(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM ldp_audit_rows WHERE i < %d) "+
			"SELECT LDP_ENCODE_JSON(LDP_VECTOR(%s), %s, %s, %s) FROM ldp_audit_rows",
			encodeBatch, strings.Join(args, ", "), epsText, sqlQuote(name), sqlQuote(r.Name()))
	}
	buffers := map[*float64][][]float64{}
	release := func(x []float64, _ mechanisms.Source) ([]float64, error) {
		key := &x[0]
		if b := buffers[key]; len(b) > 0 {
			buffers[key] = b[1:]
			return b[0], nil
		}
		q, ok := queries[key]
		if !ok {
			return nil, fmt.Errorf("not a candidate input")
		}
		_, rows, err := e.Query(e.NewContext(ctx), q)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", audit.ErrRefused, err)
		}
		b := make([][]float64, len(rows))
		for i, row := range rows {
			if err := json.Unmarshal([]byte(formatValue(row[0])), &b[i]); err != nil {
				return nil, fmt.Errorf("parsing a release of LDP_ENCODE_JSON: %w", err)
			}
		}
		if len(b) == 0 {
			return nil, fmt.Errorf("LDP_ENCODE_JSON returned no rows")
		}
		buffers[key] = b[1:]
		return b[0], nil
	}
	label := fmt.Sprintf("LDP_ENCODE(%s, %s)", name, r.Name())
	return audit.Released(label, release, r, inputs, pilot, nil)
}

// encodeCandidates returns the default candidate inputs of dimension d: 0, and ±10⁶ times the all-ones
// vector, the first basis vector and the alternating vector (1, −1, 1, …). Far outside any data, they push
// a linear encoder (pca) and a clipping one (identity) to opposite points of their output sets.
func encodeCandidates(d int) [][]float64 {
	const c = 1e6
	dirs := make([][]float64, 3)
	for i := range dirs {
		dirs[i] = make([]float64, d)
	}
	for j := range d {
		dirs[0][j] = 1
		dirs[2][j] = float64(1 - 2*(j%2))
	}
	dirs[1][0] = 1
	out := [][]float64{make([]float64, d)}
	for _, v := range dirs {
		plus, minus := make([]float64, d), make([]float64, d)
		for j := range v {
			plus[j], minus[j] = c*v[j], -c*v[j]
		}
		out = append(out, plus, minus)
	}
	return out
}

// printAudit prints the results as a table, then the pair and event behind each estimate.
func printAudit(w io.Writer, results []audit.Result) {
	if len(results) == 0 {
		return
	}
	conf := strconv.FormatFloat(results[0].Confidence, 'g', -1, 64)
	head := []string{"mechanism", "claimed ε", "effective ε", "ε̂ point", "ε̂ lower (" + conf + ")", "samples", "verdict"}
	rows := make([][]string, len(results))
	for i, r := range results {
		rows[i] = []string{
			r.Mechanism,
			strconv.FormatFloat(r.Claimed, 'g', -1, 64),
			strconv.FormatFloat(r.Effective, 'g', -1, 64),
			fmt.Sprintf("%.4f", r.Point),
			fmt.Sprintf("%.4f", r.Lower),
			strconv.Itoa(r.Samples),
			r.Verdict(),
		}
	}
	widths := make([]int, len(head))
	for j, h := range head {
		widths[j] = displayWidth(h)
		for _, row := range rows {
			widths[j] = max(widths[j], displayWidth(row[j]))
		}
	}
	sep := "+"
	for _, wd := range widths {
		sep += strings.Repeat("-", wd+2) + "+"
	}
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString("|")
		for j, c := range cells {
			b.WriteString(" " + c + strings.Repeat(" ", widths[j]-displayWidth(c)) + " |")
		}
		fmt.Fprintln(w, b.String())
	}
	fmt.Fprintln(w, sep)
	line(head)
	fmt.Fprintln(w, sep)
	for _, row := range rows {
		line(row)
	}
	fmt.Fprintln(w, sep)
	for _, r := range results {
		fmt.Fprintf(w, "%s: pair %s; event %s, held out %d vs %d of %d\n", r.Mechanism, r.Pair, r.Event, r.K1, r.K2, r.HeldOut)
	}
}

// displayWidth is the number of columns s takes: its runes less the combining marks (the hat of ε̂).
func displayWidth(s string) int {
	n := 0
	for _, r := range s {
		if !unicode.Is(unicode.Mn, r) {
			n++
		}
	}
	return n
}
