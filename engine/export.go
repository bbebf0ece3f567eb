package engine

import (
	"context"
	"crypto/rand"
	gosql "database/sql"
	"database/sql/driver"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/dolthub/go-mysql-server/sql"
	duckdb "github.com/duckdb/duckdb-go/v2"
)

// Exporting a stored table to a file with DuckDB's COPY (CALL ldp_export, udf/export.go).
//
// The table is written straight from the DuckDB file, on the session's transaction when it has one (so
// it sees its own uncommitted writes) and otherwise in a DuckDB transaction of its own, so that the row
// count recorded in the metadata is the number of rows written. The file is confined as SELECT … INTO
// OUTFILE is (fileGuard.check: inside secure_file_priv, never one of ldpsql's own files, never an
// existing file), is written under a temporary name beside it and linked to its name at the end (a link
// never replaces a file), so an error leaves nothing at the path.

// MetadataKey is the Parquet key-value metadata key that holds release metadata, as `ldpsql privatize`
// writes it (cmd/ldpsql/internal/rowfile.MetadataKey).
const MetadataKey = "ldpsql.releases"

// ExportFormat is a file format ExportTable writes.
type ExportFormat string

const (
	ExportParquet ExportFormat = "parquet"
	ExportCSV     ExportFormat = "csv"
)

// Export says what ExportTable writes.
type Export struct {
	Database, Table string
	// Path is the file as given in SQL: relative to the secure_file_priv directory, or absolute in it.
	Path   string
	Format ExportFormat
	// Vector, when not empty, is a column of packed little-endian float32 vectors (LDP_ENCODE's and
	// ldp_privatize's LONGBLOBs), written as a list of floats named VectorAs in Parquet, and in CSV as
	// VectorDim columns VectorAs1..VectorAsN (the layout `ldpsql privatize` writes).
	Vector, VectorAs string
	VectorDim        int
	// Metadata, when not nil, gives the release metadata for the number of rows written: Parquet
	// key-value metadata under MetadataKey, or for CSV a sidecar file Path + ".meta.json".
	Metadata func(rows int64) ([]byte, error)
}

// Exported is what ExportTable wrote.
type Exported struct {
	Path    string // the file, absolute
	Sidecar string // a CSV file's metadata, or ""
	Rows    int64
}

// SidecarSuffix names a CSV file's metadata file beside it (rowfile.MetadataAt).
const SidecarSuffix = ".meta.json"

// CheckOutfile confines name, a file to be created through SQL, as SELECT … INTO OUTFILE is, and returns
// the path to write.
func (e *Engine) CheckOutfile(name string) (string, error) { return e.files.check(name, true) }

// ErrNeedPrivilege is MySQL's error 1227 for an operation that needs one of privileges.
func ErrNeedPrivilege(privileges string) error { return errNeedPrivilege(privileges) }

