package udf

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"
	"github.com/dolthub/vitess/go/mysql"

	"github.com/ldpsql/ldpsql/client"
	"github.com/ldpsql/ldpsql/engine"
)

// CALL ldp_export('table', 'path', 'parquet'|'csv'): a stored table to a file in the server's
// secure_file_priv directory, through DuckDB's COPY (engine.ExportTable), with the release metadata of a
// table that ldp_privatize (or ldpsql import-releases) wrote, in the format `ldpsql privatize` writes and
// `ldpsql import-releases` reads: Parquet key-value metadata "ldpsql.releases", or a CSV file's sidecar
// <path>.meta.json; the released vector as a list column z (Parquet) or z1..zd (CSV).
//
// Who may export what: writing a file on the server needs the FILE privilege, as SELECT … INTO OUTFILE
// does; the table needs SELECT; and a table the privacy ledger protects (one with a budget) is exported
// only by a DBA: its raw columns never leave through export for anyone else.

var exportSchema = sql.Schema{
	{Name: "path", Type: types.LongText},
	{Name: "rows", Type: types.Int64},
	{Name: "format", Type: types.LongText},
	{Name: "metadata", Type: types.LongText},
}

// ExportReleaseMetadata is the release metadata ldp_export writes: client.Meta (the keys `ldpsql
// privatize` and the Beam transform write, which import-releases requires) and a few that say where the
// rows came from (import-releases ignores them).
type ExportReleaseMetadata struct {
	client.Meta
	Table      string    `json:"table"`
	Source     string    `json:"source"`
	OutputDim  int       `json:"output_dim"`
	OutputSet  string    `json:"output_set"`
	ExportedAt time.Time `json:"exported_at"`
}

