package udf

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/analyzer"
	"github.com/dolthub/go-mysql-server/sql/types"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/udf/boundary"
)

// The SQL functions on protected tables. Package boundary binds every release of a protected table's
// data to the ledger and charges it (see its doc comment); this file registers its analyzer rules and
// gives it what only the functions know: which calls release what (boundary.Call), how each parses its
// parameters, and how it encodes its releases (boundary.Release, boundary.Aggregate).

// Rule ids, far from GMS's own.
const (
	shortFormsRuleID analyzer.RuleId = 100_009
	ledgerBindRuleID analyzer.RuleId = 100_010
	ledgerGateRuleID analyzer.RuleId = 100_011
)

func init() {
	// The short forms are expanded first, so that the ledger binds (and charges) the long forms they
	// stand for, exactly as if they had been written (short_forms.go).
	analyzer.AlwaysBeforeDefault = append(analyzer.AlwaysBeforeDefault,
		analyzer.Rule{Id: shortFormsRuleID, Apply: shortFormsRule},
		analyzer.Rule{Id: ledgerBindRuleID, Apply: boundary.BindRule})
	analyzer.OnceAfterAll = append(analyzer.OnceAfterAll, analyzer.Rule{Id: ledgerGateRuleID, Apply: boundary.GateRule})
}

var (
	_ boundary.Release   = (*LDPEncode)(nil)
	_ boundary.Release   = (*FlipLabel)(nil)
	_ boundary.Release   = (*LDPLaplace)(nil)
	_ boundary.Aggregate = (*RRFrequency)(nil)
	_ boundary.Aggregate = (*PrivateAccuracy)(nil)
	_ boundary.Vector    = (*LDPVector)(nil)
	_ boundary.ModelCall = (*Predict)(nil)
	_ boundary.Batched   = (*batchEval)(nil)
)

// ReleaseCall implements boundary.Call.
func (f *LDPEncode) ReleaseCall() (string, []sql.Expression) { return strings.ToUpper(f.name), f.args }

// ReleaseCall implements boundary.Call.
func (f *FlipLabel) ReleaseCall() (string, []sql.Expression) { return "FLIP_LABEL", f.args }

// ReleaseCall implements boundary.Call.
func (f *LDPLaplace) ReleaseCall() (string, []sql.Expression) { return "LDP_LAPLACE", f.args }

// ReleaseCall implements boundary.Call.
func (f *RRFrequency) ReleaseCall() (string, []sql.Expression) { return "RR_FREQUENCY", f.args }

// ReleaseCall implements boundary.Call.
func (f *PrivateAccuracy) ReleaseCall() (string, []sql.Expression) { return "PRIVATE_ACCURACY", f.args }

// CheckBindable implements boundary.Release: a short form must have been expanded (shortFormsRule runs
// first; never release without it).
func (f *LDPEncode) CheckBindable() error {
	if f.short() {
		return errShortNotExpanded(strings.ToUpper(f.name))
	}
	return nil
}

// CheckBindable implements boundary.Release.
func (f *FlipLabel) CheckBindable() error { return nil }

// CheckBindable implements boundary.Release.
func (f *LDPLaplace) CheckBindable() error { return nil }

// IsLDPVector implements boundary.Vector.
func (f *LDPVector) IsLDPVector() {}

// BatchedExpressions implements boundary.Batched.
func (b *batchEval) BatchedExpressions() []sql.Expression {
	out := make([]sql.Expression, len(b.exprs))
	for i, e := range b.exprs {
		out[i] = e
	}
	return out
}

// ModelIdentity implements boundary.ModelCall: a classifier's checksum and its mechanism's identity,
// not its name: the model a validation job checks under a temporary name is the one it stores
// ("unavailable" when it cannot be loaded: then every PREDICT fails and every release is of the
// default input).
func (p *Predict) ModelIdentity(ctx *sql.Context, name string) string {
	l, err := p.c.load(ctx, name)
	if err != nil {
		return "model " + name + ": unavailable"
	}
	id := "model " + l.checksum
	if mech, err := p.c.p.mechs.resolve(ctx, l.art.Mechanism); err == nil {
		id += " mechanism " + mechanismID(mech)
	}
	return id
}

