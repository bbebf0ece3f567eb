package beam

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
)

// How a source table is split into parts that workers read in parallel, and in which order a part's
// rows come.
//
// A part is a range of the primary key's tuples, as the server compares them (each string column by
// its collation, so under utf8mb4_0900_ai_ci 'alice' and 'ＡＬＩＣＥ' are one value). A single integer
// key is split into ranges of equal width between its least and greatest value; any other key (a
// composite key, strings, decimals, dates, binary strings) at boundary tuples read from the table at
// the 1/n, 2/n, … quantiles of its key order. Part i is "after boundary i−1 and not after boundary i",
// the same predicate negated on either side of a boundary, so a row is in exactly one part whatever
// the comparison makes of ties, case or accents; the planner checks that over the table in one query
// before the job reads a row (and reads one part if not).
//
// A part is read in the key order with each insensitive string column's bytes (HEX) after it: rows the
// collation calls equal but whose keys differ ('alice' and 'ａｌｉｃｅ', which the key's unique index keeps
// apart) come in one order every time, so the charge batches, cut from that order, are the same in a
// rerun.
//
// A table without a primary key is read as one part: there is no key to split it by or to name its
// releases with (they get no id in files and a generated row_id in a table). A protected one is read
// in the order of its unit columns, so that each unit's rows fall into the same batches in a rerun;
// it is not sorted by anything else, so the releases' order says nothing of the rows' contents.

// keyColumn is a column that orders a source's rows: one of its primary key's, or a unit column of a
// table without one.
type keyColumn struct {
	Name      string // as the server spells it
	Type      string // its column type ("varchar(20)"), for the destination's key
	Collation string // its collation; "" for a type without one
	Literal   literalKind
}

// literalKind is how a value of a column, as the server sends it (text), is written back in SQL.
type literalKind int

const (
	literalNumber literalKind = iota // as it is: integers, decimals, floats
	literalText                      // a quoted string: character strings, dates and times
	literalBytes                     // X'…': binary strings and BLOBs
	literalOther                     // enum, set, bit, …: never compared with a literal, so one part
)

// columnInfo is what information_schema says of a column.
type columnInfo struct {
	Name, DataType, ColumnType, Collation string
}

func (c columnInfo) keyColumn() keyColumn {
	k := keyColumn{Name: c.Name, Type: c.ColumnType, Collation: c.Collation, Literal: literalOther}
	switch t := c.DataType; {
	case strings.HasSuffix(t, "int") || t == "decimal" || t == "numeric" || t == "float" || t == "double" || t == "real":
		k.Literal = literalNumber
	case strings.Contains(t, "char") || strings.Contains(t, "text") || t == "date" || t == "datetime" || t == "timestamp" || t == "time" || t == "year":
		k.Literal = literalText
	case strings.Contains(t, "binary") || strings.Contains(t, "blob"):
		k.Literal = literalBytes
	}
	return k
}

// insensitive reports whether the column's collation equates strings with different bytes.
func (k keyColumn) insensitive() bool {
	return k.Collation != "" && k.Collation != "binary" && !strings.HasSuffix(k.Collation, "_bin")
}

// literal writes v, a value of the column as the server sent it, as SQL.
func (k keyColumn) literal(v []byte) string {
	switch k.Literal {
	case literalNumber:
		return string(v)
	case literalBytes:
		return "X'" + hex.EncodeToString(v) + "'"
	}
	return quoteString(string(v))
}

// orderBy is the ORDER BY list that reads rows by cols in one order every time: each column, then an
// insensitive string column's bytes.
func orderBy(cols []keyColumn) string {
	var out []string
	for _, c := range cols {
		out = append(out, quoteIdent(c.Name))
		if c.insensitive() {
			out = append(out, "HEX("+quoteIdent(c.Name)+")")
		}
	}
	return strings.Join(out, ", ")
}

// after is the predicate "the key tuple sorts after b" (b: one literal per key column), as the server
// compares: k1 > b1 OR (k1 = b1 AND k2 > b2) OR ….
func after(key []keyColumn, b []string) string {
	var or []string
	for j := range key {
		var and []string
		for i := range j {
			and = append(and, quoteIdent(key[i].Name)+" = "+b[i])
		}
		and = append(and, quoteIdent(key[j].Name)+" > "+b[j])
		or = append(or, "("+strings.Join(and, " AND ")+")")
	}
	return strings.Join(or, " OR ")
}

// DBPart is the rows of a source table Where selects (every row when "").
type DBPart struct {
	Index int
	Where string
}