// ExportTable writes a stored ldpsql table to a file with DuckDB's COPY. Privileges are the caller's to
// check; this confines the path and writes.
func (e *Engine) ExportTable(ctx *sql.Context, x Export) (Exported, error) {
	var out Exported
	if x.Format != ExportParquet && x.Format != ExportCSV {
		return out, fmt.Errorf("unknown format %q: parquet or csv", x.Format)
	}
	t, err := e.storedTable(ctx, x.Database, x.Table)
	if err != nil {
		return out, err
	}
	if out.Path, err = e.files.check(x.Path, true); err != nil {
		return out, err
	}
	if x.Format == ExportCSV && x.Metadata != nil {
		if out.Sidecar, err = e.files.check(x.Path+SidecarSuffix, true); err != nil {
			return out, fmt.Errorf("the CSV file's metadata: %w", err)
		}
	}

	cols, err := exportColumns(t, x)
	if err != nil {
		return out, err
	}

	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	tmp := filepath.Join(filepath.Dir(out.Path), ".ldpsql-export-"+hex.EncodeToString(suffix[:])+"-"+filepath.Base(out.Path))
	defer os.Remove(tmp)

	sess, conn, err := sessionConn(ctx)
	if err != nil {
		return out, err
	}
	own := conn == nil
	if own {
		if conn, err = e.DuckDB.Conn(ctx); err != nil {
			return out, err
		}
		defer conn.Close()
	}
	if err := e.registerUnpack(ctx, conn); err != nil {
		return out, err
	}
	if own {
		if _, err := conn.ExecContext(ctx, "BEGIN TRANSACTION"); err != nil {
			return out, err
		}
		defer conn.ExecContext(context.Background(), "ROLLBACK") //nolint:errcheck // read only
	}
	var meta []byte
	if x.Metadata != nil {
		if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM "+t.source()).Scan(&out.Rows); err != nil {
			return out, err
		}
		if meta, err = x.Metadata(out.Rows); err != nil {
			return out, err
		}
	}
	opts := "FORMAT csv, HEADER true"
	if x.Format == ExportParquet {
		opts = "FORMAT parquet"
		if meta != nil {
			opts += ", KV_METADATA {" + quoteString(MetadataKey) + ": " + quoteString(string(meta)) + "}"
		}
	}
	res, err := conn.ExecContext(ctx, "COPY (SELECT "+strings.Join(cols, ", ")+" FROM "+t.source()+") TO "+quoteString(tmp)+" ("+opts+")")
	if err != nil {
		if !own {
			// A COPY that fails while running aborts DuckDB's transaction: the session learns it
			// now, as after a failed write, rather than from DuckDB's message at its next statement.
			if _, alive := conn.ExecContext(context.WithoutCancel(ctx), "SELECT 1"); alive != nil {
				sess.abort(ctx, err)
			}
		}
		return out, fmt.Errorf("writing %s: %w", x.Path, err)
	}
	if n, err := res.RowsAffected(); err == nil {
		if meta != nil && n != out.Rows {
			return out, fmt.Errorf("writing %s: %d rows written, %d counted", x.Path, n, out.Rows)
		}
		out.Rows = n
	}
	return out, publishExport(tmp, out, meta, x.Path)
}

// LookupTable is the table db.name (its name in any case), or sql.ErrTableNotFound naming db.name.
func (e *Engine) LookupTable(ctx *sql.Context, db, name string) (sql.Table, error) {
	d, err := e.Provider.Database(ctx, db)
	if err != nil {
		return nil, err
	}
	t, ok, err := d.GetTableInsensitive(ctx, name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, sql.ErrTableNotFound.New(db + "." + name)
	}
	return t, nil
}

// storedTable is the ldpsql table db.name, or an error naming what it is instead.
func (e *Engine) storedTable(ctx *sql.Context, db, name string) (*Table, error) {
	st, err := e.LookupTable(ctx, db, name)
	if err != nil {
		return nil, err
	}
	t, ok := sql.GetUnderlyingTable(st).(*Table)
	if !ok {
		return nil, fmt.Errorf("%s.%s is not a stored table (a view or a system table): export it with SELECT … INTO OUTFILE", db, name)
	}
	return t, nil
}

// exportColumns is the COPY's select list: t's columns, with x.Vector unpacked into one list column
// (Parquet) or x.VectorDim columns (CSV) named after x.VectorAs.
func exportColumns(t *Table, x Export) ([]string, error) {
	var cols []string
	unpacked := false
	for _, c := range t.def.schema.Schema {
		q := quoteIdent(c.Name)
		if x.Vector == "" || !strings.EqualFold(c.Name, x.Vector) {
			cols = append(cols, q)
			continue
		}
		unpacked = true
		if x.Format == ExportParquet {
			cols = append(cols, unpackFunction+"("+q+") AS "+quoteIdent(x.VectorAs))
		} else {
			for i := 1; i <= x.VectorDim; i++ {
				cols = append(cols, fmt.Sprintf("%s(%s)[%d] AS %s", unpackFunction, q, i, quoteIdent(fmt.Sprintf("%s%d", x.VectorAs, i))))
			}
		}
	}
	if x.Vector != "" && !unpacked {
		return nil, fmt.Errorf("%s.%s has no column %s", x.Database, x.Table, x.Vector)
	}
	return cols, nil
}

