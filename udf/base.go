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
		return arityError(s.name, n, len(s.args))
	}
	return nil
}

// signatures are the SQL functions' argument lists as the README gives them, which an error about the
// number of arguments shows, so that the user sees what was expected and not just how many.
var signatures = map[string]string{
	"flip_label":             "FLIP_LABEL(y, eps, K [, unit_key])",
	"ldp_laplace":            "LDP_LAPLACE(x, eps, lo, hi [, unit_key])",
	"rr_frequency":           "RR_FREQUENCY(y_noisy, eps, K, class [, unit_key])",
	"private_accuracy":       "PRIVATE_ACCURACY(correct, eps [, unit_key])",
	"ldp_accuracy_bound":     "LDP_ACCURACY_BOUND(eps, K)",
	"ldp_encode":             "LDP_ENCODE(features, eps [, 'mechanism' [, 'randomiser' [, unit_key]]])",
	"ldp_encode_json":        "LDP_ENCODE_JSON(features, eps [, 'mechanism' [, 'randomiser' [, unit_key]]])",
	"ldp_decode":             "LDP_DECODE(release, 'mechanism')",
	"train_noisy_classifier": "TRAIN_NOISY_CLASSIFIER('table' [, '{params}'])",
	"predict":                "PREDICT('model', features [, 'clean'|'release'])",
	"ldp_vector":             "LDP_VECTOR(c1, …, cn)",
	"ldp_unit_key":           "LDP_UNIT_KEY(c1, …, cn)",
}

// arityError is GMS's error for a call of function name with got arguments where want were expected,
// followed by the function's signature.
func arityError(name string, want any, got int) error {
	err := sql.ErrInvalidArgumentNumber.New(strings.ToUpper(name), want, got)
	if sig, ok := signatures[name]; ok {
		return fmt.Errorf("%w: %s", err, sig)
	}
	return err
}