// partition splits p's table into at most n parts (see above); one part when it has no key, a key of
// a type never compared with a literal, n ≤ 1, or no rows.
func partition(ctx context.Context, db *sql.DB, p dbPlan, n int) ([]DBPart, error) {
	one := []DBPart{{}}
	if len(p.Key) == 0 || n <= 1 {
		return one, nil
	}
	for _, k := range p.Key {
		if k.Literal == literalOther {
			return one, nil
		}
	}
	if k := p.Key[0]; len(p.Key) == 1 && k.Literal == literalNumber && strings.HasSuffix(k.Type, "int") {
		// A signed integer key (an unsigned one may exceed int64: boundaries, below).
		var lo, hi sql.NullInt64
		if err := db.QueryRowContext(ctx, fmt.Sprintf("SELECT MIN(%s), MAX(%s) FROM %s", quoteIdent(k.Name), quoteIdent(k.Name), p.qualified())).Scan(&lo, &hi); err != nil {
			return nil, fmt.Errorf("reading %s.%s's key range: %w", p.Database, p.Table, err)
		}
		if !lo.Valid {
			return one, nil // empty
		}
		var parts []DBPart
		for i, r := range keyRanges(lo.Int64, hi.Int64, n) {
			parts = append(parts, DBPart{Index: i, Where: fmt.Sprintf("%s BETWEEN %d AND %d", quoteIdent(k.Name), r[0], r[1])})
		}
		return parts, nil
	}
	bounds, err := boundaries(ctx, db, p, n)
	if err != nil {
		return nil, err
	}
	if len(bounds) == 0 {
		return one, nil
	}
	parts := make([]DBPart, len(bounds)+1)
	for i := range parts {
		var and []string
		if i > 0 {
			and = append(and, "("+after(p.Key, bounds[i-1])+")")
		}
		if i < len(bounds) {
			and = append(and, "NOT ("+after(p.Key, bounds[i])+")")
		}
		parts[i] = DBPart{Index: i, Where: strings.Join(and, " AND ")}
	}
	// Every row in exactly one part, as the server evaluates the parts' predicates now.
	var in []string
	for _, part := range parts {
		in = append(in, "(CASE WHEN "+part.Where+" THEN 1 ELSE 0 END)")
	}
	var stray int64
	if err := db.QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE %s <> 1", p.qualified(), strings.Join(in, " + "))).Scan(&stray); err != nil {
		return nil, fmt.Errorf("checking the parts of %s.%s: %w", p.Database, p.Table, err)
	}
	if stray != 0 {
		slog.Warn("reading the table as one part: its key ranges hold some rows in no part or in several", "table", p.Database+"."+p.Table, "rows", stray)
		return one, nil
	}
	return parts, nil
}

// boundaries are the key tuples (as literals) at the 1/n … (n−1)/n quantiles of p's table in key
// order, without repeats.
func boundaries(ctx context.Context, db *sql.DB, p dbPlan, n int) ([][]string, error) {
	var total int64
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+p.qualified()).Scan(&total); err != nil {
		return nil, fmt.Errorf("counting %s.%s's rows: %w", p.Database, p.Table, err)
	}
	names := make([]string, len(p.Key))
	for i, k := range p.Key {
		names[i] = quoteIdent(k.Name)
	}
	var out [][]string
	for i := 1; i < n; i++ {
		at := total * int64(i) / int64(n)
		if at == 0 {
			continue
		}
		cells := make([]sql.RawBytes, len(p.Key))
		ptrs := make([]any, len(cells))
		for j := range cells {
			ptrs[j] = &cells[j]
		}
		rows, err := db.QueryContext(ctx, fmt.Sprintf("SELECT %s FROM %s ORDER BY %s LIMIT 1 OFFSET %d", strings.Join(names, ", "), p.qualified(), p.OrderBy, at))
		if err != nil {
			return nil, fmt.Errorf("reading %s.%s's key boundaries: %w", p.Database, p.Table, err)
		}
		var b []string
		if rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				return nil, fmt.Errorf("reading %s.%s's key boundaries: %w", p.Database, p.Table, err)
			}
			for j, k := range p.Key {
				b = append(b, k.literal(cells[j]))
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		if b != nil && (len(out) == 0 || strings.Join(out[len(out)-1], "\x00") != strings.Join(b, "\x00")) {
			out = append(out, b)
		}
	}
	return out, nil
}

// keyRanges splits lo..hi into at most n ranges [lo, hi] of about equal width (unsigned arithmetic:
// the span of any two int64s fits in a uint64).
func keyRanges(lo, hi int64, n int) [][2]int64 {
	width := (uint64(hi)-uint64(lo))/uint64(n) + 1
	var parts [][2]int64
	for from := lo; ; {
		to := hi
		if uint64(hi)-uint64(from) >= width {
			to = int64(uint64(from) + width - 1)
		}
		parts = append(parts, [2]int64{from, to})
		if to == hi {
			return parts
		}
		from = to + 1
	}
}
