package engine

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
)

// loadFormat is the FIELDS and LINES clauses of a LOAD DATA statement.
type loadFormat struct {
	fieldTerm, lineTerm, lineStart string
	enclose, escape                byte // 0: none
}

// loadField is one field of a record as read.
type loadField struct {
	s      string
	null   bool // \N, or the unquoted word NULL where MySQL reads it as NULL
	quoted bool
}

// loadReader reads the records of a LOAD DATA file as MySQL does:
//
//   - a record ends at LINES TERMINATED BY outside an enclosed field; a field ends at FIELDS TERMINATED BY;
//   - a field that begins with the ENCLOSED BY character ends only at that character followed by a field
//     or line terminator (or the end of the file), so it may hold separators and line breaks; inside it a
//     doubled enclosure character is one (RFC 4180), and an enclosure character followed by anything else
//     is kept as it is;
//   - the ESCAPED BY character (by default \) gives \0 \b \n \r \t \Z, and before any other character
//     stands for that character (\\, \", \, and an escaped line terminator); \N alone is NULL;
//   - with ENCLOSED BY set, or ESCAPED BY empty, the unquoted word NULL is NULL ("NULL" quoted is the
//     string);
//   - LINES STARTING BY skips everything up to the prefix, and lines without it.
//
// line counts the line breaks read, so a record can be named by the line it starts on.
type loadReader struct {
	r    *bufio.Reader
	f    loadFormat
	line int // 1-based line of the next byte
	buf  []byte
	eof  bool
}

func newLoadReader(r io.Reader, f loadFormat) *loadReader {
	return &loadReader{r: bufio.NewReaderSize(r, 1<<20), f: f, line: 1}
}

// readByte returns the next byte, counting lines; ok is false at the end of the input.
func (l *loadReader) readByte() (byte, bool, error) {
	b, err := l.r.ReadByte()
	if err == io.EOF {
		l.eof = true
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if b == '\n' {
		l.line++
	}
	return b, true, nil
}

// ahead reports whether the input continues with s (after a byte already read when first is set:
// then s[0] must equal first and the rest is compared); if so it consumes it.
func (l *loadReader) ahead(s string) (bool, error) {
	if s == "" {
		return false, nil
	}
	p, err := l.r.Peek(len(s))
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return false, err
	}
	if len(p) < len(s) || string(p) != s {
		return false, nil
	}
	l.line += bytes.Count(p, []byte{'\n'})
	_, _ = l.r.Discard(len(s))
	return true, nil
}

// rest reports whether the input continues with term[1:], after term[0] was read; if so it consumes it.
func (l *loadReader) rest(term string) (bool, error) {
	if len(term) == 1 {
		return true, nil
	}
	return l.ahead(term[1:])
}

func unescape(b byte) byte {
	switch b {
	case '0':
		return 0
	case 'b':
		return '\b'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'Z':
		return 26
	}
	return b
}

// atEnd reports whether the input is exhausted.
func (l *loadReader) atEnd() bool {
	if l.eof {
		return true
	}
	_, err := l.r.Peek(1)
	return err != nil
}

// skipToStart consumes input up to and including LINES STARTING BY; false if the input ends first.
func (l *loadReader) skipToStart() (bool, error) {
	p := l.f.lineStart
	for {
		ok, err := l.ahead(p)
		if err != nil || ok {
			return ok, err
		}
		if _, more, err := l.readByte(); err != nil || !more {
			return false, err
		}
	}
}

// next reads one record into fields (reused) and returns it with the line it starts on; io.EOF at the end.
func (l *loadReader) next(fields []loadField) ([]loadField, int, error) {
	fields = fields[:0]
	if l.atEnd() {
		return nil, 0, io.EOF
	}
	if l.f.lineStart != "" {
		ok, err := l.skipToStart()
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			return nil, 0, io.EOF
		}
	}
	start := l.line
	f := &l.f
	for {
		// One field, into l.buf.
		l.buf = l.buf[:0]
		first, more, err := l.readByte()
		if err != nil {
			return nil, start, err
		}
		quoted := more && f.enclose != 0 && first == f.enclose
		var escapedN, recordDone bool
		if quoted {
			recordDone, err = l.readEnclosed(start)
		} else {
			escapedN, recordDone, err = l.readBare(first, more)
		}
		if err != nil {
			return nil, start, err
		}
		fld := loadField{quoted: quoted}
		switch {
		case !quoted && escapedN && len(l.buf) == 1:
			fld.null = true
		case !quoted && (f.enclose != 0 || f.escape == 0) && string(l.buf) == "NULL":
			fld.null = true
		default:
			fld.s = string(l.buf)
		}
		fields = append(fields, fld)
		if recordDone {
			return fields, start, nil
		}
	}
}

// readEnclosed reads the rest of a field after its opening enclosure character into l.buf, and the
// terminator after its closing one; recordDone when that ends the record (or the input). start is the
// record's line, for the error of a field never closed.
func (l *loadReader) readEnclosed(start int) (recordDone bool, err error) {
	f := &l.f
	for {
		b, more, err := l.readByte()
		if err != nil {
			return false, err
		}
		if !more {
			return false, fmt.Errorf("the field enclosed by %q that starts on line %d is never closed", f.enclose, start)
		}
		if b == f.escape && f.escape != f.enclose {
			x, more, err := l.readByte()
			if err != nil {
				return false, err
			}
			if !more {
				l.buf = append(l.buf, b)
				continue
			}
			l.buf = append(l.buf, unescape(x))
			continue
		}
		if b != f.enclose {
			l.buf = append(l.buf, b)
			continue
		}
		if ok, err := l.ahead(string(f.enclose)); err != nil {
			return false, err
		} else if ok {
			l.buf = append(l.buf, f.enclose) // doubled: one
			continue
		}
		if ok, err := l.ahead(f.fieldTerm); err != nil {
			return false, err
		} else if ok {
			return false, nil
		}
		if ok, err := l.ahead(f.lineTerm); err != nil {
			return false, err
		} else if ok {
			return true, nil
		}
		if l.atEnd() {
			return true, nil
		}
		l.buf = append(l.buf, b) // an enclosure character inside the field: kept
	}
}

// readBare reads a field that is not enclosed, from its first byte b (more false: the input had
// ended), into l.buf, with its terminator; escapedN when the field is the escape character and N
// (NULL), recordDone when the terminator ends the record (or the input ended).
func (l *loadReader) readBare(b byte, more bool) (escapedN, recordDone bool, err error) {
	f := &l.f
	for {
		if !more {
			return escapedN, true, nil
		}
		if f.escape != 0 && b == f.escape {
			x, more2, err := l.readByte()
			if err != nil {
				return false, false, err
			}
			if !more2 {
				l.buf = append(l.buf, b)
			} else {
				escapedN = x == 'N' && len(l.buf) == 0
				l.buf = append(l.buf, unescape(x))
			}
		} else if f.fieldTerm != "" && b == f.fieldTerm[0] {
			if ok, err := l.rest(f.fieldTerm); err != nil {
				return false, false, err
			} else if ok {
				return escapedN, false, nil
			}
			l.buf = append(l.buf, b)
		} else if b == f.lineTerm[0] {
			if ok, err := l.rest(f.lineTerm); err != nil {
				return false, false, err
			} else if ok {
				return escapedN, true, nil
			}
			l.buf = append(l.buf, b)
		} else {
			l.buf = append(l.buf, b)
			escapedN = false
		}
		if b, more, err = l.readByte(); err != nil {
			return false, false, err
		}
	}
}
