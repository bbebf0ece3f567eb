package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"
	"github.com/dolthub/vitess/go/mysql"
)

// GMS's errors reach wireError as its handler casts them (sql.CastSQLError); each leaves with MySQL's
// number and SQLSTATE, and ldpsql's own errors stay 1105 / HY000 with their text.
func TestWireErrorGivesMySQLCodes(t *testing.T) {
	for _, c := range []struct {
		err   error
		num   int
		state string
	}{
		{sql.ErrTableNotFound.New("nope"), 1146, "42S02"},
		{sql.ErrColumnNotFound.New("nope"), 1054, "42S22"},
		{sql.ErrSyntaxError.New("syntax error at position 6 near 'SELEC'"), 1064, "42000"},
		{sql.ErrPrivilegeCheckFailed.New("'analyst'@'%'"), 1142, "42000"},
		{sql.ErrDatabaseAccessDeniedForUser.New("'analyst'@'%'", "mysql"), 1044, "42000"},
		{sql.ErrDatabaseNotFound.New("nodb"), 1049, "42000"},
		{sql.ErrInsertIntoNonNullableProvidedNull.New("s"), 1048, "23000"},
		{sql.ErrPrimaryKeyViolation.New("[1]"), 1062, "23000"},
		{types.ErrLengthBeyondLimit.New("abcdefgh", "s"), 1406, "22001"},
		{sql.ErrTableAlreadyExists.New("t"), 1050, "42S01"},
		{errors.New("ldp budget exceeded: 3 of 3 units of table ldpsql.t would go over their budget"), 1105, "HY000"},
	} {
		out, ok := wireError(sql.CastSQLError(c.err)).(*mysql.SQLError)
		if !ok || out.Num != c.num || out.State != c.state || out.Message != c.err.Error() {
			t.Errorf("%v: got %v, want %d (%s)", c.err, out, c.num, c.state)
		}
	}
}

// A value of a few hundred bytes is cut in a message of any length, not only in long ones.
func TestWireErrorShortensDataTooLong(t *testing.T) {
	out := wireError(sql.CastSQLError(types.ErrLengthBeyondLimit.New(strings.Repeat("x", 200), "s"))).(*mysql.SQLError)
	if out.Num != mysql.ERDataTooLong || strings.Contains(out.Message, strings.Repeat("x", quotedKeep+1)) ||
		!strings.Contains(out.Message, "(200 bytes)") {
		t.Errorf("got %v", out)
	}
}
