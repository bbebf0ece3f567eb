package main

import (
	"context"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ldpsql/ldpsql/client"
	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/plugins/sdk"
)

// mechanismExportCmd is `ldpsql mechanisms export NAME --out NAME.ldpm`: the registered mechanism's
// model, declared output set and training record as one file a data owner privatises with
// (`ldpsql privatize`, package client).
func mechanismExportCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("mechanisms export", `Write a registered mechanism as one publishable file (.ldpm): its encoder's model, the output set
it declares, the parameters it was trained with (a CDP record among them) and SHA-256 digests. Data
owners privatise with it on their own machines (ldpsql privatize). A mechanism trained without CDP on
a table protected by the privacy ledger is refused: its weights are not protected; --public declares
that table public (a DBA's decision, recorded in the file).`,
		`  ldpsql mechanisms export vlm_cdp --db ./ldpsql.duckdb --out vlm_cdp.ldpm
  LDPSQL_PASSWORD=secret ldpsql mechanisms export my_pca --addr 127.0.0.1:3306 --out my_pca.ldpm
`, stderr)
	tgt := addTargetFlags(fs, "DuckDB file")
	out := fs.String("out", "", "file to write (default NAME.ldpm)")
	public := fs.Bool("public", false, "the training table is public: export even without CDP on a protected table")
	// The name may come before the flags (export NAME --out f) or after them.
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() >= 1 {
		name, rest := fs.Arg(0), fs.Args()[1:]
		if err := fs.Parse(rest); err != nil {
			return err
		}
		args = append([]string{name}, fs.Args()...)
	} else {
		args = nil
	}
	if len(args) != 1 {
		fs.Usage()
		return errors.New("name one mechanism")
	}
	name := args[0]
	if *out == "" {
		*out = name + ".ldpm"
	}
	ctx := context.Background()
	s, err := tgt.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	r, err := queryAll(ctx, s, fmt.Sprintf("SELECT m.plugin, m.params, m.training_table, m.training_rows, HEX(m.artifact), k.description "+
		"FROM ldpsql_catalog.ldp_mechanisms k JOIN ldpsql_catalog.ldp_models m ON m.name = k.model WHERE k.name = %s", sqlQuote(name)))
	if err != nil {
		return err
	}
	if len(r.rows) != 1 {
		return fmt.Errorf("no mechanism %q with a model (SELECT name, model FROM ldpsql_catalog.ldp_mechanisms lists them; a plugin registered without a fitted or trained model cannot be exported)", name)
	}
	row := r.rows[0]
	str := func(v any) string {
		switch v := v.(type) {
		case []byte:
			return string(v)
		case nil:
			return ""
		}
		return fmt.Sprint(v)
	}
	plugin, params, table := str(row[0]), str(row[1]), str(row[2])
	rows, _ := int64Value(row[3])
	artifact, err := hex.DecodeString(str(row[4]))
	if err != nil {
		return fmt.Errorf("reading the model: %w", err)
	}
	var desc sdk.Description
	if err := json.Unmarshal([]byte(str(row[5])), &desc); err != nil {
		return fmt.Errorf("reading the mechanism's description: %w", err)
	}
	set := client.Set{Kind: "l1_ball", Radius: desc.OutputSet.Radius}
	if desc.OutputSet.Kind == sdk.BoxSet {
		set = client.Set{Kind: "box", Lo: desc.OutputSet.Lo, Hi: desc.OutputSet.Hi}
	}
	var p map[string]json.RawMessage
	_ = json.Unmarshal([]byte(params), &p)
	_, cdp := p["cdp"]
	if db, tbl, ok := strings.Cut(table, "."); ok && !cdp {
		b, err := queryAll(ctx, s, fmt.Sprintf("SELECT COUNT(*) FROM ldpsql_catalog.ldp_budget WHERE LOWER(db) = LOWER(%s) AND LOWER(table_name) = LOWER(%s)", sqlQuote(db), sqlQuote(tbl)))
		if err != nil {
			return fmt.Errorf("checking whether %s is protected (a DBA exports mechanisms): %w", table, err)
		}
		if n, _ := int64Value(b.firstValue()); n > 0 && !*public {
			return fmt.Errorf("mechanism %q was trained without CDP on %s, which the privacy ledger protects: its weights can reveal those rows; "+
				"train it with \"cdp\" (CALL ldp_train_mechanism), or pass --public if the table may be published", name, table)
		}
	}
	data, err := client.Marshal(client.File{Name: name, Plugin: plugin, InputDim: desc.InputDim, OutputDim: desc.OutputDim, Set: set,
		Artifact: artifact, Params: json.RawMessage(params), TrainedOn: table, Rows: rows, Public: *public, ExportedBy: s.where(), ExportedAt: time.Now().UTC()})
	if err != nil {
		return err
	}
	if _, err := client.Load(data); err != nil { // what a data owner will load must load
		return fmt.Errorf("the exported file does not load: %w", err)
	}
	if err := os.WriteFile(*out, data, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: mechanism %q (%s, %d → %d values, %s)\n", *out, name, plugin, desc.InputDim, desc.OutputDim, set.Kind)
	return s.close()
}

