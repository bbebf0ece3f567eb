package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/ldpsql/ldpsql/training/datasets"
	"github.com/ldpsql/ldpsql/udf"
)

func datasetCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) < 2 || args[0] != "load" {
		return fmt.Errorf("usage: ldpsql dataset load fashion-mnist|breast-cancer [--db PATH | --addr HOST:PORT] [--into TABLE]")
	}
	which := args[1]
	fs := newFlagSet("dataset load "+which, `Load a data set into tables with a packed float32 feature BLOB (features) and an INT label.
fashion-mnist: TABLE_train (60,000 images) and TABLE_test (10,000), pixels / 255, from
/usr/share/datasets/fashion-mnist (apt-get install dataset-fashion-mnist), $LDPSQL_DATA, or ../shared/data.
breast-cancer: TABLE (569 rows of 30 features, label 0 = malignant, 1 = benign), shipped inside ldpsql.
The data is read here and written into a DuckDB file in process (--db) or sent to a running
`+"`ldpsql serve`"+` as multi-row INSERTs (--addr).`,
		`  ldpsql dataset load fashion-mnist --db ./ldpsql.duckdb
  ldpsql dataset load breast-cancer --into wdbc_vectors
  LDPSQL_PASSWORD=secret ldpsql dataset load fashion-mnist --addr 127.0.0.1:3306
`, stderr)
	tgt := addTargetFlags(fs, "DuckDB file (created if missing), or :memory:")
	into := fs.String("into", "", "table name (prefix for fashion-mnist); default fashion_mnist / breast_cancer")
	if err := fs.Parse(args[2:]); err != nil {
		return err
	}
	ctx := context.Background()
	s, err := tgt.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	start := time.Now()
	switch which {
	case "fashion-mnist":
		if *into == "" {
			*into = "fashion_mnist"
		}
		for _, split := range []string{"train", "test"} {
			imgs, from, err := datasets.LoadFashionMNIST(split)
			if err != nil {
				return err
			}
			table := *into + "_" + split
			t0 := time.Now()
			n, err := loadVectors(ctx, s, table, imgs.Pixels, imgs.Labels)
			if err != nil {
				return err
			}
			secs := time.Since(t0).Seconds()
			fmt.Fprintf(stdout, "loaded %d Fashion-MNIST %s images from %s into %s (%.1f s, %.0f rows/s)\n", n, split, from, table, secs, float64(n)/secs)
		}
	case "breast-cancer":
		if *into == "" {
			*into = "breast_cancer"
		}
		d, err := datasets.LoadWDBC()
		if err != nil {
			return err
		}
		feats := make([][]float32, len(d.Features))
		for i, x := range d.Features {
			feats[i] = make([]float32, len(x))
			for j, v := range x {
				feats[i][j] = float32(v)
			}
		}
		n, err := loadVectors(ctx, s, *into, feats, d.Labels)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "loaded %d WDBC breast-cancer rows into %s\n", n, *into)
	default:
		return fmt.Errorf("unknown data set %q: fashion-mnist or breast-cancer", which)
	}
	fmt.Fprintf(stdout, "done in %.1f s\n", time.Since(start).Seconds())
	return s.close()
}

// loadVectors (re)creates table(id INT PRIMARY KEY, features LONGBLOB, label INT) and fills it; with
// labels nil the table has no label column. In process it is one statement; over the wire, a few
// multi-row INSERTs.
func loadVectors(ctx context.Context, s session, table string, feats [][]float32, labels []int) (int64, error) {
	create := "CREATE TABLE " + quoteTable(table) + " (id INT PRIMARY KEY, features LONGBLOB NOT NULL, label INT NOT NULL)"
	cols := []string{"id", "features", "label"}
	if labels == nil {
		create = "CREATE TABLE " + quoteTable(table) + " (id INT PRIMARY KEY, features LONGBLOB NOT NULL)"
		cols = cols[:2]
	}
	for _, q := range []string{"DROP TABLE IF EXISTS " + quoteTable(table), create} {
		if _, _, err := s.query(ctx, q, nil); err != nil {
			return 0, err
		}
	}
	pos := 0
	return s.insertRows(ctx, table, cols, func() ([][]any, error) {
		if pos >= len(feats) {
			return nil, nil
		}
		end := min(pos+4096, len(feats))
		rows := make([][]any, 0, end-pos)
		for i := pos; i < end; i++ {
			if labels == nil {
				rows = append(rows, []any{int32(i + 1), udf.PackVector(feats[i])})
			} else {
				rows = append(rows, []any{int32(i + 1), udf.PackVector(feats[i]), int32(labels[i])})
			}
		}
		pos = end
		return rows, nil
	})
}
