package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/ldpsql/ldpsql/client"
	"github.com/ldpsql/ldpsql/internal/rowfile"
	"github.com/ldpsql/ldpsql/mechanisms"
)

// testNoiseSeed, set by tests only, replaces crypto/rand as the releases' noise so that a test can
// compare the releases of the same rows read from CSV and from Parquet. Nil outside tests.
var testNoiseSeed *uint64

// privatizeBatch rows are encoded and released at a time: enough for the encoder's matrix products,
// few enough that memory does not grow with the input. A variable so that a test can make it small.
var privatizeBatch = 4096

// privatizeCmd is `ldpsql privatize`: a data owner's rows, released with a published mechanism file on
// their own machine.
func privatizeCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("privatize", `Privatise rows on this machine with a published mechanism file (.ldpm, from ldpsql mechanisms
export): each input row is encoded, clipped into the mechanism's declared set and released with the
randomiser's noise at eps; with --label the label is released by k-ary randomised response and the
budget split as in ldp_privatize (features (λ·eps), label ((1−λ)·eps)). Only the output file need
leave the machine. The noise comes from crypto/rand.

--in and --out are CSV or Parquet, by their extension (.csv, .parquet), in any mix. Input: every
column but --id and --label is a feature, in order; in Parquet a list column (LIST of numbers) holds
several, e.g. one column with the whole vector. Output: CSV with columns id, z1..zd, label and
OUT.meta.json beside it with what the releases were made with; or Parquet with columns id (BIGINT if
every id is an integer, else VARCHAR), z (LIST<FLOAT>, d values) and the label (INTEGER), and the same
metadata as JSON in its key-value metadata under "ldpsql.releases".`,
		`  ldpsql privatize --mechanism vlm_cdp.ldpm --eps 4 --in rows.csv --out releases.csv
  ldpsql privatize --mechanism my_pca.ldpm --eps 8 --label y --k 10 --lambda 0.7 --id id --in rows.csv --out releases.csv
  ldpsql privatize --mechanism my_pca.ldpm --eps 8 --label y --k 10 --id id --in rows.parquet --out releases.parquet
`, stderr)
	mechPath := fs.String("mechanism", "", "mechanism file (.ldpm)")
	eps := fs.Float64("eps", 0, "total ε of each row's release")
	randomiser := fs.String("randomiser", mechanisms.RandomiserLaplace, "laplace, duchi, privunit or rrB (a box mechanism only: randomised response on B bins per coordinate, e.g. rr2)")
	in := fs.String("in", "", "input rows, .csv (with a header) or .parquet: the features (and the --id and --label columns)")
	out := fs.String("out", "", "output releases, .csv (and OUT.meta.json) or .parquet")
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
	if _, err := rowfile.FormatOf(*in); err != nil {
		return fmt.Errorf("--in: %w", err)
	}
	if _, err := rowfile.FormatOf(*out); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if mechanisms.CheckRandomiserName(*randomiser) != nil {
		return fmt.Errorf("--randomiser %q: want one of %s", *randomiser, mechanisms.RandomiserNamesText())
	}
	raw, err := os.ReadFile(*mechPath)
	if err != nil {
		return err
	}
	m, err := client.Load(raw)
	if err != nil {
		return err
	}
	rel, err := client.NewReleaser(m, *randomiser, *eps, *labelCol, *k, *lambda)
	if err != nil {
		return err
	}
	if c := rel.Caveat(); c != "" {
		fmt.Fprintf(stderr, "warning: mechanism %q: %s\n", m.File.Name, c)
	}

	src, err := rowfile.Open(*in)
	if err != nil {
		return err
	}
	defer src.Close()
	lay, err := rowfile.NewLayout(*in, src.Columns(), *idCol, *labelCol, nil, m.File.InputDim, m.File.Name, *k)
	if err != nil {
		return err
	}
	sink, err := rowfile.Create(*out, lay.Out(m.File.OutputDim))
	if err != nil {
		return err
	}
	defer sink.Discard()

	noise := mechanisms.NewCryptoSource()
	if testNoiseSeed != nil {
		noise = mechanisms.NewSeededSource(*testNoiseSeed)
	}
	n, err := releaseRows(src, lay, sink, rel, noise, m.File.OutputDim)
	if err != nil {
		return err
	}
	meta, _ := json.MarshalIndent(rel.Meta(n), "", "  ")
	if err := sink.Finish(meta); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "released %d rows with %q at ε = %g (features %g, label %g): %s, %s\n", n, m.File.Name, *eps, rel.EpsX, rel.EpsY, *out, rowfile.MetadataAt(*out))
	return nil
}

// releaseRows releases every row of src into sink, privatizeBatch rows at a time, and returns how
// many it wrote.
func releaseRows(src rowfile.Source, lay *rowfile.Layout, sink rowfile.Sink, rel *client.Releaser, noise mechanisms.Source, dim int) (int, error) {
	var (
		xs     [][]float32
		ids    []string
		labels []int
		n      int
		cells  []any
		z      = make([]float32, dim)
	)
	release := func() error {
		if len(xs) == 0 {
			return nil
		}
		zs, ys, err := rel.Release(xs, labels, noise)
		if err != nil {
			return err
		}
		for i, r := range zs {
			cells = cells[:0]
			if lay.IDAt >= 0 {
				cells = append(cells, ids[i])
			}
			for j, v := range r {
				z[j] = float32(v)
			}
			cells = append(cells, z)
			if lay.LabelAt >= 0 {
				cells = append(cells, ys[i])
			}
			if err := sink.Write(cells...); err != nil {
				return err
			}
		}
		n += len(zs)
		xs, ids, labels = xs[:0], ids[:0], labels[:0]
		return nil
	}
	for {
		row, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return n, err
		}
		x, id, y, err := lay.Row(row, src.Where())
		if err != nil {
			return n, err
		}
		xs, ids, labels = append(xs, x), append(ids, id), append(labels, y)
		if len(xs) == privatizeBatch {
			if err := release(); err != nil {
				return n, err
			}
		}
	}
	return n, release()
}
