package rowfile

import (
	"fmt"
	"slices"
	"strings"
)

// Layout is how a row file's columns map onto a mechanism's input, as `ldpsql privatize` and the Beam
// transform read them: an optional id column copied as it is, an optional label column of classes
// 0..K−1, and every other column a feature, in order (a list column holds several).
type Layout struct {
	Cols      []Column
	IDAt      int // -1 without an id column
	LabelAt   int // -1 without a label column
	FeatureAt []int
	// Dim is the number of features the mechanism Mechanism takes; K the label's classes.
	Dim       int
	Mechanism string
	K         int
}

// NewLayout finds the id and label columns (either may be "") among file's cols. The features are
// the columns named in features, in that order, or with none named every other column.
func NewLayout(file string, cols []Column, idCol, labelCol string, features []string, dim int, mechanism string, k int) (*Layout, error) {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	l := &Layout{Cols: cols, IDAt: slices.Index(names, idCol), LabelAt: slices.Index(names, labelCol), Dim: dim, Mechanism: mechanism, K: k}
	if idCol == "" {
		l.IDAt = -1
	}
	if labelCol == "" {
		l.LabelAt = -1
	}
	for _, c := range []struct {
		flag, name string
		at         int
	}{{"--id", idCol, l.IDAt}, {"--label", labelCol, l.LabelAt}} {
		switch {
		case c.name != "" && c.at < 0:
			return nil, fmt.Errorf("%s has no column %q (columns: %s)", file, c.name, strings.Join(names, ", "))
		case c.name != "" && cols[c.at].Kind == KindVector:
			return nil, fmt.Errorf("%s %s: %s's column %q is a list, not one value", c.flag, c.name, file, c.name)
		}
	}
	lists := false
	for i, c := range cols {
		if len(features) == 0 && i != l.IDAt && i != l.LabelAt {
			l.FeatureAt = append(l.FeatureAt, i)
			lists = lists || c.Kind == KindVector
		}
	}
	for _, f := range features {
		i := slices.Index(names, f)
		if i < 0 {
			return nil, fmt.Errorf("%s has no feature column %q (columns: %s)", file, f, strings.Join(names, ", "))
		}
		l.FeatureAt = append(l.FeatureAt, i)
		lists = lists || cols[i].Kind == KindVector
	}
	if !lists && len(l.FeatureAt) != dim {
		return nil, fmt.Errorf("%s has %d feature columns, mechanism %q takes %d", file, len(l.FeatureAt), mechanism, dim)
	}
	return l, nil
}

// Row reads one row's features, id (its text; "" without an id column) and label (0 without a label
// column). where names the row in errors ("rows.csv line 7").
func (l *Layout) Row(cells []any, where string) (x []float32, id string, label int, err error) {
	x = make([]float32, 0, l.Dim)
	for _, c := range l.FeatureAt {
		if l.Cols[c].Kind == KindVector {
			x, err = Floats(x, cells[c])
		} else {
			var v float32
			v, err = Float32(cells[c])
			x = append(x, v)
		}
		if err != nil {
			return nil, "", 0, fmt.Errorf("%s, column %s: %w", where, l.Cols[c].Name, err)
		}
	}
	if len(x) != l.Dim {
		return nil, "", 0, fmt.Errorf("%s has %d features, mechanism %q takes %d", where, len(x), l.Mechanism, l.Dim)
	}
	if l.IDAt >= 0 {
		id = Text(cells[l.IDAt])
	}
	if l.LabelAt >= 0 {
		y, err := Int(cells[l.LabelAt])
		if err != nil || y < 0 || y >= int64(l.K) {
			return nil, "", 0, fmt.Errorf("%s: label %s is not a class 0..%d", where, Show(cells[l.LabelAt]), l.K-1)
		}
		label = int(y)
	}
	return x, id, label, nil
}

// Out are the columns of a release file for layout l and a mechanism of dim outputs (see OutColumns).
func (l *Layout) Out(dim int) []Column {
	var ids []string
	var label string
	if l.IDAt >= 0 {
		ids = []string{l.Cols[l.IDAt].Name}
	}
	if l.LabelAt >= 0 {
		label = l.Cols[l.LabelAt].Name
	}
	return OutColumns(ids, label, dim)
}

// OutColumns are the columns of a release file: the id columns (KindScalar: one, or a table's
// primary key of several), z (KindVector of dim values) and the label column (KindInt) if label is
// not "".
func OutColumns(ids []string, label string, dim int) []Column {
	var out []Column
	for _, id := range ids {
		out = append(out, Column{Name: id, Kind: KindScalar})
	}
	out = append(out, Column{Name: "z", Kind: KindVector, Width: dim})
	if label != "" {
		out = append(out, Column{Name: label, Kind: KindInt})
	}
	return out
}
