package datasets

import (
	"bytes"
	_ "embed"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
)

//go:embed wdbc.csv
var wdbcCSV []byte

// WDBCFeatureNames are the 30 WDBC features, in file order, as SQL-friendly column names.
var WDBCFeatureNames = func() []string {
	base := []string{"radius", "texture", "perimeter", "area", "smoothness", "compactness", "concavity",
		"concave_points", "symmetry", "fractal_dimension"}
	var names []string
	for _, group := range []string{"mean", "error", "worst"} {
		for _, b := range base {
			names = append(names, group+"_"+b)
		}
	}
	return names
}()

// WDBCClassNames names the diagnosis labels: 0 = malignant, 1 = benign.
var WDBCClassNames = []string{"malignant", "benign"}

// WDBC is the breast-cancer data set: Features[i] has len(WDBCFeatureNames) values, Labels[i] is 0 or 1.
type WDBC struct {
	Features [][]float64
	Labels   []int
}

// LoadWDBC parses the embedded copy of the WDBC data set.
func LoadWDBC() (*WDBC, error) {
	return ReadWDBC(bytes.NewReader(wdbcCSV))
}

// ReadWDBC parses WDBC in scikit-learn's CSV layout: a header "rows,features,class names...", then one
// line per row with the features and the integer label last.
func ReadWDBC(r io.Reader) (*WDBC, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("WDBC: reading header: %w", err)
	}
	if len(header) < 2 {
		return nil, fmt.Errorf("WDBC: header %q: want rows,features,...", header)
	}
	rows, err1 := strconv.Atoi(header[0])
	nf, err2 := strconv.Atoi(header[1])
	if err1 != nil || err2 != nil || nf != len(WDBCFeatureNames) {
		return nil, fmt.Errorf("WDBC: header %q: want %d features", header, len(WDBCFeatureNames))
	}
	d := &WDBC{}
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("WDBC line %d: %w", line, err)
		}
		if len(rec) != nf+1 {
			return nil, fmt.Errorf("WDBC line %d: %d fields, want %d", line, len(rec), nf+1)
		}
		x := make([]float64, nf)
		for j := 0; j < nf; j++ {
			if x[j], err = strconv.ParseFloat(rec[j], 64); err != nil {
				return nil, fmt.Errorf("WDBC line %d field %d: %w", line, j+1, err)
			}
		}
		y, err := strconv.Atoi(rec[nf])
		if err != nil || y < 0 || y >= len(WDBCClassNames) {
			return nil, fmt.Errorf("WDBC line %d: label %q is not 0 or 1", line, rec[nf])
		}
		d.Features = append(d.Features, x)
		d.Labels = append(d.Labels, y)
	}
	if len(d.Labels) != rows {
		return nil, fmt.Errorf("WDBC: header announces %d rows, file has %d", rows, len(d.Labels))
	}
	return d, nil
}

// PaperSplit is the task-aware paper's split of WDBC (Cheng et al. 2022, E3): the first 70 % of the rows
// train, the rest test, features as float32 and the diagnosis as a float64 label.
func (d *WDBC) PaperSplit() (trX [][]float32, trY []float64, teX [][]float32, teY []float64) {
	cut := len(d.Features) * 7 / 10
	for i, f := range d.Features {
		x := make([]float32, len(f))
		for j, v := range f {
			x[j] = float32(v)
		}
		if i < cut {
			trX, trY = append(trX, x), append(trY, float64(d.Labels[i]))
		} else {
			teX, teY = append(teX, x), append(teY, float64(d.Labels[i]))
		}
	}
	return trX, trY, teX, teY
}

// MinMaxRows returns the features as float32 rows, each feature scaled to [0, 1] by its minimum and
// maximum over the data set (a constant feature, which WDBC has none of, would give NaN).
func (d *WDBC) MinMaxRows() [][]float32 {
	n := len(d.Features[0])
	rows := make([][]float32, len(d.Features))
	for i := range rows {
		rows[i] = make([]float32, n)
	}
	for j := range n {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, r := range d.Features {
			lo, hi = min(lo, r[j]), max(hi, r[j])
		}
		for i, r := range d.Features {
			rows[i][j] = float32((r[j] - lo) / (hi - lo))
		}
	}
	return rows
}

// StandardisedRows returns the rows order[0], order[1], … as float32, each feature standardised by its
// mean and population standard deviation over the whole data set (a constant feature, which WDBC has
// none of, would give NaN).
func (d *WDBC) StandardisedRows(order []int) [][]float32 {
	n, k := len(d.Features), len(d.Features[0])
	mu, sd := make([]float64, k), make([]float64, k)
	for _, f := range d.Features {
		for j, v := range f {
			mu[j] += v / float64(n)
		}
	}
	for _, f := range d.Features {
		for j, v := range f {
			sd[j] += (v - mu[j]) * (v - mu[j]) / float64(n)
		}
	}
	rows := make([][]float32, len(order))
	for i, p := range order {
		rows[i] = make([]float32, k)
		for j, v := range d.Features[p] {
			rows[i][j] = float32((v - mu[j]) / math.Sqrt(sd[j]))
		}
	}
	return rows
}