// mechanismID identifies a mechanism in memo keys: a mechanism registered again (another binary or
// model under the same name) does not return the releases of the old one.
func mechanismID(m *resolvedMechanism) string {
	return m.record.Name + "@" + m.record.SHA256 + "@" + m.record.Model + "@" + m.record.RegisteredAt.UTC().Format(time.RFC3339Nano)
}

// ReleaseBatch implements boundary.Release: the releases of LDP_ENCODE or LDP_ENCODE_JSON on a protected
// table, grouped by mechanism, randomiser and ε.
func (f *LDPEncode) ReleaseBatch(ctx *sql.Context, in *boundary.Batch) ([]any, error) {
	fn := strings.ToUpper(f.name)
	c, b, units, what, rows := in.Collector, in.Budget, in.Units, in.What, in.Args
	out := make([]any, len(rows))
	groups := map[encodeGroup][]int{}
	var order []encodeGroup
	for i, a := range rows {
		if a[1] == nil || a[2] == nil || (len(a) == 4 && a[3] == nil) {
			continue // NULL parameters (not data): NULL out, nothing released
		}
		eps, err := toEpsilon(ctx, fn, a[1])
		if err != nil {
			return nil, err
		}
		g := encodeGroup{mechanism: fmt.Sprint(a[2]), randomiser: mechanisms.RandomiserLaplace, eps: eps}
		if len(a) == 4 {
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
		vecs := make([][]float32, len(idx))
		gunits := make([]string, len(idx))
		for k, i := range idx {
			gunits[k] = units[i]
			v := rows[i][0]
			if boundary.IsDefault(v) {
				continue // the default input
			}
			vec, err := toVector(ctx, fn, "features", v)
			if err == nil && len(vec) != mech.desc.InputDim {
				err = fmt.Errorf("%s: features have %d values, mechanism %q expects %d", fn, len(vec), g.mechanism, mech.desc.InputDim)
			}
			if err == nil {
				err = checkFinite(fn, "features", vec)
			}
			if err != nil {
				if in.Strict {
					continue
				}
				return nil, err
			}
			vecs[k] = vec
		}
		released, err := releaseVectors(ctx, c, b, fn, mech, g.randomiser, g.eps, gunits, what.Pick(idx), vecs)
		if err != nil {
			return nil, err
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

// ReleaseBatch implements boundary.Release: the releases of FLIP_LABEL on a protected table, grouped by
// ε and K.
func (f *FlipLabel) ReleaseBatch(ctx *sql.Context, in *boundary.Batch) ([]any, error) {
	c, b, units, what, rows := in.Collector, in.Budget, in.Units, in.What, in.Args
	const fn = "FLIP_LABEL"
	out := make([]any, len(rows))
	type group struct {
		krr   *mechanisms.KRR
		idx   []int
		ys    []int
		units []string
	}
	groups := map[[2]float64]*group{}
	var order []*group
	for i, a := range rows {
		if a[1] == nil || a[2] == nil {
			continue // NULL parameters: NULL out, nothing released
		}
		krr, err := f.randomiser(ctx, a[1], a[2])
		if err != nil {
			return nil, err
		}
		y := -1 // the default: a uniformly drawn label
		if v := a[0]; !boundary.IsDefault(v) {
			n, err := toInt(ctx, fn, "y", v)
			if err == nil && (n < 0 || n >= int64(krr.K())) {
				err = argError(fn, "y", v, "the label must be an integer in 0..K-1 (K = "+itoa(krr.K())+")")
			}
			switch {
			case err == nil:
				y = int(n)
			case !in.Strict:
				return nil, err
			}
		}
		key := [2]float64{krr.Epsilon(), float64(krr.K())}
		g := groups[key]
		if g == nil {
			g = &group{krr: krr}
			groups[key] = g
			order = append(order, g)
		}
		g.idx, g.ys, g.units = append(g.idx, i), append(g.ys, y), append(g.units, units[i])
	}
	for _, g := range order {
		released, err := c.ReleaseLabels(ctx, b, fn, g.krr, g.units, what.Pick(g.idx), g.ys)
		if err != nil {
			return nil, err
		}
		for k, i := range g.idx {
			out[i] = int64(released[k])
		}
	}
	return out, nil
}

// ReleaseBatch implements boundary.Release: it releases LDP_LAPLACE(x, eps, lo, hi): the input is x clipped to [lo, hi] (a NULL x, or an
// analyst's invalid one, is the midpoint).
func (f *LDPLaplace) ReleaseBatch(ctx *sql.Context, in *boundary.Batch) ([]any, error) {
	c, b, units, what, rows := in.Collector, in.Budget, in.Units, in.What, in.Args
	const fn = "LDP_LAPLACE"
	out := make([]any, len(rows))
	type group struct {
		key   *laplaceKey
		idx   []int
		xs    []float64
		units []string
	}
	groups := map[[3]float64]*group{}
	var order []*group
	for i, a := range rows {
		if a[1] == nil || a[2] == nil || a[3] == nil {
			continue // NULL parameters: NULL out, nothing released
		}
		key, err := f.params(ctx, a[1], a[2], a[3])
		if err != nil {
			return nil, err
		}
		x := (key.lo + key.hi) / 2 // the default input
		if v := a[0]; !boundary.IsDefault(v) {
			f, err := toFloat(ctx, fn, "x", v)
			if err == nil && (math.IsNaN(f) || math.IsInf(f, 0)) {
				err = argError(fn, "x", v, "the value must be a finite number")
			}
			switch {
			case err == nil:
				x = math.Min(math.Max(f, key.lo), key.hi)
			case !in.Strict:
				return nil, err
			}
		}
		k := [3]float64{key.eps, key.lo, key.hi}
		g := groups[k]
		if g == nil {
			g = &group{key: key}
			groups[k] = g
			order = append(order, g)
		}
		g.idx, g.xs, g.units = append(g.idx, i), append(g.xs, x), append(g.units, units[i])
	}
	for _, g := range order {
		w := what.Pick(g.idx)
		digests := w.Digests(len(g.xs), "laplace", "laplace", g.key.eps, 0, g.key.lo, g.key.hi)
		src := mechanisms.NewCryptoSource()
		rels, err := c.ReleaseKeyed(ctx, b, fn, "laplace", "laplace", g.key.eps, g.units, digests, w.Source != "", boundary.EachFresh(func(k int) ([]byte, error) {
			y, err := g.key.mech.AddNoiseScalar(g.xs[k], src)
			if err != nil {
				return nil, err
			}
			return binary.LittleEndian.AppendUint64(nil, math.Float64bits(y)), nil
		}))
		if err != nil {
			return nil, err
		}
		for k, i := range g.idx {
			if len(rels[k]) != 8 {
				return nil, fmt.Errorf("%s: memoised release of unit %s of %s has %d bytes, not 8", fn, g.units[k], b.TableRef, len(rels[k]))
			}
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(rels[k]))
		}
	}
	return out, nil
}

// releaseVectors releases one feature vector per row of protected table b through mech at eps (a nil
// row is the default input, the zero vector) through c, which reuses memoised releases of what (in
// memoise mode) and collects the charges of fresh ones.
func releaseVectors(ctx context.Context, c *boundary.Collector, b engine.Budget, fn string, mech *resolvedMechanism, randomiser string, eps float64,
	units []string, what boundary.What, rows [][]float32) ([][]float64, error) {
	if _, err := mech.randomiser(randomiser, eps); err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	for i, v := range rows {
		if v == nil {
			rows[i] = make([]float32, mech.desc.InputDim)
		}
	}
	digests := what.Digests(len(rows), mechanismID(mech), randomiser, eps, 0)
	rels, err := c.ReleaseKeyed(ctx, b, fn, mech.record.Name, randomiser, eps, units, digests, what.Source != "", func(fresh []int) ([][]byte, error) {
		in := make([][]float32, len(fresh))
		for k, i := range fresh {
			in[k] = rows[i]
		}
		released, err := mech.privatise(ctx, in, randomiser, eps)
		if err != nil {
			return nil, err
		}
		out := make([][]byte, len(released))
		for k, v := range released {
			out[k] = packFloat64s(v)
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	out := make([][]float64, len(rows))
	for i, rel := range rels {
		if out[i], err = unpackFloat64s(rel, mech.desc.OutputDim); err != nil {
			return nil, fmt.Errorf("%s: memoised release of unit %s of %s: %w", fn, units[i], b.TableRef, err)
		}
	}
	return out, nil
}

func packFloat64s(v []float64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
	}
	return b
}

func unpackFloat64s(b []byte, dim int) ([]float64, error) {
	if len(b) != 8*dim {
		return nil, fmt.Errorf("%d bytes, not %d values", len(b), dim)
	}
	v := make([]float64, dim)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v, nil
}
