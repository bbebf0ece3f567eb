package engine

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"
	"github.com/dolthub/vitess/go/mysql"
	errors "gopkg.in/src-d/go-errors.v1"
)

// wireError is where every error leaves the server for a client (cancelOnDisconnect's statements and
// COM_INIT_DB). It gives errors MySQL's numbers and SQLSTATEs, so that drivers raise the exception
// class their users catch (pymysql's ProgrammingError for 1146, IntegrityError for 1062, …), and cuts
// long quoted values out of messages:
//
//   - errors GMS sends as 1105 (ER_UNKNOWN_ERROR) for which MySQL has a number get it (mysqlCodes);
//   - a statement stopped by KILL QUERY (GMS reports its cancelled context, "… context canceled")
//     becomes ER_QUERY_INTERRUPTED, and a statement over the bounds of checkStatementSize a parse error;
//   - an error GMS numbers but leaves in SQLSTATE HY000 gets MySQL's SQLSTATE for its number
//     (sqlStates): 1146 is 42S02, 1048 23000, 1049 42000;
//   - ldpsql's own errors (budgets, privacy parameters, protected columns) stay 1105 / HY000 with
//     their text, which says what to do; MySQL has no number that means them.
func wireError(err error) error {
	e, ok := err.(*mysql.SQLError)
	if !ok {
		return err
	}
	num, state := e.Num, e.State
	if num == mysql.ERUnknownError {
		num, state = mysqlCodeOf(e.Message)
	}
	if state == mysql.SSUnknownSQLState {
		if s, ok := sqlStates[num]; ok {
			state = s
		}
	}
	msg := shortenQuoted(e.Message)
	if num == e.Num && state == e.State && msg == e.Message {
		return err
	}
	return mysql.NewSQLError(num, state, "%s", msg)
}

// mysqlCode recognises, by its message, an error that GMS sends as 1105 although MySQL has a number for
// it. GMS's handler has already turned the error into a *mysql.SQLError when wireError sees it, so its
// errors.Kind is gone; the message, made from the kind's format, is what is left to match.
type mysqlCode struct {
	message *regexp.Regexp
	num     int
	state   string
}

var mysqlCodes = []mysqlCode{
	kindCode(sql.ErrColumnNotFound, mysql.ERBadFieldError, mysql.SSBadFieldError),
	// sql.ErrSyntaxError's format is "%s": the text is vitess's parser's.
	{regexp.MustCompile(`^syntax error at position \d+`), mysql.ERParseError, mysql.SSClientError},
	{regexp.MustCompile("^" + regexp.QuoteMeta(tooComplex)), mysql.ERParseError, mysql.SSClientError},
	// GMS reports a missing privilege on a table, a database or the server with one error; MySQL's
	// nearest is ER_TABLEACCESS_DENIED_ERROR ("INSERT command denied to user … for table …").
	kindCode(sql.ErrPrivilegeCheckFailed, erTableAccessDenied, mysql.SSClientError),
	kindCode(sql.ErrTableAccessDeniedForUser, erTableAccessDenied, mysql.SSClientError),
	kindCode(sql.ErrDatabaseAccessDeniedForUser, mysql.ERDBAccessDenied, mysql.SSClientError),
	kindCode(types.ErrLengthBeyondLimit, mysql.ERDataTooLong, mysql.SSDataTooLong),
	kindCode(sql.ErrTableAlreadyExists, mysql.ERTableExists, ssTableExists),
	kindCode(sql.ErrColumnExists, mysql.ERDupFieldName, mysql.SSDupFieldName),
	// INTO OUTFILE/DUMPFILE and ldp_export never overwrite a file: MySQL's ER_FILE_EXISTS_ERROR.
	kindCode(sql.ErrFileExists, mysql.ERFileExists, mysql.SSUnknownSQLState),
}

// kindCode matches the messages of kind: its format with every verb (%s, %v, %q, %d) matching anything.
func kindCode(kind *errors.Kind, num int, state string) mysqlCode {
	parts := formatVerb.Split(kind.Message, -1)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return mysqlCode{regexp.MustCompile(`(?s)^` + strings.Join(parts, ".*") + `$`), num, state}
}

var formatVerb = regexp.MustCompile(`%[svqd]`)

