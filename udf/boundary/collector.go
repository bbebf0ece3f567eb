package boundary

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"

	"github.com/dolthub/go-mysql-server/sql"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/mechanisms"
)

// Collector gathers one statement's releases until they are charged together. Safe for concurrent use.
//
// Go code that releases a protected table's data outside the SQL functions (ldp_privatize, for
// example) uses one too:
//
//	b, protected := l.Budget(engine.TableRef{Database: db, Table: table})
//	c := boundary.NewCollector(l, engine.SessionUser(ctx))
//	what := boundary.What{Source: boundary.ColumnSource("y"), Rows: rowKeys}                    // what is released, never its value
//	bits, err := c.ReleaseLabels(ctx, b, "TRAIN_NOISY_CLASSIFIER", krr2, units, what, correct) // k-RR, K = 2; memoised in memoise mode
//	...                                                                                          // nothing derived from bits leaves yet
//	err = c.Commit(ctx)                                                                          // a *engine.BudgetError: return nothing
//
// with units from engine.UnitKey(types of b.UnitColumns, their values...) and, where the unit columns do
// not include the primary key, rowKeys from engine.UnitKey(the primary key's types, its values...).
type Collector struct {
	ledger *engine.Ledger
	by     string

	mu      sync.Mutex
	charges []engine.Charge
	memo    map[memoID][]byte              // releases this statement made or found recorded in memoise mode, reused within it
	queues  map[*ledgerAggregate]*aggQueue // the aggregates' releases not yet made (aggregate.go)
}

type memoID struct {
	table        string
	unit, digest string
}

type collectorKey struct{}

// NewCollector returns an empty collector whose charges are made by user by.
func NewCollector(l *engine.Ledger, by string) *Collector {
	return &Collector{ledger: l, by: by, memo: map[memoID][]byte{}}
}

func collectorFrom(ctx *sql.Context) *Collector {
	c, _ := ctx.Value(collectorKey{}).(*Collector)
	return c
}

// InGate reports whether ctx is a statement's below its ledger gate, whose releases are charged together.
func InGate(ctx *sql.Context) bool { return collectorFrom(ctx) != nil }

// Commit charges everything collected, in one ledger transaction.
func (c *Collector) Commit(ctx context.Context) error {
	c.mu.Lock()
	charges := c.charges
	c.charges = nil
	c.mu.Unlock()
	return c.ledger.Charge(ctx, c.by, charges)
}

// commitOrDefer is Commit, unless the statement's rows commit with their charges (a CREATE TABLE … AS
// SELECT or INSERT … SELECT: engine/ledger_tx.go), whose write then takes them; they are checked
// against the budgets now.
func (c *Collector) commitOrDefer(ctx context.Context, stmt context.Context) error {
	c.mu.Lock()
	charges := c.charges
	c.mu.Unlock()
	if len(charges) > 0 {
		if deferred, err := c.ledger.Defer(stmt, c.by, charges); deferred {
			c.mu.Lock()
			c.charges = nil
			c.mu.Unlock()
			return err
		}
	}
	return c.Commit(ctx)
}

// Take returns the charges collected, leaving none.
func (c *Collector) Take() []engine.Charge {
	c.mu.Lock()
	defer c.mu.Unlock()
	charges := c.charges
	c.charges = nil
	return charges
}

// mechanismID identifies a mechanism in memo keys: a mechanism registered again (another binary or
// model under the same name) does not return the releases of the old one.
// mode.
func (c *Collector) lookup(ctx context.Context, b engine.Budget, units, digests []string) (map[int][]byte, error) {
	hits := map[int][]byte{}
	tk := strings.ToLower(b.TableRef.String())
	var ask []engine.MemoKey
	var askAt []int
	c.mu.Lock()
	for i := range units {
		if rel, ok := c.memo[memoID{tk, units[i], digests[i]}]; ok {
			hits[i] = rel
			continue
		}
		ask, askAt = append(ask, engine.MemoKey{Unit: units[i], Digest: digests[i]}), append(askAt, i)
	}
	c.mu.Unlock()
	if len(ask) == 0 {
		return hits, nil
	}
	found, err := c.ledger.Memo(ctx, b.TableRef, ask)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, key := range ask {
		if rel, ok := found[key]; ok {
			hits[askAt[k]] = rel
			// Kept for the statement: the analyst aggregates look their releases up twice, to check the
			// budget before evaluating anything and to release (aggregate.go), and ask the ledger once.
			c.memo[memoID{tk, key.Unit, key.Digest}] = rel
		}
	}
	return hits, nil
}

// record adds fresh releases to the statement's charges (and, in memoise mode, those it may return
// again to its memo).
func (c *Collector) record(b engine.Budget, charges []engine.Charge) {
	tk := strings.ToLower(b.TableRef.String())
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range charges {
		if b.Mode == engine.BudgetMemoise && ch.Release != nil {
			c.memo[memoID{tk, ch.Unit, ch.Digest}] = ch.Release
		}
	}
	c.charges = append(c.charges, charges...)
}

