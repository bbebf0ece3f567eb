package udf

import (
	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"

	"github.com/ldpsql/ldpsql/engine"
)

// LDPUnitKey is LDP_UNIT_KEY(c1, …, cn): the key by which the privacy ledger names the unit whose unit
// columns hold these values (engine.UnitKey: one value as text, several as a JSON array of texts; a
// string as its collation folds it, a decimal, time or BLOB in one canonical spelling). It is how a
// program that releases a protected table's rows outside the server (ldpsql etl) names their units to
// ldp_charge_external exactly as the server's own releases name them, whatever the columns' types. NULL
// when a value is NULL: such a row names no unit.
//
// It releases nothing: on a protected table an analyst may apply it to the unit columns, which they may
// read anyway (package boundary), and to nothing else.
type LDPUnitKey struct{ scalar }

var _ sql.FunctionExpression = (*LDPUnitKey)(nil)

// NewLDPUnitKey builds LDP_UNIT_KEY(c1, …, cn).
func NewLDPUnitKey(_ *sql.Context, args ...sql.Expression) (sql.Expression, error) {
	if len(args) == 0 {
		return nil, arityError("ldp_unit_key", "at least 1", 0)
	}
	return &LDPUnitKey{scalar{name: "ldp_unit_key", args: args}}, nil
}

func (f *LDPUnitKey) Description() string {
	return "the privacy ledger's key of the unit whose unit columns hold these values"
}
func (f *LDPUnitKey) Type(*sql.Context) sql.Type { return types.LongText }
func (f *LDPUnitKey) IsNonDeterministic() bool   { return false }
func (f *LDPUnitKey) WithChildren(ctx *sql.Context, c ...sql.Expression) (sql.Expression, error) {
	return NewLDPUnitKey(ctx, c...)
}

// Eval implements sql.Expression.
func (f *LDPUnitKey) Eval(ctx *sql.Context, row sql.Row) (any, error) {
	vals, err := evalArgs(ctx, row, f.args)
	if err != nil || hasNull(vals) {
		return nil, err
	}
	ts := make([]sql.Type, len(f.args))
	for i, a := range f.args {
		ts[i] = a.Type(ctx)
	}
	return engine.UnitKey(ts, vals...)
}
