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
