package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"

	"github.com/ldpsql/ldpsql/plugins/sdk"
	"github.com/ldpsql/ldpsql/udf"
)

// releaseMeta is what `ldpsql privatize` writes beside its releases (OUT.meta.json).
type releaseMeta struct {
	Mechanism  string  `json:"mechanism"`
	SHA256     string  `json:"mechanism_sha256"`
	Randomiser string  `json:"randomiser"`
	Eps        float64 `json:"eps"`
	EpsX       float64 `json:"eps_x"`
	EpsY       float64 `json:"eps_y"`
	K          int     `json:"k"`
	Lambda     float64 `json:"lambda"`
	Label      string  `json:"label"`
	Rows       int     `json:"rows"`
}

// importReleasesCmd is `ldpsql import-releases`: releases made on data owners' machines become a table
// like one ldp_privatize writes (the same metadata in its comment), so TRAIN_NOISY_CLASSIFIER and
// PREDICT work on it.
func importReleasesCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("import-releases", `Load releases made with ldpsql privatize (the CSV and its .meta.json) into a new table that
TRAIN_NOISY_CLASSIFIER and PREDICT treat as an ldp_privatize table: columns id, features (the released
vector) and the released label, and the release metadata in the table's comment. The mechanism must be
registered here with the dimension the releases have; anything that does not match is an error and
nothing is written.`,
		`  ldpsql import-releases --db ./ldpsql.duckdb --in releases.csv --table collected
  ldpsql import-releases --addr 127.0.0.1:3306 --in releases.csv --meta releases.csv.meta.json --table collected
`, stderr)
	tgt := addTargetFlags(fs, "DuckDB file")
	in := fs.String("in", "", "the releases CSV")
	metaPath := fs.String("meta", "", "its metadata (default IN.meta.json)")
	table := fs.String("table", "", "table to create")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *table == "" {
		fs.Usage()
		return errors.New("--in and --table are required")
	}
	if *metaPath == "" {
		*metaPath = *in + ".meta.json"
	}
	raw, err := os.ReadFile(*metaPath)
	if err != nil {
		return fmt.Errorf("the releases' metadata: %w", err)
	}
	var meta releaseMeta
	if err := json.Unmarshal(raw, &meta); err != nil {
		return fmt.Errorf("%s: %w", *metaPath, err)
	}
	switch {
	case meta.Mechanism == "":
		return fmt.Errorf("%s names no mechanism", *metaPath)
	case !(meta.EpsX > 0) || meta.EpsX > 64 || math.IsInf(meta.Eps, 0):
		return fmt.Errorf("%s: eps_x %v is not a release ε", *metaPath, meta.EpsX)
	case meta.Label != "" && (meta.K < 2 || !(meta.EpsY > 0) || !(meta.Lambda > 0 && meta.Lambda < 1)):
		return fmt.Errorf("%s: a label released with k %d, eps_y %v, lambda %v", *metaPath, meta.K, meta.EpsY, meta.Lambda)
	}
	ctx := context.Background()
	s, err := tgt.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	r, err := queryAll(ctx, s, fmt.Sprintf("SELECT description FROM ldpsql_catalog.ldp_mechanisms WHERE name = %s", sqlQuote(meta.Mechanism)))
	if err != nil {
		return err
	}
	if len(r.rows) != 1 {
		return fmt.Errorf("the releases were made with mechanism %q, which is not registered here", meta.Mechanism)
	}
	var desc sdk.Description
	dj, _ := r.rows[0][0].(string)
	if b, ok := r.rows[0][0].([]byte); ok {
		dj = string(b)
	}
	if err := json.Unmarshal([]byte(dj), &desc); err != nil {
		return fmt.Errorf("mechanism %q: its description: %w", meta.Mechanism, err)
	}
	set := desc.OutputSet.Describe()

	f, err := os.Open(*in)
	if err != nil {
		return err
	}
	defer f.Close()
	cr := csv.NewReader(f)
	header, err := cr.Read()
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	zAt, idAt, labelAt := []int{}, -1, -1
	for i, h := range header {
		switch {
		case h == fmt.Sprintf("z%d", len(zAt)+1):
			zAt = append(zAt, i)
		case h == meta.Label && meta.Label != "":
			labelAt = i
		case idAt < 0:
			idAt = i
		default:
			return fmt.Errorf("%s: unexpected column %q (want an id, z1..z%d and the label %q)", *in, h, desc.OutputDim, meta.Label)
		}
	}
	if len(zAt) != desc.OutputDim {
		return fmt.Errorf("%s has %d released values per row, mechanism %q releases %d", *in, len(zAt), meta.Mechanism, desc.OutputDim)
	}
	if meta.Label != "" && labelAt < 0 {
		return fmt.Errorf("%s has no label column %q, which its metadata names", *in, meta.Label)
	}
	var rows [][]any
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", *in, err)
		}
		z := make([]float32, len(zAt))
		for j, c := range zAt {
			v, err := strconv.ParseFloat(rec[c], 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("%s line %d: %s = %q is not a finite number", *in, line, header[c], rec[c])
			}
			z[j] = float32(v)
		}
		id := int64(line - 1)
		if idAt >= 0 {
			if id, err = strconv.ParseInt(rec[idAt], 10, 64); err != nil {
				return fmt.Errorf("%s line %d: id %q is not an integer", *in, line, rec[idAt])
			}
		}
		row := []any{id, udf.PackVector(z)}
		if labelAt >= 0 {
			y, err := strconv.Atoi(rec[labelAt])
			if err != nil || y < 0 || y >= meta.K {
				return fmt.Errorf("%s line %d: label %q is not a class 0..%d", *in, line, rec[labelAt], meta.K-1)
			}
			row = append(row, int64(y))
		}
		rows = append(rows, row)
	}
	if meta.Rows != 0 && meta.Rows != len(rows) {
		return fmt.Errorf("%s has %d rows, its metadata %d", *in, len(rows), meta.Rows)
	}
	lambda := meta.Lambda
	if meta.Label == "" {
		lambda = 1
	}
	pm := udf.PrivatizeMetadata{Source: "client releases " + meta.SHA256, Mechanism: meta.Mechanism, Randomiser: meta.Randomiser,
		Epsilon: meta.Eps, Lambda: lambda, EpsX: meta.EpsX, EpsY: meta.EpsY, FeaturesCol: "features", OutputDim: desc.OutputDim, OutputSet: set}
	cols := []string{"id", "features"}
	defs := "id BIGINT PRIMARY KEY, features LONGBLOB NOT NULL"
	if meta.Label != "" {
		pm.K, pm.LabelCol = meta.K, "label"
		cols = append(cols, "label")
		defs += ", label INT NOT NULL"
	}
	comment, _ := json.Marshal(map[string]any{"ldp_privatize": pm})
	if _, err := queryAll(ctx, s, fmt.Sprintf("CREATE TABLE %s (%s) COMMENT=%s", quoteTable(*table), defs, sqlQuote(string(comment)))); err != nil {
		return err
	}
	i := 0
	n, err := s.insertRows(ctx, *table, cols, func() ([][]any, error) {
		if i >= len(rows) {
			return nil, nil // the end
		}
		b := rows[i:min(len(rows), i+1000)]
		i += len(b)
		return b, nil
	})
	if err != nil {
		_, _ = queryAll(ctx, s, "DROP TABLE "+quoteTable(*table))
		return fmt.Errorf("writing %s: %w (the table was dropped)", *table, err)
	}
	fmt.Fprintf(stdout, "imported %d releases of mechanism %q into %s (ε_x %g%s)\n", n, meta.Mechanism, *table, meta.EpsX,
		map[bool]string{true: fmt.Sprintf(", label by %d-RR at ε_y %g", meta.K, meta.EpsY), false: ""}[meta.Label != ""])
	return s.close()
}
