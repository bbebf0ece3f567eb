package udf

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/udf/boundary"
)

// CALL ldp_charge_external('table', 'batch-id', eps_x, eps_y, '["unit", …]') charges releases made
// outside the server (the Beam job of `ldpsql etl privatize --from-db`, which reads a protected table's
// raw rows as a DBA and releases them on its workers) to the ledger, before the job makes any of them
// final. Each element of the array is one released row of that unit (a unit named three times made
// three releases): each is charged eps_x for its features and, when eps_y > 0, eps_y for its label. A
// row per unit says what became of it:
//
//   - 'charged': every release of the unit in this batch was charged;
//   - 'already charged': this batch id charged this unit before, for the same releases at the same ε
//     (a retried batch: a job that crashed and is rerun charges each unit once per release);
//   - 'refused': the charges would take the unit over its budget, or this batch id charged it before
//     for other releases or another ε; nothing was charged and the job must leave its releases out.
//
// A unit is all or nothing; units are independent of each other. Only a DBA may call it: one who can
// read the raw rows anyway, and whom the ledger trusts to call it for every release it makes (an
// analyst is refused, even with EXECUTE granted on it).
//
// Idempotency rides on the ledger's memo: the first charge of a unit in a batch records, under the
// digest of ("ldp_charge_external", batch id), the releases and ε it charged; a later call with the
// same batch id finds that record (Ledger.Memo, in either budget mode) and charges nothing. The digest
// is of the batch id, never of released values, and no SQL release can share it. Calls are serialised
// (externalChargeMu) so that two concurrent retries of one batch cannot both charge.

const externalChargeFn = "ldp_charge_external"

// externalChargeMu serialises the look-up and the charge of ldp_charge_external calls.
var externalChargeMu sync.Mutex

// maxExternalReleases bounds one call's array (a job charges in batches of thousands).
const maxExternalReleases = 1_000_000

// externalRecord is what the first charge of a unit in a batch records as its memoised release.
type externalRecord struct {
	Releases int     `json:"releases"`
	EpsX     float64 `json:"eps_x"`
	EpsY     float64 `json:"eps_y"`
}

// Statuses of a unit in ldp_charge_external's result.
const (
	ExternalCharged        = "charged"
	ExternalAlreadyCharged = "already charged"
	ExternalRefused        = "refused"
)

func (p *procedures) externalChargeDetails() []sql.ExternalStoredProcedureDetails {
	return []sql.ExternalStoredProcedureDetails{{Name: externalChargeFn, Schema: sql.Schema{
		{Name: "unit_key", Type: types.LongText},
		{Name: "releases", Type: types.Int64},
		{Name: "status", Type: types.LongText},
	}, AdminOnly: true, Function: p.chargeExternal}}
}

func (p *procedures) chargeExternal(ctx *sql.Context, table, batch string, epsX, epsY float64, unitsJSON string) (sql.RowIter, error) {
	const fn = externalChargeFn
	if !boundary.IsDBA(ctx, p.e.GMS.Analyzer) {
		return nil, fmt.Errorf("%s: access denied: only a DBA may charge releases made outside the server", fn)
	}
	t, ref, err := p.resolveTable(ctx, fn, table)
	if err != nil {
		return nil, err
	}
	b, ok := p.e.Ledger.Budget(ref)
	if !ok {
		return nil, fmt.Errorf("%s: table %s has no privacy budget: there is nothing to charge", fn, ref)
	}
	if err := checkExternalBatch(batch, epsX, epsY); err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	units, err := readExternalUnits(ctx, t, b.UnitColumns, unitsJSON)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	c := externalCharge{p: p, ctx: ctx, b: b, batch: batch, epsX: epsX, epsY: epsY, units: units,
		status: make(map[string]string, len(units.order)), recordDigest: engine.ReleaseDigest(fn, batch, "", "", 0, 0)}

	externalChargeMu.Lock()
	defer externalChargeMu.Unlock()
	todo, err := c.retried()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	admitted, err := c.withinBudget(todo)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	if err := c.charge(admitted); err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	rows := make([]sql.Row, len(units.sent))
	for i, u := range units.sent {
		rows[i] = sql.Row{u, int64(units.sentCount[u]), c.status[units.folded[u]]}
	}
	n := map[string]int{}
	for _, u := range units.order {
		n[c.status[u]]++
	}
	p.log("%s: %s batch %q by %s: %d units charged, %d already charged, %d refused", fn, b.TableRef, batch, user(ctx),
		n[ExternalCharged], n[ExternalAlreadyCharged], n[ExternalRefused])
	return sql.RowsToRowIter(rows...), nil
}

