package engine

import (
	"context"
	gosql "database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Catalog is ldpsql's own metadata: the registered mechanisms and the fitted models. It lives in the
// DuckDB schema ldpsql_catalog, which clients see as the read-only database ldpsql_catalog (its tables
// whose names start with "ldp_"); only ldpsql's procedures change it.
type Catalog struct {
	db    *gosql.DB
	files *fileGuard // told every plugin binary, which SQL must never read or overwrite
}

// CatalogTablePrefix marks the catalog tables visible to SQL clients.
const CatalogTablePrefix = "ldp_"

const createCatalogTables = `
CREATE TABLE IF NOT EXISTS ` + CatalogSchema + `.ldp_mechanisms (
	name VARCHAR PRIMARY KEY,
	plugin VARCHAR NOT NULL,
	path VARCHAR NOT NULL,
	sha256 VARCHAR NOT NULL,
	description VARCHAR NOT NULL,
	model VARCHAR,
	registered_by VARCHAR NOT NULL,
	registered_at TIMESTAMP NOT NULL);
COMMENT ON COLUMN ` + CatalogSchema + `.ldp_mechanisms.description IS 'ldpsql:{"type":"json"}';
COMMENT ON COLUMN ` + CatalogSchema + `.ldp_mechanisms.path IS 'ldpsql:{"type":"text"}';
CREATE TABLE IF NOT EXISTS ` + CatalogSchema + `.ldp_models (
	name VARCHAR PRIMARY KEY,
	plugin VARCHAR NOT NULL,
	params VARCHAR NOT NULL,
	training_table VARCHAR NOT NULL,
	training_rows BIGINT NOT NULL,
	checksum VARCHAR NOT NULL,
	artifact BLOB NOT NULL,
	created_by VARCHAR NOT NULL,
	created_at TIMESTAMP NOT NULL);
COMMENT ON COLUMN ` + CatalogSchema + `.ldp_models.params IS 'ldpsql:{"type":"json"}';
ALTER TABLE ` + CatalogSchema + `.ldp_models ADD COLUMN IF NOT EXISTS training_column VARCHAR;
CREATE TABLE IF NOT EXISTS ` + CatalogSchema + `.ldp_default_mechanisms (
	db VARCHAR NOT NULL,
	table_name VARCHAR NOT NULL,
	column_name VARCHAR NOT NULL,
	mechanism VARCHAR NOT NULL,
	randomiser VARCHAR NOT NULL,
	set_by VARCHAR NOT NULL,
	set_at TIMESTAMP NOT NULL,
	PRIMARY KEY (db, table_name, column_name));
`

// Mechanism is a registered encoder: a plugin binary pinned by its SHA-256, the description it gave at
// registration (dimensions and declared output set), and optionally the model it is loaded with.
type Mechanism struct {
	Name         string
	Plugin       string // the encoder kind: a built-in plugin's name, or "external"
	Path         string // absolute path of the plugin binary
	SHA256       string // hex digest the binary must have
	Description  json.RawMessage
	Model        string // name in ldp_models, "" when the encoder needs none
	RegisteredBy string
	RegisteredAt time.Time
}

// Model is a fitted encoder model: the artifact a plugin's Fit returned and how it was made.
type Model struct {
	Name   string
	Plugin string
	Params json.RawMessage
	// TrainingTable and TrainingColumn are the table (db.table since ldpsql recorded the database; a
	// bare name before) and the features column the model was fitted or trained on ("": not recorded).
	TrainingTable  string
	TrainingColumn string
	TrainingRows   int64
	Checksum       string // SHA-256 of Artifact, hex
	Artifact       []byte
	CreatedBy      string
	CreatedAt      time.Time
}

// ErrMechanismExists and ErrNoMechanism name catalog lookups that failed.
var (
	ErrMechanismExists = errors.New("mechanism already registered")
	ErrNoMechanism     = errors.New("no such mechanism")
)

// RegisterMechanism adds m; a mechanism of the same name is an error (drop it first).
func (c *Catalog) RegisterMechanism(ctx context.Context, m Mechanism) error {
	c.protect(m.Path)
	err := insertMechanism(ctx, c.db, "INSERT", m)
	if err != nil && isDuplicate(err) {
		return fmt.Errorf("%w: %q (drop it first with CALL ldp_drop_mechanism('%s'))", ErrMechanismExists, m.Name, m.Name)
	}
	return err
}

// execer is a *sql.DB or a *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (gosql.Result, error)
}

