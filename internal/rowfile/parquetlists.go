package rowfile

import (
	"errors"
	"unsafe"

	"github.com/duckdb/duckdb-go/v2/mapping"
)

// listReader reads a Parquet file's FLOAT[] and DOUBLE[] columns straight from DuckDB's result
// vectors, through DuckDB's C API. database/sql (duckdb-go's rows) gives a list cell as a []any with a
// boxed value an element: 784 allocations a Fashion-MNIST row, which made reading Parquet most of an
// ETL job's CPU time. Here a cell is a []float32 (or []float64) sliced from one array a chunk.
type listReader struct {
	db     mapping.Database
	conn   mapping.Connection
	res    mapping.Result
	hasRes bool
	double []bool // a column's elements are DOUBLE, not FLOAT

	cells [][]any // the current chunk's rows: a cell a column
	next  int     // the row of cells Next returns next
}

func openListReader(double []bool) (*listReader, error) {
	r := &listReader{double: double}
	if in, ok := takeListInstance(); ok { // readerpool.go
		r.db, r.conn = in.db, in.conn
		return r, nil
	}
	if mapping.Open("", &r.db) != mapping.StateSuccess {
		return nil, errors.New("opening DuckDB")
	}
	if mapping.Connect(r.db, &r.conn) != mapping.StateSuccess {
		mapping.Close(&r.db)
		return nil, errors.New("connecting to DuckDB")
	}
	for _, q := range readerSetup {
		if err := r.query(q); err != nil {
			r.release()
			mapping.Disconnect(&r.conn)
			mapping.Close(&r.db)
			return nil, err
		}
	}
	return r, nil
}

// query starts reading q's rows; its columns are the list columns, in order.
func (r *listReader) query(q string) error {
	r.release()
	if mapping.Query(r.conn, q, &r.res) != mapping.StateSuccess {
		err := errors.New(mapping.ResultError(&r.res))
		mapping.DestroyResult(&r.res)
		return err
	}
	r.hasRes = true
	return nil
}

// row returns the next row's list cells, or false after the last.
func (r *listReader) row() ([]any, bool, error) {
	for r.next >= len(r.cells) {
		if !r.hasRes {
			return nil, false, nil
		}
		chunk := mapping.FetchChunk(r.res)
		if chunk.Ptr == nil {
			r.release()
			return nil, false, nil
		}
		err := r.readChunk(chunk)
		mapping.DestroyDataChunk(&chunk)
		if err != nil {
			return nil, false, err
		}
	}
	r.next++
	return r.cells[r.next-1], true, nil
}

// listEntry is DuckDB's duckdb_list_entry: where a row's list lies in the child vector.
type listEntry struct{ offset, length uint64 }

func (r *listReader) readChunk(chunk mapping.DataChunk) error {
	n := int(mapping.DataChunkGetSize(chunk))
	r.cells, r.next = make([][]any, n), 0
	flat := make([]any, n*len(r.double))
	for i := range r.cells {
		r.cells[i] = flat[i*len(r.double) : (i+1)*len(r.double) : (i+1)*len(r.double)]
	}
	for c, double := range r.double {
		vec := mapping.DataChunkGetVector(chunk, mapping.IdxT(c))
		valid := mapping.VectorGetValidity(vec)
		entries := unsafe.Slice((*listEntry)(mapping.VectorGetData(vec)), n)
		child := mapping.ListVectorGetChild(vec)
		size := int(mapping.ListVectorGetSize(vec))
		childValid := mapping.VectorGetValidity(child)
		if double {
			values := copyOf(unsafe.Slice((*float64)(mapping.VectorGetData(child)), size))
			fillLists(r.cells, c, entries, valid, childValid, values)
		} else {
			values := copyOf(unsafe.Slice((*float32)(mapping.VectorGetData(child)), size))
			fillLists(r.cells, c, entries, valid, childValid, values)
		}
	}
	return nil
}

// copyOf copies DuckDB's vector into Go's memory, which the cells may outlive.
func copyOf[T any](v []T) []T { return append([]T(nil), v...) }

// fillLists sets column c of each row to its list: a slice of values, nil for a NULL list, and for a
// list with a NULL element the []any database/sql would give (so the reader reports it as it did).
func fillLists[T float32 | float64](rows [][]any, c int, entries []listEntry, valid, childValid unsafe.Pointer, values []T) {
	for i, e := range entries {
		if !isValid(valid, uint64(i)) {
			rows[i][c] = nil
			continue
		}
		list := values[e.offset : e.offset+e.length : e.offset+e.length]
		if childValid != nil {
			for j := range list {
				if !isValid(childValid, e.offset+uint64(j)) {
					boxed := make([]any, len(list))
					for k, v := range list {
						if isValid(childValid, e.offset+uint64(k)) {
							boxed[k] = v
						}
					}
					rows[i][c] = boxed
					break
				}
			}
			if rows[i][c] != nil {
				continue
			}
		}
		rows[i][c] = list
	}
}

// isValid reads DuckDB's validity mask (a bit a row, in uint64 words; nil: every row valid).
func isValid(mask unsafe.Pointer, row uint64) bool {
	if mask == nil {
		return true
	}
	word := *(*uint64)(unsafe.Add(mask, 8*(row/64)))
	return word&(1<<(row%64)) != 0
}

// release frees the current result.
func (r *listReader) release() {
	if r.hasRes {
		mapping.DestroyResult(&r.res)
		r.hasRes = false
	}
	r.cells, r.next = nil, 0
}

// close ends the reader, keeping its instance for the next one (readerpool.go).
func (r *listReader) close() {
	r.release()
	if !keepListInstance(listInstance{db: r.db, conn: r.conn}) {
		mapping.Disconnect(&r.conn)
		mapping.Close(&r.db)
	}
}
