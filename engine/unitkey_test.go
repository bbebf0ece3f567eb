package engine

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"
	"github.com/dolthub/vitess/go/sqltypes"
)

func varchar(c sql.CollationID) sql.Type { return types.MustCreateString(sqltypes.VarChar, 255, c) }

func TestUnitKeyFoldsInsensitiveStrings(t *testing.T) {
	ci := []sql.Type{varchar(sql.Collation_utf8mb4_0900_ai_ci)}
	for _, tc := range []struct{ in, want string }{
		{"alice", "alice"},
		{"Alice", "alice"},
		{"ALICE", "alice"},
		{"Álîcé", "alice"},
		{"Ａｌｉｃｅ", "alice"}, // full-width forms
		{"bob 42", "bob 42"},
		{"a\xffb", "a\ufffdb"}, // an invalid byte weighs as U+FFFD in GMS; keys stay valid UTF-8
	} {
		if got, err := UnitKey(ci, tc.in); err != nil || got != tc.want {
			t.Errorf("UnitKey(ai_ci, %q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if got, _ := UnitKey([]sql.Type{types.Int64, ci[0]}, int64(7), "Bob"); got != `["7","bob"]` {
		t.Errorf("two unit columns: %s", got)
	}
	for _, c := range []sql.CollationID{sql.Collation_utf8mb4_0900_bin, sql.Collation_utf8mb4_bin, sql.Collation_binary} {
		if got, _ := UnitKey([]sql.Type{varchar(c)}, "Álice"); got != "Álice" {
			t.Errorf("binary collation %s changed the key: %q", c, got)
		}
	}
	if got, _ := UnitKey([]sql.Type{types.Blob}, []byte("Ab")); got != "x'4162'" {
		t.Errorf("BLOB key %q", got)
	}
	// A key written without folding (by a user or an external job) folds to the same key.
	two := []sql.Type{types.Int64, ci[0]}
	for written, want := range map[string]string{"ALICE": "alice", "alice": "alice"} {
		if got, err := FoldUnitKey(ci, written); err != nil || got != want {
			t.Errorf("FoldUnitKey(ai_ci, %q) = %q, %v", written, got, err)
		}
	}
	if got, err := FoldUnitKey(two, `["7","Bob"]`); err != nil || got != `["7","bob"]` {
		t.Errorf("FoldUnitKey of two columns = %q, %v", got, err)
	}
	if got, _ := FoldUnitKey([]sql.Type{varchar(sql.Collation_utf8mb4_0900_bin)}, "ALICE"); got != "ALICE" {
		t.Errorf("FoldUnitKey on a binary column: %q", got)
	}
	if _, err := FoldUnitKey(two, `["7"]`); err == nil || !strings.Contains(err.Error(), "JSON array of 2") {
		t.Errorf("a key of one text for two columns: %v", err)
	}
	if _, err := UnitKey(ci, "a", "b"); err == nil {
		t.Error("more values than types was accepted")
	}
}

// The keys of a collated column have exactly GMS's equality: two strings get one key exactly when GMS's
// weight strings (its hashing) agree and exactly when StringType.Compare calls them equal.
func TestUnitKeyEqualityIsGMSEquality(t *testing.T) {
	families := [][]string{
		{"a", "A", "á", "À", "ä", "Å", "ａ", "Ａ", "ª"},
		{"e", "E", "é", "È", "ê", "ｅ"},
		{"s", "S", "ß", "ẞ", "ś", "ｓ"},
		{"i", "I", "ı", "İ", "í", "ｉ"},
		{"k", "K", "\u212a"}, // Kelvin sign
		{"1", "１", "¹", "①"},
		{" ", "\u00a0", "\u3000"},
		{"\u200b", "\u0301", "\u0000", "\u0007", "\ufeff"}, // zero width, combining, controls
		{"σ", "Σ", "ς"},
		{"д", "Д"},
		{"字", "😀", "\ufffd", "\xff", "\xc3"},
		{"-", "_", "'", "\""},
	}
	collations := []sql.CollationID{sql.Collation_utf8mb4_0900_ai_ci, sql.Collation_utf8mb4_general_ci,
		sql.Collation_utf8mb4_0900_as_cs, sql.Collation_utf8mb4_unicode_ci, sql.Collation_utf8mb4_0900_bin}
	rng := rand.New(rand.NewPCG(7, 11))
	randomString := func(fam []int) string {
		var b strings.Builder
		for _, f := range fam {
			b.WriteString(families[f][rng.IntN(len(families[f]))])
		}
		return b.String()
	}
	ctx := context.Background()
	for _, c := range collations {
		typ := []sql.Type{varchar(c)}
		st := typ[0].(sql.StringType)
		var equal, different int
		for range 20000 {
			// Two strings from the same families are often equal and often not; from random ones, rarely.
			fam := make([]int, 1+rng.IntN(6))
			for i := range fam {
				fam[i] = rng.IntN(len(families))
			}
			a, b := randomString(fam), randomString(fam)
			if rng.IntN(4) == 0 {
				b += randomString([]int{rng.IntN(len(families))})
			}
			ka, err := UnitKey(typ, a)
			if err != nil {
				t.Fatal(err)
			}
			kb, _ := UnitKey(typ, b)
			if fa, err := FoldUnitKey(typ, a); err != nil || fa != ka {
				t.Fatalf("%s: FoldUnitKey(%q) = %q, %v; UnitKey gives %q", c, a, fa, err, ka)
			}
			_, folds := FoldingCollation(typ[0])
			if !folds {
				// A binary collation keys the bytes as written (GMS weighs invalid bytes as U+FFFD, but a
				// utf8mb4 column never stores them).
				if ka != a || kb != b {
					t.Fatalf("%s is binary but changed %q to %q", c, a, ka)
				}
				if !utf8.ValidString(a) || !utf8.ValidString(b) {
					continue
				}
			}
			var wa, wb bytes.Buffer
			_ = c.WriteWeightString(&wa, a)
			_ = c.WriteWeightString(&wb, b)
			gmsEqual := bytes.Equal(wa.Bytes(), wb.Bytes())
			if (ka == kb) != gmsEqual {
				t.Fatalf("%s: %q → %q and %q → %q, but GMS's weights equal: %v", c, a, ka, b, kb, gmsEqual)
			}
			if utf8.ValidString(a) && utf8.ValidString(b) {
				if cmp, err := st.Compare(ctx, a, b); err != nil || (cmp == 0) != gmsEqual {
					t.Fatalf("%s: Compare(%q, %q) = %d, %v; weights equal %v", c, a, b, cmp, err, gmsEqual)
				}
			}
			if !utf8.ValidString(ka) {
				t.Fatalf("%s: key %q of %q is not UTF-8", c, ka, a)
			}
			if gmsEqual {
				equal++
			} else {
				different++
			}
		}
		if equal < 500 || different < 500 {
			t.Errorf("%s: only %d equal and %d different pairs: the test does not test", c, equal, different)
		}
		t.Logf("%s: %d equal pairs, %d different", c, equal, different)
	}
}

func BenchmarkFoldUnitString(b *testing.B) {
	typ := []sql.Type{varchar(sql.Collation_utf8mb4_0900_ai_ci)}
	_, _ = UnitKey(typ, "warm")
	for b.Loop() {
		_, _ = UnitKey(typ, "Customer-ÀB-000123")
	}
}