// insertMechanism writes m's row with insert: "INSERT", or "INSERT OR REPLACE" to replace a
// mechanism of the same name.
func insertMechanism(ctx context.Context, db execer, insert string, m Mechanism) error {
	_, err := db.ExecContext(ctx, insert+` INTO `+CatalogSchema+`.ldp_mechanisms VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		m.Name, m.Plugin, m.Path, m.SHA256, string(m.Description), nullString(m.Model), m.RegisteredBy, m.RegisteredAt.UTC())
	return err
}

// protect adds a plugin binary, and the directory it is in, to the files SQL never touches.
func (c *Catalog) protect(path string) {
	if c.files != nil && path != "" {
		c.files.protect(path, filepath.Dir(path))
	}
}

// DropMechanism removes a mechanism; an unknown name is an error.
func (c *Catalog) DropMechanism(ctx context.Context, name string) error {
	res, err := c.db.ExecContext(ctx, `DELETE FROM `+CatalogSchema+`.ldp_mechanisms WHERE name = ?`, name)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: %q", ErrNoMechanism, name)
	}
	return nil
}

// Mechanism returns the mechanism called name.
func (c *Catalog) Mechanism(ctx context.Context, name string) (Mechanism, error) {
	ms, err := c.mechanisms(ctx, name)
	if err != nil {
		return Mechanism{}, err
	}
	if len(ms) == 0 {
		return Mechanism{}, fmt.Errorf("%w: %q", ErrNoMechanism, name)
	}
	return ms[0], nil
}

// Mechanisms lists every registered mechanism, by name.
func (c *Catalog) Mechanisms(ctx context.Context) ([]Mechanism, error) { return c.mechanisms(ctx, "") }

func (c *Catalog) mechanisms(ctx context.Context, name string) ([]Mechanism, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT name, plugin, path, sha256, description, coalesce(model, ''), registered_by, registered_at
		FROM `+CatalogSchema+`.ldp_mechanisms WHERE ? = '' OR name = ? ORDER BY name`, name, name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Mechanism
	for rows.Next() {
		var m Mechanism
		var desc string
		if err := rows.Scan(&m.Name, &m.Plugin, &m.Path, &m.SHA256, &desc, &m.Model, &m.RegisteredBy, &m.RegisteredAt); err != nil {
			return nil, err
		}
		m.Description = json.RawMessage(desc)
		out = append(out, m)
	}
	return out, rows.Err()
}

// RegisterBuiltin registers built-in plugin m, replacing its row, and re-pins the mechanisms that run
// it (as RepinBuiltin, from oldPath) in the same transaction. Apart, a crash between the two left
// them pinned to the old binary while the plugin's own row looked current.
func (c *Catalog) RegisterBuiltin(ctx context.Context, m Mechanism, oldPath string) error {
	c.protect(m.Path)
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := insertMechanism(ctx, tx, "INSERT OR REPLACE", m); err != nil {
		return err
	}
	if _, err := repinBuiltin(ctx, tx, m.Name, oldPath, m.Path, m.SHA256); err != nil {
		return err
	}
	return tx.Commit()
}

// RepinBuiltin points every mechanism that runs built-in plugin name, at its old path or its new
// one, at the new path and digest, and returns how many it changed. Only for the built-in plugins,
// which ship with ldpsql: they are re-pinned when ldpsql is rebuilt (a new digest) or installed in
// another directory (a new path). A mechanism of an external plugin (plugin "external") or at
// another path is left as it is.
func (c *Catalog) RepinBuiltin(ctx context.Context, name, oldPath, path, sha256 string) (int64, error) {
	return repinBuiltin(ctx, c.db, name, oldPath, path, sha256)
}

func repinBuiltin(ctx context.Context, db execer, name, oldPath, path, sha256 string) (int64, error) {
	res, err := db.ExecContext(ctx, `UPDATE `+CatalogSchema+`.ldp_mechanisms SET path = ?, sha256 = ?
		WHERE plugin = ? AND path IN (?, ?) AND (path <> ? OR sha256 <> ?)`, path, sha256, name, oldPath, path, path, sha256)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// PutModel stores m, replacing a model of the same name.
func (c *Catalog) PutModel(ctx context.Context, m Model) error {
	_, err := c.db.ExecContext(ctx, `INSERT OR REPLACE INTO `+CatalogSchema+`.ldp_models
		(name, plugin, params, training_table, training_rows, checksum, artifact, created_by, created_at, training_column)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		m.Name, m.Plugin, string(m.Params), m.TrainingTable, m.TrainingRows, m.Checksum, m.Artifact, m.CreatedBy, m.CreatedAt.UTC(),
		nullString(m.TrainingColumn))
	return err
}

// SetModelParams replaces the params recorded with model name (e.g. to add its diagnostics); an
// unknown name is an error.
func (c *Catalog) SetModelParams(ctx context.Context, name string, params json.RawMessage) error {
	res, err := c.db.ExecContext(ctx, `UPDATE `+CatalogSchema+`.ldp_models SET params = ? WHERE name = ?`, string(params), name)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("no such model: %q", name)
	}
	return nil
}

// Model returns the model called name.
func (c *Catalog) Model(ctx context.Context, name string) (Model, error) {
	var m Model
	var params string
	err := c.db.QueryRowContext(ctx, `SELECT name, plugin, params, training_table, coalesce(training_column, ''), training_rows, checksum,
		artifact, created_by, created_at FROM `+CatalogSchema+`.ldp_models WHERE name = ?`, name).Scan(&m.Name, &m.Plugin, &params,
		&m.TrainingTable, &m.TrainingColumn, &m.TrainingRows, &m.Checksum, &m.Artifact, &m.CreatedBy, &m.CreatedAt)
	if errors.Is(err, gosql.ErrNoRows) {
		return m, fmt.Errorf("no such model: %q", name)
	}
	m.Params = json.RawMessage(params)
	return m, err
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func isDuplicate(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "violates primary key constraint") || strings.Contains(msg, "PRIMARY KEY or UNIQUE constraint")
}