// checkExternalBatch checks ldp_charge_external's batch id and ε.
func checkExternalBatch(batch string, epsX, epsY float64) error {
	switch {
	case strings.TrimSpace(batch) == "" || len(batch) > 512:
		return fmt.Errorf("batch id %q: want 1 to 512 characters naming the batch (the same on a retry)", batch)
	case !(epsX >= mechanisms.MinEpsilon && epsX <= mechanisms.MaxEpsilon):
		return fmt.Errorf("eps_x %v is not a release ε (%g to %g)", epsX, mechanisms.MinEpsilon, mechanisms.MaxEpsilon)
	case !(epsY == 0 || epsY >= mechanisms.MinEpsilon && epsY <= mechanisms.MaxEpsilon):
		return fmt.Errorf("eps_y %v: want 0 (no label) or a release ε (%g to %g)", epsY, mechanisms.MinEpsilon, mechanisms.MaxEpsilon)
	}
	return nil
}

// externalUnits are the units of one ldp_charge_external call. Keys are folded as the unit columns'
// collation compares them (engine.FoldUnitKey), so a job that sends 'ALICE' charges the unit SQL's
// releases of 'alice' charge; the answer names each key as sent.
type externalUnits struct {
	order     []string          // the folded units, in the order of their first release
	count     map[string]int    // releases per folded unit
	sent      []string          // the keys as sent, each once, in the order of their first release
	sentCount map[string]int    // releases per key as sent
	folded    map[string]string // a key as sent → its folded unit
}

// readExternalUnits parses the call's JSON array of unit keys, one per released row, and folds them.
func readExternalUnits(ctx *sql.Context, t sql.Table, unitColumns []string, unitsJSON string) (externalUnits, error) {
	var keys []string
	if err := json.Unmarshal([]byte(unitsJSON), &keys); err != nil {
		return externalUnits{}, fmt.Errorf("the units: want a JSON array of unit keys (strings), one per released row: %w", err)
	}
	if len(keys) > maxExternalReleases {
		return externalUnits{}, fmt.Errorf("%d releases in one call; charge at most %d at once", len(keys), maxExternalReleases)
	}
	unitTypes, err := unitColumnTypes(ctx, t, unitColumns)
	if err != nil {
		return externalUnits{}, err
	}
	u := externalUnits{count: map[string]int{}, sentCount: map[string]int{}, folded: map[string]string{}}
	for i, key := range keys {
		if key == "" {
			return externalUnits{}, fmt.Errorf("unit %d of the array is empty, which names no unit", i+1)
		}
		if _, ok := u.folded[key]; !ok {
			f, err := engine.FoldUnitKey(unitTypes, key)
			if err != nil {
				return externalUnits{}, fmt.Errorf("unit %d of the array (%.40q): %w", i+1, key, err)
			}
			u.folded[key] = f
			u.sent = append(u.sent, key)
		}
		f := u.folded[key]
		if u.count[f] == 0 {
			u.order = append(u.order, f)
		}
		u.count[f]++
		u.sentCount[key]++
	}
	return u, nil
}

// externalCharge is one ldp_charge_external call past its argument checks, run under externalChargeMu;
// status collects each folded unit's outcome.
type externalCharge struct {
	p            *procedures
	ctx          *sql.Context
	b            engine.Budget
	batch        string
	epsX, epsY   float64
	units        externalUnits
	status       map[string]string
	recordDigest string // the memo digest of ("ldp_charge_external", batch id)
}

// retried settles the units this batch id charged before: 'already charged' for the same releases at the
// same ε, 'refused' for others. It returns the units it has not charged yet.
func (c *externalCharge) retried() ([]string, error) {
	keys := make([]engine.MemoKey, len(c.units.order))
	for i, u := range c.units.order {
		keys[i] = engine.MemoKey{Unit: u, Digest: c.recordDigest}
	}
	recorded, err := c.p.e.Ledger.Memo(c.ctx, c.b.TableRef, keys)
	if err != nil {
		return nil, err
	}
	var todo []string
	for _, u := range c.units.order {
		raw, seen := recorded[engine.MemoKey{Unit: u, Digest: c.recordDigest}]
		switch {
		case !seen:
			todo = append(todo, u)
		case string(raw) == string(recordOf(c.units.count[u], c.epsX, c.epsY)):
			c.status[u] = ExternalAlreadyCharged
		default:
			c.status[u] = ExternalRefused // the batch id is reused for other releases
		}
	}
	return todo, nil
}