// ReleaseLabels releases one label per row of protected table b by k-RR (a negative label is the
// default: a label drawn uniformly from 0..K-1), reusing memoised releases of what (in memoise mode)
// and collecting the charges of fresh ones.
func (c *Collector) ReleaseLabels(ctx context.Context, b engine.Budget, fn string, krr *mechanisms.KRR, units []string, what What, ys []int) ([]int, error) {
	digests := what.Digests(len(ys), "k-rr", "k-rr", krr.Epsilon(), krr.K())
	src := mechanisms.NewCryptoSource()
	rels, err := c.ReleaseKeyed(ctx, b, fn, "k-rr", "k-rr", krr.Epsilon(), units, digests, what.Source != "", EachFresh(func(i int) ([]byte, error) {
		var out int
		if ys[i] < 0 {
			out = mechanisms.IntN(src, krr.K())
		} else {
			var err error
			if out, err = krr.Randomise(ys[i], src); err != nil {
				return nil, err
			}
		}
		return binary.LittleEndian.AppendUint64(nil, uint64(int64(out))), nil
	}))
	if err != nil {
		return nil, err
	}
	out := make([]int, len(ys))
	for i, rel := range rels {
		if len(rel) != 8 {
			return nil, fmt.Errorf("%s: memoised release of unit %s of %s has %d bytes, not 8", fn, units[i], b.TableRef, len(rel))
		}
		out[i] = int(int64(binary.LittleEndian.Uint64(rel)))
	}
	return out, nil
}

// EachFresh makes a draw function for releaseKeyed from one that draws the release at position i.
func EachFresh(draw func(i int) ([]byte, error)) func(fresh []int) ([][]byte, error) {
	return func(fresh []int) ([][]byte, error) {
		out := make([][]byte, len(fresh))
		for k, i := range fresh {
			rel, err := draw(i)
			if err != nil {
				return nil, err
			}
			out[k] = rel
		}
		return out, nil
	}
}

// ReleaseKeyed releases one value per row of protected table b. Where the releases are memoisable (their
// digests name what is released: see What) and the table is in memoise mode, a release whose unit
// and digest were released before (in this statement or in the ledger) is returned as recorded, a
// repeated one within the call is made once, and the others are drawn fresh; otherwise every release
// is drawn fresh. draw(fresh) makes the releases at positions fresh; their charges (eps, mechanism and
// randomiser as given) are collected, with their bytes where they are memoisable (so that memoise mode
// returns them later, also after a switch from charge mode) and without otherwise.
//
// Whether a release is looked up, and what it is looked up under, never depends on the released value:
// the digests name the column and the row, not the value in it.
func (c *Collector) ReleaseKeyed(ctx context.Context, b engine.Budget, fn, mechanism, randomiser string, eps float64, units, digests []string, memoisable bool,
	draw func(fresh []int) ([][]byte, error)) ([][]byte, error) {
	hits, fresh, dups, err := c.split(ctx, b, units, digests, memoisable)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	out := make([][]byte, len(units))
	for i, rel := range hits {
		out[i] = rel
	}
	if len(fresh) > 0 {
		rels, err := draw(fresh)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fn, err)
		}
		if len(rels) != len(fresh) {
			return nil, fmt.Errorf("%s: %d releases for %d inputs", fn, len(rels), len(fresh))
		}
		charges := make([]engine.Charge, len(fresh))
		for k, i := range fresh {
			out[i] = rels[k]
			charges[k] = engine.Charge{Table: b.TableRef, Unit: units[i], Eps: eps, Function: fn, Mechanism: mechanism,
				Randomiser: randomiser, Digest: digests[i], Release: rels[k]}
			if !memoisable {
				charges[k].Release = nil
			}
		}
		c.record(b, charges)
	}
	for _, d := range dups {
		out[d[0]] = out[d[1]]
	}
	return out, nil
}

// split sorts releases keyed by units and digests into the memoised ones (hits: position → the recorded
// release; only where they are memoisable and b is in memoise mode), the fresh ones to draw, and the
// repeats within the call of a fresh one (dups: {position, position of the first}).
func (c *Collector) split(ctx context.Context, b engine.Budget, units, digests []string, memoisable bool) (hits map[int][]byte, fresh []int, dups [][2]int, err error) {
	memoise := memoisable && b.Mode == engine.BudgetMemoise
	hits = map[int][]byte{}
	if memoise {
		if hits, err = c.lookup(ctx, b, units, digests); err != nil {
			return nil, nil, nil, err
		}
	}
	first := map[[2]string]int{}
	for i := range units {
		if _, hit := hits[i]; hit {
			continue
		}
		if memoise {
			k := [2]string{units[i], digests[i]}
			if j, ok := first[k]; ok {
				dups = append(dups, [2]int{i, j})
				continue
			}
			first[k] = i
		}
		fresh = append(fresh, i)
	}
	return hits, fresh, dups, nil
}

// check refuses (with the ledger's *BudgetError) releases whose charges, with those the statement has
// collected so far, would take a unit over its budget now; it charges nothing (engine.Ledger.Check).
func (c *Collector) check(charges []engine.Charge) error {
	c.mu.Lock()
	all := append(append([]engine.Charge{}, c.charges...), charges...)
	c.mu.Unlock()
	return c.ledger.Check(all)
}

// ColumnSource is What.Source for releases of the protected row's column name: LDP_ENCODE,
// FLIP_LABEL, the aggregates and ldp_privatize key a column's releases alike, so they share them.
func ColumnSource(name string) string { return columnsSource(columnCanon(name)) }