// privatizeCmd is `ldpsql privatize`: a data owner's rows, released with a published mechanism file on
// their own machine.
func privatizeCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("privatize", `Privatise rows on this machine with a published mechanism file (.ldpm, from ldpsql mechanisms
export): each row of the input CSV is encoded, clipped into the mechanism's declared set and released
with the randomiser's noise at eps; with --label the label is released by k-ary randomised response
and the budget split as in ldp_privatize (features (λ·eps), label ((1−λ)·eps)). Only the output file
need leave the machine. The noise comes from crypto/rand. Writes the releases as CSV (id, z1..zd,
label) and OUT.meta.json with what they were released with.`,
		`  ldpsql privatize --mechanism vlm_cdp.ldpm --eps 4 --in rows.csv --out releases.csv
  ldpsql privatize --mechanism my_pca.ldpm --eps 8 --label y --k 10 --lambda 0.7 --id id --in rows.csv --out releases.csv
`, stderr)
	mechPath := fs.String("mechanism", "", "mechanism file (.ldpm)")
	eps := fs.Float64("eps", 0, "total ε of each row's release")
	randomiser := fs.String("randomiser", mechanisms.RandomiserLaplace, "laplace, duchi or privunit")
	in := fs.String("in", "", "input CSV with a header: the feature columns (and the --id and --label columns)")
	out := fs.String("out", "", "output CSV")
	idCol := fs.String("id", "", "a column copied to the output as it is (a row id; never privatised)")
	labelCol := fs.String("label", "", "a label column (integers 0..k−1), released by k-RR")
	k := fs.Int("k", 2, "label classes")
	lambda := fs.Float64("lambda", 0.7, "share of eps for the features when --label is given")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *mechPath == "" || *in == "" || *out == "" || !(*eps > 0) {
		fs.Usage()
		return errors.New("--mechanism, --eps, --in and --out are required")
	}
	raw, err := os.ReadFile(*mechPath)
	if err != nil {
		return err
	}
	m, err := client.Load(raw)
	if err != nil {
		return err
	}
	epsX, epsY := *eps, 0.0
	var krr *mechanisms.KRR
	if *labelCol != "" {
		if !(*lambda > 0 && *lambda < 1) {
			return fmt.Errorf("--lambda %v: want 0 < λ < 1", *lambda)
		}
		epsX, epsY = *lambda**eps, (1-*lambda)**eps
		if krr, err = mechanisms.NewKRR(epsY, *k); err != nil {
			return fmt.Errorf("--label: %w", err)
		}
	}
	f, err := os.Open(*in)
	if err != nil {
		return err
	}
	defer f.Close()
	cr := csv.NewReader(f)
	header, err := cr.Read()
	if err != nil {
		return fmt.Errorf("%s: reading the header: %w", *in, err)
	}
	idAt, labelAt := slices.Index(header, *idCol), slices.Index(header, *labelCol)
	if *idCol != "" && idAt < 0 {
		return fmt.Errorf("%s has no column %q (columns: %s)", *in, *idCol, strings.Join(header, ", "))
	}
	if *labelCol != "" && labelAt < 0 {
		return fmt.Errorf("%s has no column %q (columns: %s)", *in, *labelCol, strings.Join(header, ", "))
	}
	var featureAt []int
	for i := range header {
		if i != idAt && i != labelAt {
			featureAt = append(featureAt, i)
		}
	}
	if len(featureAt) != m.File.InputDim {
		return fmt.Errorf("%s has %d feature columns, mechanism %q takes %d", *in, len(featureAt), m.File.Name, m.File.InputDim)
	}
	var rows [][]float32
	var ids []string
	var labels []int
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", *in, err)
		}
		x := make([]float32, len(featureAt))
		for j, c := range featureAt {
			v, err := strconv.ParseFloat(strings.TrimSpace(rec[c]), 32)
			if err != nil {
				return fmt.Errorf("%s line %d, column %s: %q is not a number", *in, line, header[c], rec[c])
			}
			x[j] = float32(v)
		}
		rows = append(rows, x)
		if idAt >= 0 {
			ids = append(ids, rec[idAt])
		}
		if labelAt >= 0 {
			y, err := strconv.Atoi(strings.TrimSpace(rec[labelAt]))
			if err != nil || y < 0 || y >= *k {
				return fmt.Errorf("%s line %d: label %q is not a class 0..%d", *in, line, rec[labelAt], *k-1)
			}
			labels = append(labels, y)
		}
	}
	src := mechanisms.NewCryptoSource()
	rel, err := m.Privatise(rows, *randomiser, epsX, src)
	if err != nil {
		return err
	}
	var b strings.Builder
	w := csv.NewWriter(&b)
	head := []string{}
	if idAt >= 0 {
		head = append(head, *idCol)
	}
	for j := range m.File.OutputDim {
		head = append(head, fmt.Sprintf("z%d", j+1))
	}
	if labelAt >= 0 {
		head = append(head, *labelCol)
	}
	_ = w.Write(head)
	for i, z := range rel {
		rec := []string{}
		if idAt >= 0 {
			rec = append(rec, ids[i])
		}
		for _, v := range z {
			rec = append(rec, strconv.FormatFloat(float64(float32(v)), 'g', -1, 32))
		}
		if labelAt >= 0 {
			y, err := krr.Randomise(labels[i], src)
			if err != nil {
				return err
			}
			rec = append(rec, strconv.Itoa(y))
		}
		_ = w.Write(rec)
	}
	w.Flush()
	if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
		return err
	}
	meta, _ := json.MarshalIndent(map[string]any{"mechanism": m.File.Name, "mechanism_sha256": m.File.SHA256, "randomiser": *randomiser,
		"eps": *eps, "eps_x": epsX, "eps_y": epsY, "k": *k, "lambda": *lambda, "label": *labelCol, "rows": len(rel), "released_at": time.Now().UTC()}, "", "  ")
	if err := os.WriteFile(*out+".meta.json", meta, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "released %d rows with %q at ε = %g (features %g, label %g): %s, %s.meta.json\n", len(rel), m.File.Name, *eps, epsX, epsY, *out, *out)
	return nil
}