// withinBudget refuses the units whose charges would take them over the budget, as the ledger reads now,
// and returns the others.
func (c *externalCharge) withinBudget(todo []string) ([]string, error) {
	spent, err := c.p.e.Ledger.Spent(c.ctx, c.b.TableRef, todo)
	if err != nil {
		return nil, err
	}
	var admitted []string
	for _, u := range todo {
		if spent[u]+float64(c.units.count[u])*(c.epsX+c.epsY) > c.b.EpsTotal+1e-9 {
			c.status[u] = ExternalRefused
		} else {
			admitted = append(admitted, u)
		}
	}
	return admitted, nil
}

// chargesOf are a unit's charges: eps_x per release and eps_y per labelled release, the first carrying
// the batch's memo record.
func (c *externalCharge) chargesOf(u string) []engine.Charge {
	const fn = externalChargeFn
	out := make([]engine.Charge, 0, 2*c.units.count[u])
	for i := range c.units.count[u] {
		x := engine.Charge{Table: c.b.TableRef, Unit: u, Eps: c.epsX, Function: fn, Mechanism: "external", Randomiser: "external",
			Digest: engine.ReleaseDigest(fn, c.batch, fmt.Sprintf("%d x", i), "", c.epsX, 0)}
		if i == 0 {
			x.Digest, x.Release = c.recordDigest, recordOf(c.units.count[u], c.epsX, c.epsY)
		}
		out = append(out, x)
		if c.epsY > 0 {
			out = append(out, engine.Charge{Table: c.b.TableRef, Unit: u, Eps: c.epsY, Function: fn, Mechanism: "external", Randomiser: "external",
				Digest: engine.ReleaseDigest(fn, c.batch, fmt.Sprintf("%d y", i), "", c.epsY, 0)})
		}
	}
	return out
}

// charge charges the admitted units together. When another statement charged some of them since
// withinBudget read the ledger, it charges each unit on its own, concurrently, so that the ledger's
// group commit takes them in a few transactions and refuses only the units that would go over.
func (c *externalCharge) charge(admitted []string) error {
	var all []engine.Charge
	for _, u := range admitted {
		all = append(all, c.chargesOf(u)...)
	}
	err := c.p.e.Ledger.Charge(c.ctx, user(c.ctx), all)
	var over *engine.BudgetError
	switch {
	case err == nil:
		for _, u := range admitted {
			c.status[u] = ExternalCharged
		}
		return nil
	case !errors.As(err, &over):
		return fmt.Errorf("%w (nothing of this call was charged)", err)
	}
	errs := make([]error, len(admitted))
	var wg sync.WaitGroup
	for i, u := range admitted {
		wg.Go(func() { errs[i] = c.p.e.Ledger.Charge(c.ctx, user(c.ctx), c.chargesOf(u)) })
	}
	wg.Wait()
	for i, u := range admitted {
		switch {
		case errs[i] == nil:
			c.status[u] = ExternalCharged
		case errors.As(errs[i], &over):
			c.status[u] = ExternalRefused
		default:
			return fmt.Errorf("unit %s: %w (units reported charged before it stay charged)", u, errs[i])
		}
	}
	return nil
}

// recordOf is the memoised record of a unit's charges in a batch: a retry must ask for exactly these.
func recordOf(releases int, epsX, epsY float64) []byte {
	raw, _ := json.Marshal(externalRecord{Releases: releases, EpsX: epsX, EpsY: epsY})
	return raw
}

// unitColumnTypes are the types of t's unit columns, in the budget's order, for engine.FoldUnitKey.
func unitColumnTypes(ctx *sql.Context, t sql.Table, cols []string) ([]sql.Type, error) {
	schema := t.Schema(ctx)
	out := make([]sql.Type, len(cols))
	for i, c := range cols {
		at := schema.IndexOfColName(c)
		if at < 0 {
			return nil, fmt.Errorf("unit column %s is not a column of %s", c, t.Name())
		}
		out[i] = schema[at].Type
	}
	return out, nil
}
