package engine

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/analyzer"
	"github.com/dolthub/go-mysql-server/sql/plan"
	"github.com/dolthub/go-mysql-server/sql/transform"
	ast "github.com/dolthub/vitess/go/vt/sqlparser"
)

// An honest ROLLBACK without multi-statement transactions.
//
// Every statement commits on its own, so ROLLBACK can undo nothing. It succeeds, doing nothing, when the
// session has written nothing since its last COMMIT, BEGIN, ROLLBACK or its start: there is then truly
// nothing to undo, as for the ROLLBACK that SQLAlchemy, pandas and connection pools send after reads or
// after a commit. After a write it fails, so that no client believes a write was undone. Anything not
// read-only counts as a write, also a statement that then fails (the rule runs before it does), and
// every CALL of ldpsql's procedures (none is marked read-only). The refusal quotes the first such
// statement. SET autocommit = 0 changes nothing here (it is read-only, and every statement still
// commits), and ROLLBACK TO SAVEPOINT follows the same rule.
// Embedded sessions, which all have id 0 and no end that ldpsql sees, never roll back.
//
// GMS analyses COMMIT and BEGIN with no rules at all, and simple INSERT … VALUES, UPDATE and DELETE with
// only AlwaysBeforeDefault, so the writes are marked by a rule there and COMMIT and BEGIN are seen by the
// parser (forgetWrites, called by statementLimits' parser).
//
// The same rule accepts ALTER TABLE … DISABLE/ENABLE KEYS, which mysqldump writes, as the no-op it is in
// MySQL for tables without non-unique indexes.

// ruleTransactions is the analyzer rule id of transactions, far from GMS's own ids.
const ruleTransactions analyzer.RuleId = 100_000

func init() {
	analyzer.AlwaysBeforeDefault = append(analyzer.AlwaysBeforeDefault, analyzer.Rule{Id: ruleTransactions, Apply: transactions})
}

// errNoRollback explains why ROLLBACK fails rather than silently keeping the changes, naming the first
// statement that wrote since the session's last COMMIT, BEGIN or ROLLBACK.
func errNoRollback(first string) error {
	return fmt.Errorf("ROLLBACK is not supported after a write: ldpsql commits every statement on its own when it completes, and this session has written since its last COMMIT, BEGIN or ROLLBACK (first: %s), so there would be something to undo (multi-statement transactions are not implemented yet)", first)
}

// errNoEmbeddedRollback is errNoRollback for in-process sessions, which cannot tell whether they wrote.
var errNoEmbeddedRollback = errors.New("ROLLBACK is not supported in an in-process session: ldpsql commits every statement on its own when it completes, and in-process sessions (all of id 0) cannot tell whether they wrote since their last COMMIT, BEGIN or ROLLBACK (multi-statement transactions are not implemented yet)")

// maxWriteQuoted is how much of the first writing statement errNoRollback quotes.
const maxWriteQuoted = 120

// describeWrite is the statement ctx runs, on one line and cut to maxWriteQuoted bytes, for
// errNoRollback (the session's own text, returned only to that session).
func describeWrite(ctx *sql.Context) string {
	q := ctx.Query() // in a multi-statement batch, this statement and those after it
	if len(q) > 8*maxWriteQuoted {
		q = strings.ToValidUTF8(q[:8*maxWriteQuoted], "") // enough to quote; a many-row INSERT is not tokenised whole
	}
	if first, _, err := ast.SplitStatement(q); err == nil {
		q = first
	}
	q = strings.Join(strings.Fields(q), " ")
	if q == "" {
		return "a statement that is not read-only"
	}
	if len(q) > maxWriteQuoted {
		cut := maxWriteQuoted
		for cut > 0 && !utf8.RuneStart(q[cut]) {
			cut--
		}
		q = q[:cut] + "…"
	}
	return q
}

func transactions(ctx *sql.Context, a *analyzer.Analyzer, n sql.Node, _ *plan.Scope, _ analyzer.RuleSelector, _ *sql.QueryFlags) (sql.Node, transform.TreeIdentity, error) {
	p, ok := a.Catalog.DbProvider.(*Provider)
	if !ok {
		return n, transform.SameTree, nil
	}
	id := ctx.Session.ID()
	switch x := n.(type) {
	case *plan.Rollback, *plan.RollbackSavepoint:
		if id == 0 {
			return nil, transform.SameTree, errNoEmbeddedRollback
		}
		if first, wrote := p.wrote.Load(id); wrote {
			s, _ := first.(string)
			return nil, transform.SameTree, errNoRollback(s)
		}
		return plan.NothingImpl, transform.NewTree, nil
	case *plan.AlterIndex:
		if x.Action == plan.IndexAction_DisableEnableKeys {
			return plan.NothingImpl, transform.NewTree, nil
		}
	}
	if !n.IsReadOnly() {
		if _, wrote := p.wrote.Load(id); !wrote {
			p.wrote.Store(id, describeWrite(ctx)) // the first write's text, for errNoRollback
		}
	}
	return n, transform.SameTree, nil
}

// forgetWrites clears the session's mark when its statement is a COMMIT or a BEGIN.
func (p *Provider) forgetWrites(ctx any, stmt ast.Statement) {
	sctx, ok := ctx.(*sql.Context)
	if !ok || sctx.Session == nil {
		return
	}
	switch stmt.(type) {
	case *ast.Commit, *ast.Begin:
		p.wrote.Delete(sctx.Session.ID())
	}
}

// forgetSession drops what transactions knows of a closed connection.
func (e *Engine) forgetSession(id uint32) { e.Provider.wrote.Delete(id) }
