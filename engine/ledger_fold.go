package engine

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"
)

// The fold of releases into ldp_budget_units.
//
// A transaction of charges only appends its releases to ldp_releases, the exact and durable record of
// every charge: updating every charged unit's row of ldp_budget_units in it cost as much as the rest
// of the transaction, and grew with the number of units. ldp_budget_units holds what the releases up
// to a watermark (budget_fold.folded_through, a release id) have spent; a fold adds the releases after
// it and moves the watermark, in one DuckDB transaction, so a crash leaves either both or neither.
// Folds run in the background (every foldInterval while releases wait), when the ledger opens and
// when it closes, all under the ledger's lock, so no charge commits during one.
//
// Every read of the units' spending (what a charge is checked against, Ledger.Spent, a DBA's SELECT of
// ldp_budget_units, an export of it) reads budgetUnitsSQL: the folded rows plus the releases after the
// watermark, in one snapshot, so it is exact whether or not a fold ran.

// foldInterval is how often the background fold runs while releases wait to be folded, unless
// LDPSQL_LEDGER_FOLD_INTERVAL (a Go duration) says otherwise: tests set it long to crash between a
// release and its fold, or short to crash in the middle of one.
func foldInterval() (time.Duration, error) {
	v := os.Getenv("LDPSQL_LEDGER_FOLD_INTERVAL")
	if v == "" {
		return time.Second, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("LDPSQL_LEDGER_FOLD_INTERVAL=%q: want a positive Go duration such as 1s or 200ms", v)
	}
	return d, nil
}

// budgetUnitsSQL is a query with ldp_budget_units' columns that says what every unit has spent as of
// its snapshot: the folded rows and the releases after the watermark. where, if not empty, restricts
// both (it names only db, table_name and unit_key). after is a watermark read before the query runs:
// the watermark only grows, so id > after prunes row groups of ldp_releases without changing the sum.
func budgetUnitsSQL(after int64, where string) string {
	w := ""
	if where != "" {
		w = " AND (" + where + ")"
	}
	return `SELECT db, table_name, unit_key, sum(spent) AS spent, sum(releases)::BIGINT AS releases,
		max(last_release_at) AS last_release_at FROM (
		SELECT db, table_name, unit_key, spent, releases, last_release_at FROM ` + CatalogSchema + `.ldp_budget_units WHERE true` + w + `
		UNION ALL
		SELECT db, table_name, unit_key, eps, 1, released_at FROM ` + CatalogSchema + `.ldp_releases
		WHERE id > ` + strconv.FormatInt(after, 10) + ` AND id > (SELECT folded_through FROM ` + CatalogSchema + `.budget_fold)` + w + `)
		GROUP BY db, table_name, unit_key`
}

// budgetUnitsTable says whether a table of database db is read through budgetUnitsSQL.
func budgetUnitsTable(db, table string) bool {
	return db == CatalogSchema && table == "ldp_budget_units"
}

// Fold counts the releases recorded since the last fold in ldp_budget_units (see the top of this file).
// Reads are exact without it; it keeps them and the next fold short.
func (l *Ledger) Fold() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errLedgerClosed
	}
	return l.foldLocked()
}

// Folds returns how many folds have committed since the ledger opened.
func (l *Ledger) Folds() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.folds
}

// foldLocked folds the releases after the watermark up to the last one committed. mu is held, so none
// commits meanwhile and the ids up to nextID-1 are all there are.
func (l *Ledger) foldLocked() error {
	from, to := l.folded.Load(), l.nextID-1
	if to <= from {
		return nil
	}
	if err := l.openConn(); err != nil {
		return err
	}
	ctx := context.Background()
	pending := fmt.Sprintf(`(SELECT db, table_name, unit_key, sum(eps) AS eps, count(*) AS n, max(released_at) AS at
		FROM %s.ldp_releases WHERE id > %d AND id <= %d GROUP BY db, table_name, unit_key) s`, CatalogSchema, from, to)
	match := "u.db = s.db AND u.table_name = s.table_name AND u.unit_key = s.unit_key"
	stmts := []string{
		"BEGIN TRANSACTION",
		fmt.Sprintf(`UPDATE %s.ldp_budget_units u SET spent = u.spent + s.eps, releases = u.releases + s.n,
			last_release_at = greatest(u.last_release_at, s.at) FROM %s WHERE %s`, CatalogSchema, pending, match),
		// ldp_budget_units has no primary key (DuckDB's index makes bulk upserts ten times slower): the
		// fold keeps one row per unit, adding a unit's row only when it has none.
		fmt.Sprintf(`INSERT INTO %s.ldp_budget_units SELECT s.db, s.table_name, s.unit_key, s.eps, s.n, s.at FROM %s
			WHERE NOT EXISTS (SELECT 1 FROM %s.ldp_budget_units u WHERE %s)`, CatalogSchema, pending, CatalogSchema, match),
		fmt.Sprintf(`UPDATE %s.budget_fold SET folded_through = %d`, CatalogSchema, to),
		"COMMIT",
	}
	for _, stmt := range stmts {
		if _, err := l.conn.ExecContext(ctx, stmt); err != nil {
			if _, rbErr := l.conn.ExecContext(ctx, "ROLLBACK"); rbErr != nil {
				l.resetConnLocked()
			}
			// A failed COMMIT may or may not be in the file: read the watermark again.
			var folded int64
			if qErr := l.db.QueryRowContext(ctx, `SELECT folded_through FROM `+CatalogSchema+`.budget_fold`).Scan(&folded); qErr == nil {
				l.folded.Store(folded)
			}
			return fmt.Errorf("ldp ledger: folding releases %d to %d into ldp_budget_units: %w", from+1, to, err)
		}
	}
	l.folded.Store(to)
	l.folds++
	return nil
}

// foldPeriodically folds every interval while releases wait, until the ledger closes. A fold that fails
// (a full disk) is tried again at the next tick; reads stay exact meanwhile.
func (l *Ledger) foldPeriodically(interval time.Duration) {
	defer close(l.foldStopped)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-l.stopFold:
			return
		case <-t.C:
			_ = l.Fold()
		}
	}
}

// tableWhere restricts budgetUnitsSQL to table t's units.
func tableWhere(t TableRef) string {
	return "db = " + quoteString(t.Database) + " AND table_name = " + quoteString(t.Table)
}
