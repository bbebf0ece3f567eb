package udf

import (
	"errors"
	"fmt"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"

	"github.com/ldpsql/ldpsql/plugins/host"
)

// LDPDecode is LDP_DECODE(release, 'mechanism'): the mechanism's decoder maps a released (noisy) latent
// back to feature space, e.g. the VLM's decoder mean. Decoding is post-processing of an eps-LDP
// release, so the feature-level release keeps the same eps. Returns a packed float32 BLOB; NULL gives
// NULL. Batched like LDP_ENCODE.
type LDPDecode struct {
	scalar
	mechs *Mechanisms
}

var _ BatchExpression = (*LDPDecode)(nil)

func newLDPDecode(mechs *Mechanisms) sql.CreateFuncNArgs {
	return func(_ *sql.Context, args ...sql.Expression) (sql.Expression, error) {
		f := &LDPDecode{scalar: scalar{name: "ldp_decode", args: args}, mechs: mechs}
		return f, f.checkArity(2)
	}
}

// Description implements sql.FunctionExpression.
func (f *LDPDecode) Description() string {
	return "decodes an LDP_ENCODE release to feature space with the mechanism's decoder (post-processing)"
}

// Type implements sql.Expression.
func (f *LDPDecode) Type(*sql.Context) sql.Type { return types.LongBlob }

// IsNonDeterministic: decoding is deterministic, but it calls a plugin; keep GMS from folding it.
func (f *LDPDecode) IsNonDeterministic() bool { return true }

// WithChildren implements sql.Expression.
func (f *LDPDecode) WithChildren(ctx *sql.Context, children ...sql.Expression) (sql.Expression, error) {
	return newLDPDecode(f.mechs)(ctx, children...)
}

// BatchArgs implements BatchExpression.
func (f *LDPDecode) BatchArgs() []sql.Expression { return f.args }

// Eval implements sql.Expression.
func (f *LDPDecode) Eval(ctx *sql.Context, row sql.Row) (any, error) { return evalOne(ctx, f, row) }

// EvalBatch implements BatchExpression.
func (f *LDPDecode) EvalBatch(ctx *sql.Context, args [][]any) ([]any, error) {
	const fn = "LDP_DECODE"
	out := make([]any, len(args))
	groups := map[string][]int{}
	var order []string
	for i, a := range args {
		if a[0] == nil || a[1] == nil {
			continue
		}
		name := fmt.Sprint(a[1])
		if _, seen := groups[name]; !seen {
			order = append(order, name)
		}
		groups[name] = append(groups[name], i)
	}
	for _, name := range order {
		mech, err := f.mechs.resolve(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fn, err)
		}
		if !mech.desc.HasDecoder {
			return nil, fmt.Errorf("%s: mechanism %q has no decoder", fn, name)
		}
		idx := groups[name]
		latents := make([][]float32, len(idx))
		for k, i := range idx {
			v, err := toVector(ctx, fn, "release", args[i][0])
			if err != nil {
				return nil, err
			}
			if len(v) != mech.desc.OutputDim {
				return nil, fmt.Errorf("%s: the release has %d values, mechanism %q releases %d", fn, len(v), name, mech.desc.OutputDim)
			}
			if err := checkFinite(fn, "release", v); err != nil {
				return nil, err
			}
			latents[k] = v
		}
		decoded, err := mech.plugin.Decode(ctx, latents)
		if errors.Is(err, host.ErrReplaced) {
			return nil, fmt.Errorf("%s: mechanism %q was replaced while in use; run the statement again", fn, name)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: mechanism %q: %w", fn, name, err)
		}
		for k, i := range idx {
			out[i] = PackVector(decoded[k])
		}
	}
	return out, nil
}
