package engine

import (
	"strings"
	"testing"

	"github.com/dolthub/vitess/go/mysql"
)

// An error quoting a long value (GMS quotes whole values: a 100,000-character string, a BLOB as a list
// of bytes) reaches the client with the value cut to its first bytes and its length; short quotes and
// the error's number stay.
func TestWireErrorShortensQuotedValues(t *testing.T) {
	long := strings.Repeat("é", 50000) // multi-byte: the cut keeps whole characters
	in := mysql.NewSQLError(mysql.ERDataTooLong, mysql.SSUnknownSQLState, "string '%s' is too large for column 's'", long)
	out, ok := wireError(in).(*mysql.SQLError)
	if !ok || out.Num != mysql.ERDataTooLong || len(out.Message) > 200 ||
		!strings.Contains(out.Message, "…' (100000 bytes) is too large for column 's'") || !strings.HasPrefix(out.Message, "string 'éé") {
		t.Errorf("shortened: %v", out)
	}
	short := mysql.NewSQLError(mysql.ERDupEntry, mysql.SSConstraintViolation, "Duplicate entry '12' for key 'u.PRIMARY'")
	if got := wireError(short); got.Error() != short.Error() {
		t.Errorf("a short quote changed: %v", got)
	}
}

// Apostrophes are not quotes, and a message of a normal length is left as it is.
func TestShortenQuotedLeavesProse(t *testing.T) {
	prose := "LDP_ENCODE(col, eps): the two-argument form releases a column of a table with the column's default mechanism, and LDP_VECTOR(1, 2) is not one (an expression, or a column computed in a derived table or view); write LDP_ENCODE(LDP_VECTOR(1, 2), eps, 'mechanism')"
	if got := shortenQuoted(prose); got != prose {
		t.Errorf("changed:\n%s", got)
	}
	long := prose + " value '" + strings.Repeat("v", 500) + "' and the user's " + strings.Repeat("w", 300)
	want := prose + " value '" + strings.Repeat("v", 40) + "…' (500 bytes) and the user's " + strings.Repeat("w", 300)
	if got := shortenQuoted(long); got != want {
		t.Errorf("long message:\n%s", got)
	}
}
