package rowfile

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// rangeBytes bounds the uncompressed Parquet data one query reads. duckdb-go materialises a query's
// whole result before its first row, so a file is read in ranges of rows (row groups, and parts of
// a row group larger than this) to keep memory bounded; a variable so that tests can make it small.
var rangeBytes int64 = 64 << 20

// inMemoryDuckDB opens an in-memory DuckDB: its connector (for an appender) and a database/sql handle.
func inMemoryDuckDB(setup ...string) (*duckdb.Connector, *sql.DB, error) {
	c, err := duckdb.NewConnector("", nil)
	if err != nil {
		return nil, nil, fmt.Errorf("opening DuckDB: %w", err)
	}
	db := sql.OpenDB(c)
	for _, s := range setup {
		if _, err := db.Exec(s); err != nil {
			db.Close()
			return nil, nil, fmt.Errorf("setting up DuckDB (%s): %w", s, err)
		}
	}
	return c, db, nil
}

// sqlString is s as a DuckDB string literal (no backslash escapes in DuckDB's).
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// sqlIdent is name as a DuckDB identifier.
func sqlIdent(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// parquetSource reads a Parquet file with DuckDB's read_parquet, a range of rows at a time.
type parquetSource struct {
	path   string
	db     *sql.DB
	cols   []Column
	query  string // one range: file_row_number from ? to before ?
	ranges [][2]int64
	rows   *sql.Rows
	n      int64 // rows returned so far

	// The FLOAT[] and DOUBLE[] columns (listAt, in s.cols) are read apart, by lists (listQuery, a
	// format of path, from and to); query reads the others (otherAt).
	listAt, otherAt []int
	listQuery       string
	double          []bool      // a list column's elements are DOUBLE
	lists           *listReader // opened at the first range read: splitting a file needs none
}

func openParquet(path string) (*parquetSource, error) {
	// read_parquet would read a name with a wildcard as a pattern, and so several files.
	if strings.ContainsAny(path, "*?[") {
		return nil, fmt.Errorf("%s: a Parquet file name with *, ? or [ is read as a pattern: rename the file", path)
	}
	if st, err := os.Stat(path); err != nil {
		return nil, err
	} else if st.IsDir() {
		return nil, fmt.Errorf("%s is a directory, not a Parquet file", path)
	}
	db, err := readerDB()
	if err != nil {
		return nil, err
	}
	s := &parquetSource{path: path, db: db}
	if err := s.readSchema(); err != nil {
		s.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// readSchema reads the columns and splits the file into ranges of rows along its row groups.
func (s *parquetSource) readSchema() error {
	rows, err := s.db.Query("DESCRIBE SELECT * FROM read_parquet(?)", s.path)
	if err != nil {
		return err
	}
	defer rows.Close()
	names, _ := rows.Columns()
	var sel, listSel []string
	var double []bool
	for rows.Next() {
		cells := make([]any, len(names))
		ptrs := make([]any, len(names))
		for i := range cells {
			ptrs[i] = &cells[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		name, typ := Text(cells[0]), Text(cells[1])
		kind := KindScalar
		if strings.HasSuffix(typ, "[]") {
			kind = KindVector
		}
		if typ == "FLOAT[]" || typ == "DOUBLE[]" {
			s.listAt = append(s.listAt, len(s.cols))
			listSel = append(listSel, sqlIdent(name))
			double = append(double, typ == "DOUBLE[]")
		} else {
			s.otherAt = append(s.otherAt, len(s.cols))
			sel = append(sel, sqlIdent(name))
		}
		s.cols = append(s.cols, Column{Name: name, Kind: kind})
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(s.cols) == 0 {
		return errors.New("no columns")
	}
	if len(sel) == 0 {
		sel = []string{"file_row_number"} // a row for each row, no cell
	}
	// No ORDER BY: DuckDB keeps a scan's file order (preserve_insertion_order, its default), and
	// sorting 784-float lists cost more than reading them.
	const where = " WHERE file_row_number >= %d AND file_row_number < %d"
	s.query = "SELECT " + strings.Join(sel, ", ") + " FROM read_parquet(?, file_row_number = true)" +
		strings.ReplaceAll(where, "%d", "?")
	if len(listSel) > 0 {
		s.listQuery = "SELECT " + strings.Join(listSel, ", ") + " FROM read_parquet(%s, file_row_number = true)" + where
		s.double = double
	}

	groups, err := s.db.Query("SELECT row_group_id, max(row_group_num_rows), sum(total_uncompressed_size) "+
		"FROM parquet_metadata(?) GROUP BY row_group_id ORDER BY row_group_id", s.path)
	if err != nil {
		return err
	}
	defer groups.Close()
	var start int64
	for groups.Next() {
		var id, n, size int64
		if err := groups.Scan(&id, &n, &size); err != nil {
			return err
		}
		parts := max(1, (size+rangeBytes-1)/rangeBytes)
		step := max(1, (n+parts-1)/parts)
		for from := start; from < start+n; from += step {
			s.ranges = append(s.ranges, [2]int64{from, min(from+step, start+n)})
		}
		start += n
	}
	return groups.Err()
}

// Parts splits a Parquet file into parts to read apart, [from, to) in rows: its row groups, and the
// parts of a row group larger than 64 MiB uncompressed (the ranges a Source reads one at a time).
func Parts(path string) ([][2]int64, error) {
	s, err := openParquet(path)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.ranges, nil
}

// OpenPart opens rows [from, to) of a Parquet file for reading; Where counts rows from the file's
// start, so a row is named as a Source of the whole file names it.
func OpenPart(path string, from, to int64) (Source, error) {
	s, err := openParquet(path)
	if err != nil {
		return nil, err
	}
	var kept [][2]int64
	for _, r := range s.ranges {
		if r[0] < to && r[1] > from {
			kept = append(kept, [2]int64{max(r[0], from), min(r[1], to)})
		}
	}
	s.ranges, s.n = kept, from
	return s, nil
}

func (s *parquetSource) Columns() []Column { return s.cols }

func (s *parquetSource) Next() ([]any, error) {
	for s.rows == nil || !s.rows.Next() {
		if s.rows != nil {
			err := s.rows.Err()
			s.rows.Close()
			s.rows = nil
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s.path, err)
			}
			if s.lists != nil {
				if _, more, err := s.lists.row(); err != nil || more {
					return nil, s.listsFailed(err)
				}
			}
		}
		if len(s.ranges) == 0 {
			return nil, io.EOF
		}
		r := s.ranges[0]
		s.ranges = s.ranges[1:]
		rows, err := s.db.Query(s.query, s.path, r[0], r[1])
		if err != nil {
			return nil, fmt.Errorf("%s: rows %d to %d: %w", s.path, r[0]+1, r[1], err)
		}
		s.rows = rows
		if s.listQuery != "" && s.lists == nil {
			if s.lists, err = openListReader(s.double); err != nil {
				return nil, fmt.Errorf("%s: %w", s.path, err)
			}
		}
		if s.lists != nil {
			if err := s.lists.query(fmt.Sprintf(s.listQuery, sqlString(s.path), r[0], r[1])); err != nil {
				return nil, fmt.Errorf("%s: rows %d to %d: %w", s.path, r[0]+1, r[1], err)
			}
		}
	}
	cells := make([]any, len(s.cols))
	ptrs := make([]any, max(1, len(s.otherAt)))
	var skip any
	ptrs[0] = &skip
	for i, c := range s.otherAt {
		ptrs[i] = &cells[c]
	}
	if err := s.rows.Scan(ptrs...); err != nil {
		return nil, fmt.Errorf("%s row %d: %w", s.path, s.n+1, err)
	}
	if s.lists != nil {
		lists, ok, err := s.lists.row()
		if err != nil || !ok {
			return nil, s.listsFailed(err)
		}
		for i, c := range s.listAt {
			cells[c] = lists[i]
		}
	}
	s.n++
	return cells, nil
}

// listsFailed says that reading the list columns failed at row s.n+1, or (err nil) that they had
// another number of rows than the other columns.
func (s *parquetSource) listsFailed(err error) error {
	if err == nil {
		err = errors.New("the list columns and the others have different numbers of rows")
	}
	return fmt.Errorf("%s row %d: %w", s.path, s.n+1, err)
}

func (s *parquetSource) Where() string { return fmt.Sprintf("%s row %d", s.path, s.n) }

func (s *parquetSource) Metadata() ([]byte, string, error) {
	at := MetadataAt(s.path)
	rows, err := s.db.Query("SELECT key, value FROM parquet_kv_metadata(?)", s.path)
	if err != nil {
		return nil, at, err
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k, v []byte
		if err := rows.Scan(&k, &v); err != nil {
			return nil, at, err
		}
		if string(k) == MetadataKey {
			return v, at, nil
		}
		keys = append(keys, string(k))
	}
	if err := rows.Err(); err != nil {
		return nil, at, err
	}
	has := "none"
	if len(keys) > 0 {
		has = strings.Join(keys, ", ")
	}
	return nil, at, fmt.Errorf("%s has no key-value metadata %q (it has %s): not releases written by ldpsql privatize", s.path, MetadataKey, has)
}

// Close ends the source; its DuckDB instances go back to the pool (readerpool.go) once, however often
// Close is called: two readers must never share a connection.
func (s *parquetSource) Close() error {
	if s.rows != nil {
		s.rows.Close()
		s.rows = nil
	}
	if s.lists != nil {
		s.lists.close()
		s.lists = nil
	}
	if s.db == nil {
		return nil
	}
	db := s.db
	s.db = nil
	return releaseReaderDB(db)
}

// parquetSink collects the rows in a DuckDB table (which spills to a temporary directory past its
// memory limit) and writes them with COPY … TO … (FORMAT parquet, KV_METADATA …) on Finish.
type parquetSink struct {
	path, tmpDir string
	cols         []Column
	db           *sql.DB
	conn         driver.Conn
	app          *duckdb.Appender
	row          []driver.Value
	done         bool
}

func createParquet(path string, cols []Column) (*parquetSink, error) {
	tmpDir, err := os.MkdirTemp("", "ldpsql-parquet-")
	if err != nil {
		return nil, err
	}
	c, db, err := inMemoryDuckDB("SET memory_limit = '512MB'", "SET temp_directory = "+sqlString(filepath.Join(tmpDir, "spill")))
	if err != nil {
		os.RemoveAll(tmpDir)
		return nil, err
	}
	s := &parquetSink{path: path, tmpDir: tmpDir, cols: cols, db: db, row: make([]driver.Value, len(cols))}
	defs := make([]string, len(cols))
	for i, col := range cols {
		typ := map[Kind]string{KindScalar: "VARCHAR", KindInt: "INTEGER", KindVector: "FLOAT[]"}[col.Kind]
		defs[i] = sqlIdent(col.Name) + " " + typ
	}
	if _, err = db.Exec("CREATE TABLE stage (" + strings.Join(defs, ", ") + ")"); err == nil {
		if s.conn, err = c.Connect(context.Background()); err == nil {
			s.app, err = duckdb.NewAppenderFromConn(s.conn, "", "stage")
		}
	}
	if err != nil {
		s.Discard()
		return nil, fmt.Errorf("staging %s in DuckDB: %w", path, err)
	}
	return s, nil
}

func (s *parquetSink) Write(cells ...any) error {
	if err := checkCells(s.cols, cells); err != nil {
		return err
	}
	for i, c := range cells {
		if v, ok := c.(int); ok {
			c = int32(v) // an INTEGER column
		}
		s.row[i] = c
	}
	return s.app.AppendRow(s.row...)
}

func (s *parquetSink) Finish(meta []byte) error {
	err := s.app.Close()
	s.app = nil
	var sel []string
	for _, c := range s.cols {
		col := sqlIdent(c.Name)
		if c.Kind == KindScalar && err == nil {
			// BIGINT when every value is an integer as plainly written ("7", not "07" or "+7"), DOUBLE
			// when every value is a number as plainly written ("2.50", "1e-05"; not "007"); an empty value
			// is NULL in either.
			var ints, nums bool
			err = s.db.QueryRow("SELECT COALESCE(bool_and(CAST(TRY_CAST("+col+" AS BIGINT) AS VARCHAR) IS NOT DISTINCT FROM NULLIF("+col+", '')), true), "+
				"COALESCE(bool_and("+col+" = '' OR regexp_full_match("+col+", '-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][-+]?[0-9]+)?')), true) FROM stage").Scan(&ints, &nums)
			switch {
			case ints:
				col = "CAST(NULLIF(" + col + ", '') AS BIGINT) AS " + col
			case nums:
				col = "CAST(NULLIF(" + col + ", '') AS DOUBLE) AS " + col
			}
		}
		sel = append(sel, col)
	}
	tmp := s.path + ".partial"
	if err == nil {
		kv := ""
		if meta != nil {
			kv = ", KV_METADATA {" + sqlString(MetadataKey) + ": " + sqlString(string(meta)) + "}"
		}
		_, err = s.db.Exec("COPY (SELECT " + strings.Join(sel, ", ") + " FROM stage) TO " + sqlString(tmp) + " (FORMAT parquet" + kv + ")")
	}
	if err == nil {
		err = os.Rename(tmp, s.path)
	}
	s.done = true
	s.close()
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", s.path, err)
	}
	return nil
}

func (s *parquetSink) Discard() {
	if !s.done {
		s.done = true
		s.close()
	}
}

// close frees DuckDB and its spill directory.
func (s *parquetSink) close() {
	if s.app != nil {
		s.app.Close()
	}
	if s.conn != nil {
		s.conn.Close()
	}
	s.db.Close()
	os.RemoveAll(s.tmpDir)
}
