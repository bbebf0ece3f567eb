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

	lineBase int64 // the file's lines before the part r reads (OpenCSVPart)
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
	s.line += int(s.lineBase)
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

// CSVPartBytes is the size a CSV file is cut into parts of (at the first record boundary from each
// multiple of it), the 64 MiB of a Parquet part; a variable so that tests can cut small files.
var CSVPartBytes int64 = 64 << 20

// CSVPart is a range of a CSV file's records to read apart: bytes [From, To), which begin and end at a
// record boundary, and Line, the file's line number at From (so rows are named as in the whole file).
type CSVPart struct{ From, To, Line int64 }

// CSVParts cuts a CSV file into parts of about 64 MiB at record boundaries. It reads the file once,
// following RFC 4180's quoting (a quoted field may hold commas, line breaks and doubled quotes): a line
// break ends a record only outside quotes. A file whose quoting is not well formed (a quote inside an
// unquoted field, or text after a closing quote), which the reader reports as a bad row, is one part,
// as is a file smaller than a part; the first part holds the header line.
func CSVParts(path string) ([]CSVPart, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := info.Size()
	whole := []CSVPart{{From: 0, To: size, Line: 1}}
	if size <= CSVPartBytes {
		return whole, nil
	}
	r := bufio.NewReaderSize(f, 1<<20)
	var (
		parts      []CSVPart
		from       int64 // where the current part begins
		line       int64 = 1
		fromLine   int64 = 1
		inQuote    bool
		fieldStart = true // the next byte begins a field
		closed     bool   // a quoted field's closing quote was just read
	)
	for off := int64(0); ; off++ {
		c, err := r.ReadByte()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		switch {
		case inQuote && c == '"':
			inQuote, closed = false, true // or the first of a doubled quote: the next byte says
			continue
		case inQuote:
			if c == '\n' {
				line++
			}
			continue
		case c == '"' && closed: // a doubled quote inside the field
			inQuote, closed = true, false
			continue
		case c == '"' && fieldStart:
			inQuote, fieldStart = true, false
			continue
		case c == '"':
			return whole, nil // a quote inside an unquoted field
		case closed && c != ',' && c != '\n' && c != '\r':
			return whole, nil // text after a closing quote
		}
		closed = false
		fieldStart = c == ',' || c == '\n'
		if c == '\n' {
			line++
			if end := off + 1; end-from >= CSVPartBytes && end < size {
				parts = append(parts, CSVPart{From: from, To: end, Line: fromLine})
				from, fromLine = end, line
			}
		}
	}
	if inQuote {
		return whole, nil // a quoted field never closed
	}
	return append(parts, CSVPart{From: from, To: size, Line: fromLine}), nil
}

// OpenCSVPart opens the records of part p of a CSV file (CSVParts) for reading, with the columns its
// header line names; Where names a row by its line in the whole file.
func OpenCSVPart(path string, p CSVPart) (Source, error) {
	s, err := openCSV(path) // the header's columns
	if err != nil {
		return nil, err
	}
	s.r = csv.NewReader(io.NewSectionReader(s.f, p.From, p.To-p.From))
	s.r.ReuseRecord = true
	s.lineBase = p.Line - 1
	if p.From == 0 { // the first part begins with the header line
		if _, err := s.r.Read(); err != nil {
			s.Close()
			return nil, fmt.Errorf("%s: reading the header: %w", path, err)
		}
	}
	return s, nil
}