func (p *procedures) export(ctx *sql.Context, table, path, format string) (sql.RowIter, error) {
	const fn = "ldp_export"
	f := engine.ExportFormat(strings.ToLower(strings.TrimSpace(format)))
	if f != engine.ExportParquet && f != engine.ExportCSV {
		return nil, fmt.Errorf("%s: format %q: 'parquet' or 'csv'", fn, format)
	}
	mdb := p.e.GMS.Analyzer.Catalog.MySQLDb
	if !engine.HasGlobalPrivilege(ctx, mdb, sql.PrivilegeType_File) {
		return nil, engine.ErrNeedPrivilege("FILE")
	}
	db, name := splitTable(ctx, table)
	if mdb != nil && mdb.Enabled() && !mdb.UserHasPrivileges(ctx, sql.NewPrivilegedOperation(
		sql.PrivilegeCheckSubject{Database: db, Table: name}, sql.PrivilegeType_Select)) {
		c := ctx.Session.Client()
		return nil, sql.ErrTableAccessDeniedForUser.New(fmt.Sprintf("'%s'@'%s'", c.User, c.Address), db+"."+name)
	}
	dba := p.e.IsDBA(ctx)
	if !dba {
		if strings.EqualFold(db, engine.CatalogSchema) {
			return nil, fmt.Errorf("%s: %s is ldpsql's catalog, exported only by a DBA", fn, table)
		}
		if _, protected := p.e.Ledger.Budget(engine.TableRef{Database: db, Table: name}); protected {
			return nil, fmt.Errorf("%s: %s.%s is protected by a privacy budget: its raw columns are never exported; "+
				"release it with CALL ldp_privatize and export the released table", fn, db, name)
		}
	}
	t, err := p.table(ctx, db, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	x := engine.Export{Database: db, Table: name, Path: path, Format: f}
	note := "none: " + db + "." + name + " was not written by ldp_privatize or ldpsql import-releases"
	if pm := privatizeMetadataOf(t); pm != nil {
		meta := NewExportReleaseMetadata(pm, db+"."+name, 0)
		note = "release metadata of mechanism " + pm.Mechanism
		if meta.ModelSHA == "" || meta.SHA256 == "" {
			// A table released before ldp_privatize recorded the digests: those of the mechanism now.
			if meta.SHA256, meta.ModelSHA, err = p.mechanismDigests(ctx, pm.Mechanism); err != nil {
				return nil, fmt.Errorf("%s: %w", fn, err)
			}
			note += " (its digests are those of the mechanism as registered now: the table does not record them)"
		}
		if f == engine.ExportParquet {
			note += ", in the key-value metadata " + engine.MetadataKey
		} else {
			note += ", in " + path + engine.SidecarSuffix
		}
		x.Vector, x.VectorAs, x.VectorDim = pm.FeaturesCol, "z", pm.OutputDim
		x.Metadata = func(rows int64) ([]byte, error) {
			meta.Rows = int(rows)
			return json.MarshalIndent(meta, "", "  ")
		}
	}
	out, err := p.e.ExportTable(ctx, x)
	if err != nil {
		// MySQL's error numbers stay: 1290 for the path, 1086 for an existing file.
		var se *mysql.SQLError
		switch {
		case errors.As(err, &se):
			return nil, mysql.NewSQLError(se.Num, se.State, "%s: %s", fn, se.Message)
		case sql.ErrFileExists.Is(err):
			return nil, err
		}
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	p.log("ldp_export: %s wrote %d rows of %s.%s to %s", user(ctx), out.Rows, db, name, out.Path)
	return sql.RowsToRowIter(sql.Row{out.Path, out.Rows, string(f), note}), nil
}

// mechanismDigests are the digests a release of mechanism name records: the SHA-256 of its model (the
// artifact in ldp_models, as a .ldpm file's artifact_sha256; "" for a mechanism without one) and, as
// there is no .ldpm file for a release the server made, MechanismDigest for mechanism_sha256.
func (p *procedures) mechanismDigests(ctx context.Context, name string) (mechSHA, modelSHA string, err error) {
	rec, err := p.e.Catalog.Mechanism(ctx, name)
	if err != nil {
		return "", "", fmt.Errorf("mechanism %q: %w", name, err)
	}
	if rec.Model != "" {
		m, err := p.e.Catalog.Model(ctx, rec.Model)
		if err != nil {
			return "", "", fmt.Errorf("mechanism %q: %w", name, err)
		}
		sum := sha256.Sum256(m.Artifact)
		modelSHA = hex.EncodeToString(sum[:])
	}
	return MechanismDigest(rec.Name, rec.SHA256, modelSHA), modelSHA, nil
}

// MechanismDigest is the mechanism_sha256 of a release the server made (ldp_privatize): the SHA-256 of
// the mechanism's name, its plugin binary's digest and its model's digest, each followed by a zero byte,
// which together fix what the releases were computed with (a .ldpm file's digest stands there for
// releases made with `ldpsql privatize`).
func MechanismDigest(name, pluginSHA, modelSHA string) string {
	sum := sha256.Sum256([]byte(name + "\x00" + strings.ToLower(pluginSHA) + "\x00" + strings.ToLower(modelSHA) + "\x00"))
	return hex.EncodeToString(sum[:])
}

// ParsePrivatizeComment is the metadata ldp_privatize (or ldpsql import-releases) recorded in a table's
// comment, or nil for another comment.
func ParsePrivatizeComment(comment string) *PrivatizeMetadata {
	var wrapped struct {
		M *PrivatizeMetadata `json:"ldp_privatize"`
	}
	if comment == "" || json.Unmarshal([]byte(comment), &wrapped) != nil {
		return nil
	}
	return wrapped.M
}

// NewExportReleaseMetadata is the release metadata of rows rows of table (db.name), released as pm says.
// The digests are pm's, which the caller fills in for a table that predates them.
func NewExportReleaseMetadata(pm *PrivatizeMetadata, table string, rows int64) ExportReleaseMetadata {
	return ExportReleaseMetadata{Meta: client.Meta{Eps: pm.Epsilon, EpsX: pm.EpsX, EpsY: pm.EpsY, K: pm.K, Label: pm.LabelCol, Lambda: pm.Lambda,
		Mechanism: pm.Mechanism, SHA256: pm.MechanismSHA256, ModelSHA: pm.ModelSHA256, Randomiser: pm.Randomiser, Rows: int(rows)},
		Table: table, Source: pm.Source, OutputDim: pm.OutputDim, OutputSet: pm.OutputSet, ExportedAt: time.Now().UTC().Truncate(time.Second)}
}
