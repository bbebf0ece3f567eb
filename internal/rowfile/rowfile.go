// Package rowfile reads and writes the row files of `ldpsql privatize` and `ldpsql import-releases`:
// CSV or Parquet, chosen by the file's extension, read and written a row at a time, with the releases'
// metadata beside a CSV file (FILE.meta.json) or inside a Parquet file (its key-value metadata).
// Parquet goes through an in-memory DuckDB.
package rowfile

import (
	"fmt"
	"math"
	"math/big"
	"path/filepath"
	"strconv"
	"strings"
)

// Format is a row file's format.
type Format int

const (
	CSV Format = iota + 1
	Parquet
)

func (f Format) String() string {
	switch f {
	case CSV:
		return "CSV"
	case Parquet:
		return "Parquet"
	}
	return "an unknown format"
}

// FormatOf says which format path's extension names: .csv or .parquet, in any case.
func FormatOf(path string) (Format, error) {
	switch ext := filepath.Ext(path); strings.ToLower(ext) {
	case ".csv":
		return CSV, nil
	case ".parquet":
		return Parquet, nil
	case "":
		return 0, fmt.Errorf("%s has no extension: name it .csv or .parquet", path)
	default:
		return 0, fmt.Errorf("%s: unknown extension %q: name it .csv or .parquet", path, ext)
	}
}

// MetadataKey is the Parquet key-value metadata key that holds the releases' metadata.
const MetadataKey = "ldpsql.releases"

// MetadataAt says where a row file's metadata is: FILE.meta.json beside a CSV file, the key-value
// metadata inside a Parquet file.
func MetadataAt(path string) string {
	if f, _ := FormatOf(path); f == Parquet {
		return fmt.Sprintf("%s's key-value metadata %q", path, MetadataKey)
	}
	return path + ".meta.json"
}

// Kind is what one column's cells hold.
type Kind int

const (
	// KindScalar is one value a cell: text or a number. Every CSV column is one. A sink writes it from
	// a string: in Parquet as BIGINT when every value is an integer written plainly, as DOUBLE when
	// every value is a number, else as VARCHAR (an empty string is NULL in a BIGINT or DOUBLE column).
	KindScalar Kind = iota
	// KindInt is an integer, written from an int (Parquet INTEGER).
	KindInt
	// KindVector is a list of numbers (a Parquet LIST), written from a []float32 of Width values:
	// LIST<FLOAT> in Parquet; in CSV, Width columns NAME1..NAMEWidth.
	KindVector
)

// Column is one column of a row file.
type Column struct {
	Name  string
	Kind  Kind
	Width int // a KindVector's values per row, for a sink
}

// Source reads a row file's rows in order.
type Source interface {
	// Columns are the file's columns, in order.
	Columns() []Column
	// Next returns the next row's cells (use Float32, Int and Text on them) and io.EOF after the last.
	// A CSV file's cells are strings; a Parquet file's are Go values as database/sql gives them
	// (a LIST is a []any). The slice is the caller's.
	Next() ([]any, error)
	// Where names the row Next returned last, for errors: "rows.csv line 7", "rows.parquet row 6".
	Where() string
	// Metadata is the metadata the file carries (see MetadataAt) and where it was read from.
	Metadata() (data []byte, from string, err error)
	Close() error
}

// Open opens a row file for reading, in the format its extension names.
func Open(path string) (Source, error) {
	f, err := FormatOf(path)
	if err != nil {
		return nil, err
	}
	if f == Parquet {
		return openParquet(path)
	}
	return openCSV(path)
}

// Sink writes a row file. Nothing appears at its path until Finish: the rows go to a file beside it
// (CSV) or to DuckDB (Parquet) first.
type Sink interface {
	// Write appends one row, a cell for each column: a string for a KindScalar, an int for a KindInt,
	// a []float32 of Width values for a KindVector.
	Write(cells ...any) error
	// Finish writes the file with its metadata (see MetadataAt); nil meta writes none.
	Finish(meta []byte) error
	// Discard drops what was written; after Finish it does nothing.
	Discard()
}

// Create starts a row file with the given columns, in the format path's extension names.
func Create(path string, cols []Column) (Sink, error) {
	f, err := FormatOf(path)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, c := range cols {
		names := []string{c.Name}
		if c.Kind == KindVector {
			if c.Width < 1 {
				return nil, fmt.Errorf("rowfile: vector column %q has width %d", c.Name, c.Width)
			}
			if f == CSV {
				names = vectorNames(c)
			}
		}
		for _, n := range names {
			if seen[strings.ToLower(n)] {
				return nil, fmt.Errorf("%s would have two columns called %q", path, n)
			}
			seen[strings.ToLower(n)] = true
		}
	}
	if f == Parquet {
		return createParquet(path, cols)
	}
	return createCSV(path, cols)
}

