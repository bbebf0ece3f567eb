package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"
)

// printTable prints rows as a MySQL-client style table, or the affected-row count for statements
// that return an OkResult.
func printTable(w io.Writer, schema sql.Schema, rows []sql.Row) {
	if len(schema) == 1 && schema[0].Name == types.OkResultColumnName && len(rows) == 1 {
		if ok, isOK := rows[0][0].(types.OkResult); isOK {
			fmt.Fprintf(w, "Query OK, %d row(s) affected\n", ok.RowsAffected)
			return
		}
	}
	if len(schema) == 0 {
		fmt.Fprintln(w, "Query OK")
		return
	}
	names := make([]string, len(schema))
	for j, c := range schema {
		names[j] = c.Name
	}
	vals := make([][]any, len(rows))
	for i, r := range rows {
		vals[i] = r
	}
	printRows(w, names, vals)
}

// printRows prints rows under the column names as a MySQL-client style table.
func printRows(w io.Writer, names []string, rows [][]any) {
	cells := make([][]string, len(rows))
	widths := make([]int, len(names))
	for j, name := range names {
		widths[j] = utf8.RuneCountInString(name)
	}
	for i, r := range rows {
		cells[i] = make([]string, len(names))
		for j := range names {
			var v any
			if j < len(r) {
				v = r[j]
			}
			cells[i][j] = formatValue(v)
			if n := utf8.RuneCountInString(cells[i][j]); n > widths[j] {
				widths[j] = n
			}
		}
	}
	sep := "+"
	for _, wd := range widths {
		sep += strings.Repeat("-", wd+2) + "+"
	}
	line := func(vals []string) {
		var b strings.Builder
		b.WriteString("|")
		for j, v := range vals {
			b.WriteString(" " + v + strings.Repeat(" ", widths[j]-utf8.RuneCountInString(v)) + " |")
		}
		fmt.Fprintln(w, b.String())
	}
	fmt.Fprintln(w, sep)
	line(names)
	fmt.Fprintln(w, sep)
	for _, r := range cells {
		line(r)
	}
	if len(rows) > 0 {
		fmt.Fprintln(w, sep)
	}
	fmt.Fprintf(w, "%d row(s)\n", len(rows))
}

func formatValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return x
	case []byte:
		if utf8.Valid(x) && !strings.ContainsRune(string(x), 0) {
			return string(x)
		}
		return fmt.Sprintf("0x%X", x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case time.Time:
		return x.Format("2006-01-02 15:04:05.999999")
	case sql.JSONWrapper:
		s, err := types.JsonToMySqlString(nil, x)
		if err != nil {
			return fmt.Sprint(x)
		}
		return s
	}
	return fmt.Sprint(v)
}
