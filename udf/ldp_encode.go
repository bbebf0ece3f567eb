package udf

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"

	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/plugins/host"
)

// LDPEncode is LDP_ENCODE(features, eps, 'mechanism' [, 'randomiser' [, unit_key]]) and, with asJSON,
// LDP_ENCODE_JSON. (unit_key matters only for a protected table's data, see package boundary.) The registered
// mechanism's encoder plugin maps the features (a packed float32 BLOB or a JSON array) to its latent;
// the host clips the latent into the output set recorded at registration and the randomiser (default
// 'laplace') adds noise calibrated to that set, so the release is eps-LDP whatever the plugin does. In
// a SELECT list, rows are encoded in batches (one plugin call per 4,096 rows, see BatchRule). NULL
// features give NULL.
//
// The short form LDP_ENCODE(column, eps) releases a column that a DBA gave a default mechanism
// (CALL ldp_set_default_mechanism): the analyzer rewrites it into LDP_ENCODE(column, eps, 'mechanism',
// 'randomiser') before anything else sees it (short_forms.go), so it is that call in every respect. A
// short form that was not rewritten is never evaluated.
type LDPEncode struct {
	scalar
	mechs  *Mechanisms
	asJSON bool
}

var _ BatchExpression = (*LDPEncode)(nil)
var _ sql.FunctionExpression = (*LDPEncode)(nil)
var _ sql.NonDeterministicExpression = (*LDPEncode)(nil)

func newLDPEncode(mechs *Mechanisms, asJSON bool) sql.CreateFuncNArgs {
	name := "ldp_encode"
	if asJSON {
		name = "ldp_encode_json"
	}
	return func(_ *sql.Context, args ...sql.Expression) (sql.Expression, error) {
		if len(args) < 2 || len(args) > 5 {
			return nil, arityError(name, "2, 3, 4 or 5", len(args))
		}
		return &LDPEncode{scalar: scalar{name: name, args: args}, mechs: mechs, asJSON: asJSON}, nil
	}
}

// Description implements sql.FunctionExpression.
func (f *LDPEncode) Description() string {
	return "eps-LDP release of a feature vector through a registered mechanism (encoder plugin + host randomiser)"
}

// Type implements sql.Expression.
func (f *LDPEncode) Type(*sql.Context) sql.Type {
	if f.asJSON {
		return types.JSON
	}
	return types.LongBlob
}

// WithChildren implements sql.Expression.
func (f *LDPEncode) WithChildren(ctx *sql.Context, children ...sql.Expression) (sql.Expression, error) {
	return newLDPEncode(f.mechs, f.asJSON)(ctx, children...)
}

// BatchArgs implements BatchExpression.
func (f *LDPEncode) BatchArgs() []sql.Expression { return f.args }

// Eval implements sql.Expression: one row, as a batch of one.
func (f *LDPEncode) Eval(ctx *sql.Context, row sql.Row) (any, error) { return evalOne(ctx, f, row) }

type encodeGroup struct {
	mechanism, randomiser string
	eps                   float64
}

// short reports whether this is the two-argument short form, which shortFormsRule rewrites.
func (f *LDPEncode) short() bool { return len(f.args) == 2 }

// EvalBatch implements BatchExpression: rows with the same mechanism, eps and randomiser go to the plugin
// in one call.
func (f *LDPEncode) EvalBatch(ctx *sql.Context, args [][]any) ([]any, error) {
	fn := strings.ToUpper(f.name)
	if f.short() {
		return nil, errShortNotExpanded(fn)
	}
	out := make([]any, len(args))
	groups := map[encodeGroup][]int{}
	var order []encodeGroup
	for i, a := range args {
		if a[0] == nil || a[1] == nil || a[2] == nil || (len(a) >= 4 && a[3] == nil) {
			continue // NULL in, NULL out
		}
		eps, err := toEpsilon(ctx, fn, a[1])
		if err != nil {
			return nil, err
		}
		g := encodeGroup{mechanism: fmt.Sprint(a[2]), randomiser: mechanisms.RandomiserLaplace, eps: eps}
		if len(a) >= 4 {
			g.randomiser = strings.ToLower(fmt.Sprint(a[3]))
		}
		if _, seen := groups[g]; !seen {
			order = append(order, g)
		}
		groups[g] = append(groups[g], i)
	}
	for _, g := range order {
		mech, err := f.mechs.resolve(ctx, g.mechanism)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fn, err)
		}
		mech.warnCaveat(ctx, g.randomiser, g.eps)
		idx := groups[g]
		rows := make([][]float32, len(idx))
		for k, i := range idx {
			v, err := toVector(ctx, fn, "features", args[i][0])
			if err != nil {
				return nil, err
			}
			if len(v) != mech.desc.InputDim {
				return nil, fmt.Errorf("%s: features have %d values, mechanism %q expects %d", fn, len(v), g.mechanism, mech.desc.InputDim)
			}
			rows[k] = v
		}
		// The host refuses NaN and ±Inf as it copies the rows to the plugin (host.ErrNonFiniteInput):
		// a separate pass here, over data long out of cache, cost 51 ms of CPU per 60,000 rows of 784.
		released, err := mech.privatise(ctx, rows, g.randomiser, g.eps)
		var nf *host.NonFiniteInputError
		if errors.As(err, &nf) {
			return nil, nonFiniteError(fn, "features", nf.Value, nf.Index)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fn, err)
		}
		for k, i := range idx {
			if f.asJSON {
				out[i] = types.MustJSON(formatJSONVector(released[k]))
			} else {
				out[i] = PackVector(toFloat32(released[k]))
			}
		}
	}
	return out, nil
}

func toFloat32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}
