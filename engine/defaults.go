package engine

import (
	"context"
	gosql "database/sql"
	"errors"
	"fmt"
	"time"
)

// Default mechanisms. A DBA may name, per column of a table, the mechanism and randomiser that
// LDP_ENCODE(column, eps) and LDP_ENCODE_JSON(column, eps) release it with (package udf rewrites the
// short form into the long one). They are kept in ldpsql_catalog.ldp_default_mechanisms, one row per
// (database, table, column), readable by SQL clients like ldp_mechanisms. Names are stored as the
// table's definition spells them and looked up case-insensitively, as MySQL names are. A table's
// defaults follow it through RENAME TABLE and, like its budget, stay after DROP TABLE (for a new table
// of the same name) until a DBA drops them.

// DefaultMechanism is one row of ldp_default_mechanisms.
type DefaultMechanism struct {
	TableRef
	Column     string
	Mechanism  string
	Randomiser string
	SetBy      string
	SetAt      time.Time
}

// ErrNoDefaultMechanism is returned for a column without a default mechanism.
var ErrNoDefaultMechanism = errors.New("no default mechanism")

// SetDefaultMechanism records d, replacing the default of the same column (however its names are cased).
func (c *Catalog) SetDefaultMechanism(ctx context.Context, d DefaultMechanism) error {
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `DELETE FROM `+CatalogSchema+`.ldp_default_mechanisms
		WHERE lower(db) = lower(?) AND lower(table_name) = lower(?) AND lower(column_name) = lower(?)`, d.Database, d.Table, d.Column); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+CatalogSchema+`.ldp_default_mechanisms VALUES (?, ?, ?, ?, ?, ?, ?)`,
		d.Database, d.Table, d.Column, d.Mechanism, d.Randomiser, d.SetBy, d.SetAt.UTC()); err != nil {
		return err
	}
	return tx.Commit()
}

// DropDefaultMechanism removes the default of a column; a column without one is ErrNoDefaultMechanism.
func (c *Catalog) DropDefaultMechanism(ctx context.Context, t TableRef, column string) error {
	res, err := c.db.ExecContext(ctx, `DELETE FROM `+CatalogSchema+`.ldp_default_mechanisms
		WHERE lower(db) = lower(?) AND lower(table_name) = lower(?) AND lower(column_name) = lower(?)`, t.Database, t.Table, column)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w for %s.%s", ErrNoDefaultMechanism, t, column)
	}
	return nil
}

// DefaultMechanismOf returns the default of a column, or ErrNoDefaultMechanism.
func (c *Catalog) DefaultMechanismOf(ctx context.Context, t TableRef, column string) (DefaultMechanism, error) {
	var d DefaultMechanism
	err := c.db.QueryRowContext(ctx, `SELECT db, table_name, column_name, mechanism, randomiser, set_by, set_at
		FROM `+CatalogSchema+`.ldp_default_mechanisms
		WHERE lower(db) = lower(?) AND lower(table_name) = lower(?) AND lower(column_name) = lower(?)`, t.Database, t.Table, column).
		Scan(&d.Database, &d.Table, &d.Column, &d.Mechanism, &d.Randomiser, &d.SetBy, &d.SetAt)
	if errors.Is(err, gosql.ErrNoRows) {
		return d, fmt.Errorf("%w for %s.%s", ErrNoDefaultMechanism, t, column)
	}
	return d, err
}

// defaultsRenameStatement moves a table's default mechanisms to its new name, in the transaction that
// renames the table.
func defaultsRenameStatement(from, to TableRef) string {
	return fmt.Sprintf("UPDATE %s.ldp_default_mechanisms SET table_name = %s WHERE lower(db) = lower(%s) AND lower(table_name) = lower(%s)",
		CatalogSchema, quoteString(to.Table), quoteString(from.Database), quoteString(from.Table))
}
