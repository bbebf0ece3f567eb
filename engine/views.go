package engine

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dolthub/go-mysql-server/sql"
)

// Views and collation for Database. GMS stores a view as the text of its SELECT; ldpsql keeps that text
// in the catalog table views, so views survive a restart like tables do.

var _ sql.ViewDatabase = (*Database)(nil)
var _ sql.CollatedDatabase = (*Database)(nil)

const viewsTable = CatalogSchema + ".views"

const createViewsTable = `CREATE TABLE IF NOT EXISTS ` + viewsTable + ` (
	db VARCHAR, name VARCHAR, text_definition VARCHAR, create_statement VARCHAR, sql_mode VARCHAR,
	PRIMARY KEY (db, name))`

// CreateView implements sql.ViewDatabase.
func (d *Database) CreateView(ctx *sql.Context, name string, selectStatement, createViewStmt string) error {
	if d.readOnly {
		return d.errReadOnly()
	}
	if _, ok, err := d.GetViewDefinition(ctx, name); err != nil {
		return err
	} else if ok {
		return sql.ErrExistingView.New(d.name, name)
	}
	mode := sql.LoadSqlMode(ctx).String()
	_, err := d.p.db.ExecContext(ctx, `INSERT INTO `+viewsTable+` VALUES (lower(?), ?, ?, ?, ?)`,
		d.name, name, selectStatement, createViewStmt, mode)
	d.forgetViews()
	if err != nil {
		return fmt.Errorf("creating view %q: %w", name, err)
	}
	return nil
}

// DropView implements sql.ViewDatabase.
func (d *Database) DropView(ctx *sql.Context, name string) error {
	if d.readOnly {
		return d.errReadOnly()
	}
	res, err := d.p.db.ExecContext(ctx, `DELETE FROM `+viewsTable+` WHERE db = lower(?) AND lower(name) = lower(?)`, d.name, name)
	d.forgetViews()
	if err != nil {
		return fmt.Errorf("dropping view %q: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return sql.ErrViewDoesNotExist.New(d.name, name)
	}
	return nil
}

// GetViewDefinition implements sql.ViewDatabase. GMS asks for every table name a query mentions, so
// the answer comes from a cache loaded once.
func (d *Database) GetViewDefinition(ctx *sql.Context, viewName string) (sql.ViewDefinition, bool, error) {
	views, err := d.views(ctx)
	if err != nil {
		return sql.ViewDefinition{}, false, err
	}
	v, ok := views[strings.ToLower(viewName)]
	return v, ok, nil
}

// AllViews implements sql.ViewDatabase.
func (d *Database) AllViews(ctx *sql.Context) ([]sql.ViewDefinition, error) {
	views, err := d.views(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]sql.ViewDefinition, 0, len(views))
	for _, v := range views {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// views returns the cached views of this database by lower-case name, loading them once.
func (d *Database) views(ctx *sql.Context) (map[string]sql.ViewDefinition, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.viewCache != nil {
		return d.viewCache, nil
	}
	rows, err := d.p.db.QueryContext(ctx, `SELECT name, text_definition, create_statement, sql_mode FROM `+viewsTable+`
		WHERE db = lower(?)`, d.name)
	if err != nil {
		return nil, fmt.Errorf("reading views of %q: %w", d.name, err)
	}
	defer rows.Close()
	cache := map[string]sql.ViewDefinition{}
	for rows.Next() {
		var v sql.ViewDefinition
		if err := rows.Scan(&v.Name, &v.TextDefinition, &v.CreateViewStatement, &v.SqlMode); err != nil {
			return nil, err
		}
		cache[strings.ToLower(v.Name)] = v
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	d.viewCache = cache
	return cache, nil
}

// forgetViews drops the view cache after a change.
func (d *Database) forgetViews() {
	d.mu.Lock()
	d.viewCache = nil
	d.mu.Unlock()
}

// GetCollation implements sql.CollatedDatabase. ldpsql databases use the server default collation
// (mysql8.go): a new table's string columns get it unless they name another.
func (d *Database) GetCollation(*sql.Context) sql.CollationID { return DefaultCollation }

// SetCollation implements sql.CollatedDatabase; only the default collation is accepted (GMS passes
// its own default, sql.Collation_Default, for an ALTER DATABASE that names none).
func (d *Database) SetCollation(_ *sql.Context, collation sql.CollationID) error {
	if collation != DefaultCollation && collation != sql.Collation_Default {
		return fmt.Errorf("database %q: ldpsql supports only the default collation %s, not %s (a column may name its own)", d.name, DefaultCollation, collation)
	}
	return nil
}
