package ldpv1

import "fmt"

// NewMatrix packs rows, each of length cols, into a row-major Matrix. It copies.
// An empty rows gives a 0×cols matrix.
func NewMatrix(rows [][]float32, cols int) (*Matrix, error) {
	if cols < 0 || uint64(cols) > 1<<31 {
		return nil, fmt.Errorf("matrix: bad column count %d", cols)
	}
	vals := make([]float32, len(rows)*cols)
	for i, r := range rows {
		if len(r) != cols {
			return nil, fmt.Errorf("matrix: row %d has %d columns, want %d", i, len(r), cols)
		}
		copy(vals[i*cols:], r)
	}
	return &Matrix{Rows: uint32(len(rows)), Cols: uint32(cols), Values: vals}, nil
}

// RowViews checks that len(Values) == Rows*Cols and returns the rows as slices
// that share Values (no copy). A nil Matrix is an error.
func (m *Matrix) RowViews() ([][]float32, error) {
	if m == nil {
		return nil, fmt.Errorf("matrix: missing")
	}
	n, c := int(m.Rows), int(m.Cols)
	if uint64(m.Rows)*uint64(m.Cols) != uint64(len(m.Values)) {
		return nil, fmt.Errorf("matrix: %d×%d needs %d values, got %d", n, c, uint64(m.Rows)*uint64(m.Cols), len(m.Values))
	}
	out := make([][]float32, n)
	for i := range out {
		out[i] = m.Values[i*c : (i+1)*c : (i+1)*c]
	}
	return out, nil
}