// vectorNames are the CSV columns of a vector column: NAME1..NAMEWidth.
func vectorNames(c Column) []string {
	names := make([]string, c.Width)
	for j := range names {
		names[j] = c.Name + strconv.Itoa(j+1)
	}
	return names
}

// checkCells checks a row's cells against the columns a sink was made with.
func checkCells(cols []Column, cells []any) error {
	if len(cells) != len(cols) {
		return fmt.Errorf("rowfile: %d cells for %d columns", len(cells), len(cols))
	}
	for i, c := range cols {
		ok := false
		switch v := cells[i].(type) {
		case string:
			ok = c.Kind == KindScalar
		case int:
			ok = c.Kind == KindInt
		case []float32:
			ok = c.Kind == KindVector && len(v) == c.Width
		}
		if !ok {
			return fmt.Errorf("rowfile: column %q cannot hold %T %v", c.Name, cells[i], cells[i])
		}
	}
	return nil
}

// Float32 reads a cell as a number: a CSV field's text (spaces around it allowed) or a Parquet number.
// Text is parsed straight to float32, rounding once.
func Float32(v any) (float32, error) {
	switch v := v.(type) {
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 32)
		if err != nil {
			return 0, fmt.Errorf("%s is not a number", Show(v))
		}
		return float32(f), nil
	case float32:
		return v, nil
	case float64:
		return float32(v), nil
	case uint64:
		return float32(v), nil
	case interface{ Float64() float64 }: // DuckDB's DECIMAL
		return float32(v.Float64()), nil
	}
	if i, ok := integer(v); ok {
		return float32(i), nil
	}
	return 0, fmt.Errorf("%s is not a number", Show(v))
}

// Int reads a cell as an integer: a CSV field's text (spaces around it allowed), a Parquet integer, or
// a Parquet floating-point number without a fractional part.
func Int(v any) (int64, error) {
	switch v := v.(type) {
	case string:
		i, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s is not an integer", Show(v))
		}
		return i, nil
	case float32:
		return Int(float64(v))
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<63 {
			return int64(v), nil
		}
	}
	if i, ok := integer(v); ok {
		return i, nil
	}
	return 0, fmt.Errorf("%s is not an integer", Show(v))
}

// integer is v as an int64 when v is a Go integer that fits.
func integer(v any) (int64, bool) {
	switch v := v.(type) {
	case int8:
		return int64(v), true
	case int16:
		return int64(v), true
	case int32:
		return int64(v), true
	case int64:
		return v, true
	case int:
		return int64(v), true
	case uint8:
		return int64(v), true
	case uint16:
		return int64(v), true
	case uint32:
		return int64(v), true
	case uint64:
		return int64(v), v <= math.MaxInt64
	case *big.Int: // HUGEINT
		return v.Int64(), v.IsInt64()
	}
	return 0, false
}

// Floats appends a list cell's numbers to dst.
func Floats(dst []float32, v any) ([]float32, error) {
	switch v := v.(type) {
	case []float32: // a Parquet FLOAT[] (parquetSource's lists)
		return append(dst, v...), nil
	case []float64: // a Parquet DOUBLE[]
		for _, f := range v {
			dst = append(dst, float32(f))
		}
		return dst, nil
	}
	list, ok := v.([]any)
	if !ok {
		return dst, fmt.Errorf("%s is not a list of numbers", Show(v))
	}
	for i, e := range list {
		f, err := Float32(e)
		if err != nil {
			return dst, fmt.Errorf("element %d: %w", i+1, err)
		}
		dst = append(dst, f)
	}
	return dst, nil
}

// Text is a cell as the text it would be in a CSV file; NULL is empty.
func Text(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case []byte:
		return string(v)
	case float32:
		return strconv.FormatFloat(float64(v), 'g', -1, 32)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

// Show is a cell for an error message: text quoted, NULL as NULL, a long list cut short.
func Show(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case string:
		return strconv.Quote(v)
	case []any:
		return showList(v)
	case []float32:
		return showList(v)
	case []float64:
		return showList(v)
	}
	return fmt.Sprint(v)
}

func showList[T any](v []T) string {
	if len(v) > 8 {
		return fmt.Sprintf("%v… (%d values)", v[:8], len(v))
	}
	return fmt.Sprint(v)
}
