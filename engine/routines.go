package engine

import (
	"fmt"

	"github.com/dolthub/go-mysql-server/sql"
)

// Triggers and SQL-defined stored procedures are not supported by ldpsql's storage yet. GMS asks every
// database for them (an INSERT looks up triggers, CALL looks up procedures before the Go procedures that
// ldpsql registers), so Database answers "none" and refuses to create them with a clear error.

var _ sql.TriggerDatabase = (*Database)(nil)
var _ sql.StoredProcedureDatabase = (*Database)(nil)

// GetTriggers implements sql.TriggerDatabase: there are none.
func (d *Database) GetTriggers(*sql.Context) ([]sql.TriggerDefinition, error) { return nil, nil }

// CreateTrigger implements sql.TriggerDatabase.
func (d *Database) CreateTrigger(_ *sql.Context, def sql.TriggerDefinition) error {
	return fmt.Errorf("CREATE TRIGGER %s: triggers are not supported by ldpsql", def.Name)
}

// DropTrigger implements sql.TriggerDatabase.
func (d *Database) DropTrigger(_ *sql.Context, name string) error {
	return sql.ErrTriggerDoesNotExist.New(name)
}

// GetStoredProcedure implements sql.StoredProcedureDatabase: there are no SQL-defined procedures.
func (d *Database) GetStoredProcedure(*sql.Context, string) (sql.StoredProcedureDetails, bool, error) {
	return sql.StoredProcedureDetails{}, false, nil
}

// GetStoredProcedures implements sql.StoredProcedureDatabase.
func (d *Database) GetStoredProcedures(*sql.Context) ([]sql.StoredProcedureDetails, error) {
	return nil, nil
}

// SaveStoredProcedure implements sql.StoredProcedureDatabase.
func (d *Database) SaveStoredProcedure(_ *sql.Context, spd sql.StoredProcedureDetails) error {
	return fmt.Errorf("CREATE PROCEDURE %s: SQL-defined stored procedures are not supported by ldpsql", spd.Name)
}

// DropStoredProcedure implements sql.StoredProcedureDatabase.
func (d *Database) DropStoredProcedure(_ *sql.Context, name string) error {
	return sql.ErrStoredProcedureDoesNotExist.New(name)
}
