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
	switch {
	case strings.TrimSpace(batch) == "" || len(batch) > 512:
		return nil, fmt.Errorf("%s: batch id %q: want 1 to 512 characters naming the batch (the same on a retry)", fn, batch)
	case !(epsX >= mechanisms.MinEpsilon && epsX <= mechanisms.MaxEpsilon):
		return nil, fmt.Errorf("%s: eps_x %v is not a release ε (%g to %g)", fn, epsX, mechanisms.MinEpsilon, mechanisms.MaxEpsilon)
	case !(epsY == 0 || epsY >= mechanisms.MinEpsilon && epsY <= mechanisms.MaxEpsilon):
		return nil, fmt.Errorf("%s: eps_y %v: want 0 (no label) or a release ε (%g to %g)", fn, epsY, mechanisms.MinEpsilon, mechanisms.MaxEpsilon)
	}
	var units []string
	if err := json.Unmarshal([]byte(unitsJSON), &units); err != nil {
		return nil, fmt.Errorf("%s: the units: want a JSON array of unit keys (strings), one per released row: %w", fn, err)
	}
	if len(units) > maxExternalReleases {
		return nil, fmt.Errorf("%s: %d releases in one call; charge at most %d at once", fn, len(units), maxExternalReleases)
	}
	unitTypes, err := unitColumnTypes(ctx, t, b.UnitColumns)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	// Keys are folded as the unit columns' collation compares them (engine.FoldUnitKey), so a job that
	// sends 'ALICE' charges the unit SQL's releases of 'alice' charge; the answer names each key as sent.
	var order, sent []string
	count, sentCount := map[string]int{}, map[string]int{}
	folded := map[string]string{}
	for i, u := range units {
		if u == "" {
			return nil, fmt.Errorf("%s: unit %d of the array is empty, which names no unit", fn, i+1)
		}
		if _, ok := folded[u]; !ok {
			f, err := engine.FoldUnitKey(unitTypes, u)
			if err != nil {
				return nil, fmt.Errorf("%s: unit %d of the array (%.40q): %w", fn, i+1, u, err)
			}
			folded[u] = f
			sent = append(sent, u)
		}
		f := folded[u]
		if count[f] == 0 {
			order = append(order, f)
		}
		count[f]++
		sentCount[u]++
	}

	externalChargeMu.Lock()
	defer externalChargeMu.Unlock()
	status := make(map[string]string, len(order))
	keys := make([]engine.MemoKey, len(order))
	recordDigest := engine.ReleaseDigest(fn, batch, "", "", 0, 0)
	for i, u := range order {
		keys[i] = engine.MemoKey{Unit: u, Digest: recordDigest}
	}
	recorded, err := p.e.Ledger.Memo(ctx, b.TableRef, keys)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	var todo []string
	for _, u := range order {
		raw, seen := recorded[engine.MemoKey{Unit: u, Digest: recordDigest}]
		switch {
		case !seen:
			todo = append(todo, u)
		case string(raw) == string(recordOf(count[u], epsX, epsY)):
			status[u] = ExternalAlreadyCharged
		default:
			status[u] = ExternalRefused // the batch id is reused for other releases
		}
	}
	spent, err := p.e.Ledger.Spent(ctx, b.TableRef, todo)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	var admitted []string
	for _, u := range todo {
		if spent[u]+float64(count[u])*(epsX+epsY) > b.EpsTotal+1e-9 {
			status[u] = ExternalRefused
		} else {
			admitted = append(admitted, u)
		}
	}
	chargesOf := func(u string) []engine.Charge {
		out := make([]engine.Charge, 0, 2*count[u])
		for i := range count[u] {
			c := engine.Charge{Table: b.TableRef, Unit: u, Eps: epsX, Function: fn, Mechanism: "external", Randomiser: "external",
				Digest: engine.ReleaseDigest(fn, batch, fmt.Sprintf("%d x", i), "", epsX, 0)}
			if i == 0 {
				c.Digest, c.Release = recordDigest, recordOf(count[u], epsX, epsY)
			}
			out = append(out, c)
			if epsY > 0 {
				out = append(out, engine.Charge{Table: b.TableRef, Unit: u, Eps: epsY, Function: fn, Mechanism: "external", Randomiser: "external",
					Digest: engine.ReleaseDigest(fn, batch, fmt.Sprintf("%d y", i), "", epsY, 0)})
			}
		}
		return out
	}
	var all []engine.Charge
	for _, u := range admitted {
		all = append(all, chargesOf(u)...)
	}
	err = p.e.Ledger.Charge(ctx, user(ctx), all)
	var over *engine.BudgetError
	switch {
	case err == nil:
		for _, u := range admitted {
			status[u] = ExternalCharged
		}
	case errors.As(err, &over):
		// Another statement charged some of these units since Spent read them: charge each unit on
		// its own, concurrently, so that the ledger's group commit takes them in a few transactions
		// and refuses only the units that would go over.
		errs := make([]error, len(admitted))
		var wg sync.WaitGroup
		for i, u := range admitted {
			wg.Go(func() { errs[i] = p.e.Ledger.Charge(ctx, user(ctx), chargesOf(u)) })
		}
		wg.Wait()
		for i, u := range admitted {
			switch {
			case errs[i] == nil:
				status[u] = ExternalCharged
			case errors.As(errs[i], &over):
				status[u] = ExternalRefused
			default:
				return nil, fmt.Errorf("%s: unit %s: %w (units reported charged before it stay charged)", fn, u, errs[i])
			}
		}
	default:
		return nil, fmt.Errorf("%s: %w (nothing of this call was charged)", fn, err)
	}
	rows := make([]sql.Row, len(sent))
	for i, u := range sent {
		rows[i] = sql.Row{u, int64(sentCount[u]), status[folded[u]]}
	}
	n := map[string]int{}
	for _, u := range order {
		n[status[u]]++
	}
	p.log("%s: %s batch %q by %s: %d units charged, %d already charged, %d refused", fn, b.TableRef, batch, user(ctx),
		n[ExternalCharged], n[ExternalAlreadyCharged], n[ExternalRefused])
	return sql.RowsToRowIter(rows...), nil
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
