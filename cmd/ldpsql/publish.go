package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ldpsql/ldpsql/client"
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