// mysqlCodeOf returns MySQL's number and SQLSTATE for an error GMS sent as 1105 with message msg, or
// 1105 / HY000 where there is none.
func mysqlCodeOf(msg string) (int, string) {
	if strings.HasSuffix(msg, context.Canceled.Error()) { // also as wrapped: `scanning table "t": context canceled`
		return mysql.ERQueryInterrupted, mysql.SSQueryInterrupted
	}
	for _, c := range mysqlCodes {
		if c.message.MatchString(msg) {
			return c.num, c.state
		}
	}
	return mysql.ERUnknownError, mysql.SSUnknownSQLState
}

// sqlStates is MySQL's SQLSTATE for the numbers GMS's sql.CastSQLError gives without one (it leaves them
// HY000, which drivers that go by SQLSTATE read as a general error).
var sqlStates = map[int]string{
	mysql.ERDBAccessDenied:              mysql.SSClientError,          // 1044
	mysql.ERAccessDeniedError:           mysql.SSAccessDeniedError,    // 1045
	mysql.ERBadNullError:                mysql.SSConstraintViolation,  // 1048
	mysql.ERBadDb:                       mysql.SSClientError,          // 1049
	mysql.ERTableExists:                 ssTableExists,                // 1050
	mysql.ERBadFieldError:               mysql.SSBadFieldError,        // 1054
	mysql.ERDupFieldName:                mysql.SSDupFieldName,         // 1060
	mysql.ERDupEntry:                    mysql.SSConstraintViolation,  // 1062
	mysql.ERParseError:                  mysql.SSClientError,          // 1064
	mysql.ERMultiplePriKey:              mysql.SSClientError,          // 1068
	mysql.ERKeyColumnDoesNotExist:       mysql.SSClientError,          // 1072
	mysql.ERWrongAutoKey:                mysql.SSClientError,          // 1075
	mysql.ERCantDropFieldOrKey:          mysql.SSClientError,          // 1091
	mysql.ERFieldSpecifiedTwice:         mysql.SSClientError,          // 1110
	mysql.ERMixOfGroupFuncAndFields:     mysql.SSClientError,          // 1140
	erTableAccessDenied:                 mysql.SSClientError,          // 1142
	mysql.ERNoSuchTable:                 mysql.SSUnknownTable,         // 1146: 42S02
	mysql.ERSpecifiedAccessDenied:       mysql.SSClientError,          // 1227
	mysql.EROperandColumns:              mysql.SSWrongNumberOfColumns, // 1241
	mysql.ERSubqueryNo1Row:              mysql.SSWrongNumberOfColumns, // 1242: 21000, as 1241
	mysql.ERQueryInterrupted:            mysql.SSQueryInterrupted,     // 1317
	mysql.ERDataTooLong:                 mysql.SSDataTooLong,          // 1406
	mysql.ERRowIsReferenced2:            mysql.SSConstraintViolation,  // 1451
	mysql.ErNoReferencedRow2:            mysql.SSConstraintViolation,  // 1452
	mysql.ERLockDeadlock:                mysql.SSLockDeadlock,         // 1213
	mysql.ERTruncatedWrongValueForField: mysql.SSUnknownSQLState,      // 1366: HY000 in MySQL too
}

// erTableAccessDenied is MySQL's ER_TABLEACCESS_DENIED_ERROR, which vitess has no constant for.
const erTableAccessDenied = 1142

// ssTableExists is MySQL's SQLSTATE for ER_TABLE_EXISTS_ERROR, which vitess has no constant for.
const ssTableExists = "42S01"

// Errors quote values (GMS's "string 'xxx…' is too large for column", conversion errors), whole: a
// 16 MB BLOB came back as a 16 MB message, and a 200-byte string was echoed to every client that shows
// errors (logs, dashboards). MySQL cuts them; shortenQuoted keeps the first quotedKeep bytes of every
// quoted run longer than quotedMax (MySQL's longest identifier, so names are never cut) and says how
// long it was. A quote opens only after a space or an opening bracket, so that an apostrophe
// ("column's") is not taken for one.
const (
	quotedMax  = 64
	quotedKeep = 40
)

var longQuoted = regexp.MustCompile(`(^|[\s(\[=,:])'([^']{` + strconv.Itoa(quotedMax+1) + `,})'`)

func shortenQuoted(msg string) string {
	if len(msg) <= quotedMax {
		return msg
	}
	return longQuoted.ReplaceAllStringFunc(msg, func(m string) string {
		open := strings.IndexByte(m, '\'')
		inner := m[open+1 : len(m)-1]
		cut := quotedKeep
		for cut > 0 && !utf8.RuneStart(inner[cut]) {
			cut--
		}
		return fmt.Sprintf("%s'%s…' (%d bytes)", m[:open], inner[:cut], len(inner))
	})
}
