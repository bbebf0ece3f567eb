package engine

import (
	"fmt"
	"io"
	"strings"
	"testing"
)

// readAll renders the records of in as [line: field|field], NULL as \N and quoted fields in «».
func readAll(t *testing.T, in string, f loadFormat) string {
	t.Helper()
	r := newLoadReader(strings.NewReader(in), f)
	var out []string
	var fields []loadField
	for {
		var line int
		var err error
		fields, line, err = r.next(fields)
		if err == io.EOF {
			break
		}
		if err != nil {
			return "error: " + err.Error()
		}
		var parts []string
		for _, fl := range fields {
			switch {
			case fl.null:
				parts = append(parts, `\N`)
			case fl.quoted:
				parts = append(parts, "«"+fl.s+"»")
			default:
				parts = append(parts, fl.s)
			}
		}
		out = append(out, fmt.Sprintf("%d: %s", line, strings.Join(parts, "|")))
	}
	return strings.Join(out, "\n")
}

func TestLoadReaderMySQLQuoting(t *testing.T) {
	csv := loadFormat{fieldTerm: ",", lineTerm: "\n", enclose: '"', escape: '\\'}
	tsv := loadFormat{fieldTerm: "\t", lineTerm: "\n", escape: '\\'}
	for _, tc := range []struct {
		name, in string
		f        loadFormat
		want     string
	}{
		{"plain", "1,2,3\n4,5,6\n", csv, "1: 1|2|3\n2: 4|5|6"},
		{"no final newline", "1,2\n3,4", csv, "1: 1|2\n2: 3|4"},
		{"doubled quotes", `1,"say ""hi""",x` + "\n", csv, `1: 1|«say "hi"»|x`},
		{"separator and newline inside quotes", "1,\"a,b\nc\",2\n3,d,4\n", csv, "1: 1|«a,b\nc»|2\n3: 3|d|4"},
		{"CRLF inside quotes, CRLF lines", "1,\"a\r\nb\"\r\n2,c\r\n", loadFormat{fieldTerm: ",", lineTerm: "\r\n", enclose: '"', escape: '\\'}, "1: 1|«a\r\nb»\n3: 2|c"},
		{"NULL forms", "\\N,NULL,\"NULL\",\\Nx,\n", csv, `1: \N|\N|«NULL»|Nx|`},
		{"escapes", `a\tb,c\,d,e\\f,\"g` + "\n", csv, "1: a\tb|c,d|e\\f|\"g"},
		{"empty quoted and empty", `"",,""` + "\n", csv, "1: «»||«»"},
		{"quote inside an unquoted field", `ab"c,d` + "\n", csv, `1: ab"c|d`},
		{"quote not followed by a separator stays", `"a"b",c` + "\n", csv, `1: «a"b»|c`},
		{"quoted last field at EOF", `1,"x"`, csv, "1: 1|«x»"},
		{"tab defaults", "1\tNULL\t\\N\n", tsv, "1: 1|NULL|\\N"},
		{"multi-byte terminators", "1||2##3||4##", loadFormat{fieldTerm: "||", lineTerm: "##", escape: '\\'}, "1: 1|2\n1: 3|4"},
		{"lines starting by", "xx>1,2\nno prefix\n>3,4\n", loadFormat{fieldTerm: ",", lineTerm: "\n", lineStart: ">", escape: '\\'}, "1: 1|2\n3: 3|4"},
		{"escape equals enclosure", `"a""b","c"` + "\n", loadFormat{fieldTerm: ",", lineTerm: "\n", enclose: '"', escape: '"'}, `1: «a"b»|«c»`},
		{"unterminated quote", "1,\"abc\n2,3\n", csv, `error: the field enclosed by '"' that starts on line 1 is never closed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := readAll(t, tc.in, tc.f); got != tc.want {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
