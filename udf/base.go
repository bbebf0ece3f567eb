package udf

import (
	"fmt"
	"strings"

	"github.com/dolthub/go-mysql-server/sql"
)

// scalar is the shared skeleton of a non-deterministic scalar SQL function: its name, its argument
// expressions, and the plumbing GMS needs. Each function embeds it and adds Eval and Type.
type scalar struct {
	name string
	args []sql.Expression
}

func (s *scalar) FunctionName() string         { return strings.ToLower(s.name) }
func (s *scalar) Children() []sql.Expression   { return s.args }
func (s *scalar) IsNullable(*sql.Context) bool { return true }
func (s *scalar) IsNonDeterministic() bool     { return true }
func (s *scalar) Resolved() bool {
	for _, a := range s.args {
		if !a.Resolved() {
			return false
		}
	}
	return true
}

func (s *scalar) String() string {
	parts := make([]string, len(s.args))
	for i, a := range s.args {
		parts[i] = a.String()
	}
	return fmt.Sprintf("%s(%s)", strings.ToUpper(s.name), strings.Join(parts, ", "))
}

func (s *scalar) checkArity(n int) error {
	if len(s.args) != n {
		return sql.ErrInvalidArgumentNumber.New(strings.ToUpper(s.name), n, len(s.args))
	}
	return nil
}