// publishExport gives the finished temporary file tmp its name out.Path, and writes a CSV file's
// metadata beside it; name is the path as the statement gave it, for errors. Neither replaces a file.
func publishExport(tmp string, out Exported, meta []byte, name string) error {
	// A link, unlike a rename, never replaces a file made since the check.
	if err := os.Link(tmp, out.Path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return sql.ErrFileExists.New(name)
		}
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if out.Sidecar != "" {
		if err := writeNew(out.Sidecar, meta); err != nil {
			os.Remove(out.Path)
			if errors.Is(err, os.ErrExist) {
				return sql.ErrFileExists.New(name + SidecarSuffix)
			}
			return fmt.Errorf("writing %s: %w", name+SidecarSuffix, err)
		}
	}
	return nil
}

// writeNew writes data to a file that must not exist yet.
func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

// unpackFunction is a DuckDB scalar function, BLOB → FLOAT[], that decodes a packed little-endian
// float32 vector (udf.PackVector); a BLOB whose length is not a multiple of 4 is an error.
const unpackFunction = "ldpsql_unpack_f32"

// registerUnpackAtOpen registers unpackFunction once when the engine opens, outside any transaction
// (ExportTable registers it again where a connection does not see it).
func (e *Engine) registerUnpackAtOpen() {
	ctx := context.Background()
	conn, err := e.DuckDB.Conn(ctx)
	if err != nil {
		return
	}
	defer conn.Close()
	_ = e.registerUnpack(ctx, conn)
}

// registerUnpack makes unpackFunction known on conn (DuckDB registers it in the database's system
// catalog, so once is enough; a connection that already sees it is left alone).
func (e *Engine) registerUnpack(ctx context.Context, conn *gosql.Conn) error {
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM duckdb_functions() WHERE function_name = ?", unpackFunction).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	blob, err := duckdb.NewTypeInfo(duckdb.TYPE_BLOB)
	if err != nil {
		return err
	}
	f32, err := duckdb.NewTypeInfo(duckdb.TYPE_FLOAT)
	if err != nil {
		return err
	}
	list, err := duckdb.NewListInfo(f32)
	if err != nil {
		return err
	}
	err = e.store.rawConn(ctx, func(raw *gosql.Conn) error {
		return duckdb.RegisterScalarUDF(raw, unpackFunction, &unpackUDF{in: []duckdb.TypeInfo{blob}, out: list})
	})
	if err != nil {
		// Another statement may have registered it in between.
		if again := conn.QueryRowContext(ctx, "SELECT count(*) FROM duckdb_functions() WHERE function_name = ?", unpackFunction).Scan(&n); again == nil && n > 0 {
			return nil
		}
		return fmt.Errorf("registering %s in DuckDB: %w", unpackFunction, err)
	}
	return nil
}

type unpackUDF struct {
	in  []duckdb.TypeInfo
	out duckdb.TypeInfo
}

func (u *unpackUDF) Config() duckdb.ScalarFuncConfig {
	return duckdb.ScalarFuncConfig{InputTypeInfos: u.in, ResultTypeInfo: u.out}
}

func (u *unpackUDF) Executor() duckdb.ScalarFuncExecutor {
	return duckdb.ScalarFuncExecutor{RowExecutor: func(values []driver.Value) (any, error) {
		b, ok := values[0].([]byte)
		if !ok {
			return nil, fmt.Errorf("%s: a %T, not a BLOB", unpackFunction, values[0])
		}
		if len(b)%4 != 0 {
			return nil, fmt.Errorf("%s: a packed vector has a multiple of 4 bytes, this one has %d", unpackFunction, len(b))
		}
		v := make([]float32, len(b)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return v, nil
	}}
}
