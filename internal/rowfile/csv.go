package rowfile

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// csvSource reads a CSV file whose first line names its columns.
type csvSource struct {
	path string
	f    *os.File
	r    *csv.Reader
	cols []Column
	line int // of the record Next returned last
}

func openCSV(path string) (*csvSource, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	r := csv.NewReader(f)
	header, err := r.Read()
	if err != nil {
		f.Close()
		if err == io.EOF {
			return nil, fmt.Errorf("%s is empty: its first line must name the columns", path)
		}
		return nil, fmt.Errorf("%s: reading the header: %w", path, err)
	}
	cols := make([]Column, len(header))
	for i, h := range header {
		// Spreadsheets write a byte-order mark and spaces around names.
		cols[i] = Column{Name: strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")), Kind: KindScalar}
	}
	r.ReuseRecord = true
	return &csvSource{path: path, f: f, r: r, cols: cols, line: 1}, nil
}

func (s *csvSource) Columns() []Column { return s.cols }

func (s *csvSource) Next() ([]any, error) {
	rec, err := s.r.Read()
	if err == io.EOF {
		return nil, io.EOF
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.path, err)
	}
	s.line, _ = s.r.FieldPos(0)
	cells := make([]any, len(rec))
	for i, v := range rec {
		cells[i] = v
	}
	return cells, nil
}

func (s *csvSource) Where() string { return fmt.Sprintf("%s line %d", s.path, s.line) }

func (s *csvSource) Metadata() ([]byte, string, error) {
	at := MetadataAt(s.path)
	data, err := os.ReadFile(at)
	return data, at, err
}

func (s *csvSource) Close() error { return s.f.Close() }

// csvSink writes a CSV file: a header naming the columns (a vector's as NAME1..NAMEWidth), then a line
// a row; numbers of a vector as the shortest text that reads back as the same float32.
type csvSink struct {
	path, tmp string
	cols      []Column
	f         *os.File
	buf       *bufio.Writer
	w         *csv.Writer
	rec       []string
	done      bool
}

func createCSV(path string, cols []Column) (*csvSink, error) {
	tmp := path + ".partial"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	s := &csvSink{path: path, tmp: tmp, cols: cols, f: f, buf: bufio.NewWriterSize(f, 1<<16)}
	s.w = csv.NewWriter(s.buf)
	var header []string
	for _, c := range cols {
		if c.Kind == KindVector {
			header = append(header, vectorNames(c)...)
		} else {
			header = append(header, c.Name)
		}
	}
	if err := s.w.Write(header); err != nil {
		s.Discard()
		return nil, err
	}
	return s, nil
}

func (s *csvSink) Write(cells ...any) error {
	if err := checkCells(s.cols, cells); err != nil {
		return err
	}
	s.rec = s.rec[:0]
	for _, c := range cells {
		switch v := c.(type) {
		case string:
			s.rec = append(s.rec, v)
		case int:
			s.rec = append(s.rec, strconv.Itoa(v))
		case []float32:
			for _, x := range v {
				s.rec = append(s.rec, strconv.FormatFloat(float64(x), 'g', -1, 32))
			}
		}
	}
	return s.w.Write(s.rec)
}

func (s *csvSink) Finish(meta []byte) error {
	s.w.Flush()
	err := s.w.Error()
	if err == nil {
		err = s.buf.Flush()
	}
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(s.tmp, s.path)
	}
	if err != nil {
		s.Discard()
		return fmt.Errorf("writing %s: %w", s.path, err)
	}
	s.done = true
	if meta == nil {
		return nil
	}
	if err := os.WriteFile(MetadataAt(s.path), meta, 0o644); err != nil {
		return fmt.Errorf("writing the metadata of %s: %w", s.path, err)
	}
	return nil
}

func (s *csvSink) Discard() {
	if s.done {
		return
	}
	s.done = true
	s.f.Close()
	os.Remove(s.tmp)
}
