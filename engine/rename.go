package engine

import (
	"fmt"
	"strings"

	"github.com/dolthub/go-mysql-server/sql"
	ast "github.com/dolthub/vitess/go/vt/sqlparser"
)

// GMS checks the privileges of RENAME TABLE (and ALTER TABLE … RENAME) on the databases the statement
// names, but renames within the session's current database whatever it names: a user allowed to
// rename in scratch ran `RENAME TABLE scratch.t TO scratch.u` from ldpsql and renamed ldpsql.t, a table
// they may only read. checkRename refuses a rename that names a database other than the current one,
// before GMS plans it, and drops the qualifier that names the current one, from the names and from
// the privilege check alike: both then take the database current when the statement runs, which a
// prepared statement (PREPARE in scratch, USE ldpsql, EXECUTE) would otherwise split. (ldp_privatize
// renames its temporary table with the destination's database current.)
func checkRename(ctx any, stmt ast.Statement) error {
	var ddls []*ast.DDL
	switch s := stmt.(type) {
	case *ast.DDL:
		ddls = []*ast.DDL{s}
	case *ast.AlterTable:
		ddls = s.Statements
	default:
		return nil
	}
	current, known := "", false
	if sctx, ok := ctx.(*sql.Context); ok && sctx != nil && sctx.Session != nil {
		current, known = sctx.GetCurrentDatabase(), true
	}
	for _, d := range ddls {
		if d == nil || d.Action != ast.RenameStr {
			continue
		}
		for _, t := range append(append(ast.TableNames{}, d.FromTables...), d.ToTables...) {
			db := t.DbQualifier.String()
			if db == "" || (known && strings.EqualFold(db, current)) {
				continue
			}
			return fmt.Errorf("renaming table %s.%s: a rename works within the current database (%s) only; USE %s first "+
				"(tables cannot move between databases)", db, t.Name.String(), current, db)
		}
		for _, names := range []ast.TableNames{d.FromTables, d.ToTables} {
			for i := range names {
				names[i].DbQualifier = ast.NewTableIdent("")
			}
		}
		// The privilege check's names: from_db, from_table, to_db, to_table, …
		if d.Auth.AuthType == ast.AuthType_RENAME && len(d.Auth.TargetNames)%2 == 0 {
			for i := 0; i < len(d.Auth.TargetNames); i += 2 {
				d.Auth.TargetNames[i] = ""
			}
		}
	}
	return nil
}
