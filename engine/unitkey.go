package engine

import (
	"cmp"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dolthub/go-mysql-server/sql"
)

// UnitKey is the canonical key of a unit from the values of its unit columns and their SQL types
// (types[i] is values[i]'s column's type): one value as text (integers in decimal, floats shortest
// round-trip, BLOBs as x'hex', times in UTC RFC 3339), several as a JSON array of those texts. A NULL
// value is an error: it identifies no unit.
//
// A string of a column whose collation is not binary is keyed by what the collation calls equal, so that
// 'alice' and 'ALICE' in a utf8mb4_0900_ai_ci column are one unit with one budget, as they are one
// primary key in SQL: see FoldUnitString. Merging spellings never gives anyone more budget. A binary
// collation (binary, or a name ending in _bin: every column of a database made before utf8mb4_0900_ai_ci
// became the default) keeps the bytes as written, so keys already in a ledger keep their meaning.
func UnitKey(types []sql.Type, values ...any) (string, error) {
	if len(types) != len(values) {
		return "", fmt.Errorf("a unit key of %d values has %d types", len(values), len(types))
	}
	parts := make([]string, len(values))
	for i, v := range values {
		s, err := unitPart(types[i], v)
		if err != nil {
			return "", err
		}
		parts[i] = s
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	b, _ := json.Marshal(parts)
	return string(b), nil
}

// FoldUnitKey is UnitKey for a key that arrives already written, as UnitKey writes it but perhaps
// without the folding (a unit named by a user or an external job): the same key UnitKey gives the values
// it was written from. A key of several columns is a JSON array of one text per column.
func FoldUnitKey(types []sql.Type, key string) (string, error) {
	if len(types) == 1 {
		if c, ok := FoldingCollation(types[0]); ok {
			return FoldUnitString(c, key), nil
		}
		return key, nil
	}
	var parts []string
	if err := json.Unmarshal([]byte(key), &parts); err != nil || len(parts) != len(types) {
		return "", fmt.Errorf("unit key %q: want a JSON array of %d texts, one per unit column", key, len(types))
	}
	for i, t := range types {
		if c, ok := FoldingCollation(t); ok {
			parts[i] = FoldUnitString(c, parts[i])
		}
	}
	b, _ := json.Marshal(parts)
	return string(b), nil
}

// FoldingCollation is the collation by which UnitKey keys t's strings, and false where it keys them byte
// for byte: t is not a string type, or its collation is binary.
func FoldingCollation(t sql.Type) (sql.CollationID, bool) {
	st, ok := t.(sql.StringType)
	if !ok || !st.IsStringType() {
		return 0, false
	}
	c := st.Collation()
	if c == sql.Collation_binary || strings.HasSuffix(c.Name(), "_bin") || c.Sorter() == nil {
		return 0, false
	}
	return c, true
}

func unitPart(t sql.Type, v any) (string, error) {
	if c, ok := FoldingCollation(t); ok {
		switch x := v.(type) {
		case string:
			return FoldUnitString(c, x), nil
		case []byte:
			return FoldUnitString(c, string(x)), nil
		}
	}
	switch x := v.(type) {
	case nil:
		return "", errors.New("a unit key is NULL")
	case string:
		return x, nil
	case []byte:
		return "x'" + hex.EncodeToString(x) + "'", nil
	case int:
		return strconv.FormatInt(int64(x), 10), nil
	case int8:
		return strconv.FormatInt(int64(x), 10), nil
	case int16:
		return strconv.FormatInt(int64(x), 10), nil
	case int32:
		return strconv.FormatInt(int64(x), 10), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case uint8:
		return strconv.FormatUint(uint64(x), 10), nil
	case uint16:
		return strconv.FormatUint(uint64(x), 10), nil
	case uint32:
		return strconv.FormatUint(uint64(x), 10), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	case bool:
		if x {
			return "1", nil
		}
		return "0", nil
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano), nil
	case fmt.Stringer:
		return x.String(), nil
	}
	return fmt.Sprint(v), nil
}

// FoldUnitString is s in collation c's canonical spelling: each character replaced by the
// representative of the characters c gives its weight. GMS weighs a string character by character
// (sql.CollationID.WriteWeightString; comparisons use the same weights), so two strings are equal in c
// exactly when they have the same characters' weights in the same order, that is, exactly when their
// canonical spellings are the same. The representative of a weight is the first of its characters in
// this order: graphic before not (a ledger shows the key to a DBA), its own lower case before not, then
// the smallest code point. So for utf8mb4_0900_ai_ci 'Alice', 'ALICE', 'Álice' and 'ａｌｉｃｅ' all
// become 'alice', and a key already in lower-case ASCII is the value as written. Invalid UTF-8 bytes
// weigh as U+FFFD in GMS and become its representative here, so a key is always valid UTF-8.
func FoldUnitString(c sql.CollationID, s string) string {
	f := foldOf(c)
	i := 0
	for i < len(s) { // the common case: nothing changes, no copy
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 || f.of(r) != r {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for _, r := range s[i:] { // range yields U+FFFD for each invalid byte, as GMS's decoding does
		b.WriteRune(f.of(r))
	}
	return b.String()
}

// runeFold is one collation's map from a character to its weight's representative.
type runeFold struct {
	ascii [utf8.RuneSelf]rune
	other map[rune]rune // only the characters that are not their own representative
}

func (f *runeFold) of(r rune) rune {
	if r >= 0 && r < utf8.RuneSelf {
		return f.ascii[r]
	}
	if to, ok := f.other[r]; ok {
		return to
	}
	return r
}

var runeFolds sync.Map // sql.CollationID → func() *runeFold

func foldOf(c sql.CollationID) *runeFold {
	build, _ := runeFolds.LoadOrStore(c, sync.OnceValue(func() *runeFold { return buildRuneFold(c.Sorter()) }))
	return build.(func() *runeFold)()
}

// buildRuneFold weighs every character once (about 1.1 million; tens of milliseconds, once per
// collation in use) and keeps, for each weight, the representative FoldUnitString documents.
func buildRuneFold(weight sql.CollationSorter) *runeFold {
	type weighed struct {
		w    int32
		rank int8 // 0 best: graphic and its own lower case
		r    rune
	}
	all := make([]weighed, 0, unicode.MaxRune+1)
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		var rank int8
		if !unicode.IsGraphic(r) {
			rank += 2
		}
		if unicode.ToLower(r) != r {
			rank++
		}
		all = append(all, weighed{weight(r), rank, r})
	}
	slices.SortFunc(all, func(a, b weighed) int {
		if c := cmp.Compare(a.w, b.w); c != 0 {
			return c
		}
		if c := cmp.Compare(a.rank, b.rank); c != 0 {
			return c
		}
		return cmp.Compare(a.r, b.r)
	})
	f := &runeFold{other: map[rune]rune{}}
	for i := 0; i < len(all); {
		j := i
		rep := all[i].r
		for ; j < len(all) && all[j].w == all[i].w; j++ {
			if r := all[j].r; r < utf8.RuneSelf {
				f.ascii[r] = rep
			} else if r != rep {
				f.other[r] = rep
			}
		}
		i = j
	}
	return f
}
