package beam

import (
	"fmt"
	"math"
	"testing"
)

// keyRanges covers lo..hi with at most n contiguous ranges, even across the whole int64 line.
func TestKeyRanges(t *testing.T) {
	for _, c := range []struct {
		lo, hi int64
		n      int
		want   string
	}{
		{1, 10, 3, "[1 4] [5 8] [9 10]"},
		{301, 569, 3, "[301 390] [391 480] [481 569]"},
		{5, 5, 4, "[5 5]"},
		{-3, 2, 2, "[-3 -1] [0 2]"},
		{0, 2, 8, "[0 0] [1 1] [2 2]"},
		{math.MinInt64, math.MaxInt64, 2, fmt.Sprintf("[%d -1] [0 %d]", int64(math.MinInt64), int64(math.MaxInt64))},
	} {
		got := ""
		for _, r := range keyRanges(c.lo, c.hi, c.n) {
			if got != "" {
				got += " "
			}
			got += fmt.Sprintf("[%d %d]", r[0], r[1])
		}
		if got != c.want {
			t.Errorf("keyRanges(%d, %d, %d) = %s, want %s", c.lo, c.hi, c.n, got, c.want)
		}
	}
}

// The SQL a part is read with: the key tuple's order as the server compares it, values written back as
// the literals of their types, and the bytes of an insensitive string after it.
func TestKeySQL(t *testing.T) {
	key := []keyColumn{
		columnInfo{Name: "name", DataType: "varchar", ColumnType: "varchar(20)", Collation: "utf8mb4_0900_ai_ci"}.keyColumn(),
		columnInfo{Name: "n", DataType: "decimal", ColumnType: "decimal(10,2)"}.keyColumn(),
		columnInfo{Name: "b", DataType: "varbinary", ColumnType: "varbinary(8)", Collation: "binary"}.keyColumn(),
	}
	b := []string{key[0].literal([]byte("O'Brien")), key[1].literal([]byte("-1.50")), key[2].literal([]byte{0, 0xff})}
	if got, want := after(key, b), "(`name` > 'O''Brien') OR (`name` = 'O''Brien' AND `n` > -1.50) OR (`name` = 'O''Brien' AND `n` = -1.50 AND `b` > X'00ff')"; got != want {
		t.Errorf("after = %s\nwant    %s", got, want)
	}
	if got, want := orderBy(key), "`name`, HEX(`name`), `n`, `b`"; got != want {
		t.Errorf("orderBy = %s, want %s", got, want)
	}
	for _, c := range []struct {
		info columnInfo
		want literalKind
	}{
		{columnInfo{DataType: "bigint", ColumnType: "bigint unsigned"}, literalNumber},
		{columnInfo{DataType: "datetime", ColumnType: "datetime(6)"}, literalText},
		{columnInfo{DataType: "char", ColumnType: "char(3)", Collation: "utf8mb4_bin"}, literalText},
		{columnInfo{DataType: "longblob", ColumnType: "longblob"}, literalBytes},
		{columnInfo{DataType: "enum", ColumnType: "enum('a','b')"}, literalOther},
	} {
		if k := c.info.keyColumn(); k.Literal != c.want {
			t.Errorf("%s: literal kind %d, want %d", c.info.ColumnType, k.Literal, c.want)
		}
	}
	if (keyColumn{Collation: "utf8mb4_bin"}).insensitive() || (keyColumn{Collation: "binary"}).insensitive() || !(keyColumn{Collation: "utf8mb4_0900_ai_ci"}).insensitive() {
		t.Error("insensitive: only a collation that is neither binary nor _bin")
	}
}
