package engine

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/planbuilder"
	"github.com/dolthub/go-mysql-server/sql/types"
	"github.com/dolthub/vitess/go/vt/proto/query"
	duckdb "github.com/duckdb/duckdb-go/v2"
	"github.com/shopspring/decimal"
)

// columnMeta is what the DuckDB column comment records about a MySQL column: DuckDB's own type loses
// VARCHAR lengths, TEXT vs VARCHAR, JSON vs VARCHAR, BOOLEAN vs TINYINT, and MySQL defaults.
type columnMeta struct {
	Type          string `json:"type"`
	Default       string `json:"default,omitempty"`
	AutoIncrement bool   `json:"auto_increment,omitempty"`
	Comment       string `json:"comment,omitempty"`
}

// metaPrefix marks comments written by ldpsql, so a column commented by hand is not misread.
const metaPrefix = "ldpsql:"

func encodeColumnMeta(col *sql.Column) (string, error) {
	m := columnMeta{Type: col.Type.String(), AutoIncrement: col.AutoIncrement, Comment: col.Comment}
	if col.Default != nil {
		m.Default = col.Default.String()
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	return metaPrefix + string(b), nil
}

func decodeColumnMeta(comment string) (columnMeta, bool) {
	var m columnMeta
	if !strings.HasPrefix(comment, metaPrefix) {
		return m, false
	}
	if err := json.Unmarshal([]byte(comment[len(metaPrefix):]), &m); err != nil {
		return m, false
	}
	return m, true
}

// duckTypeFor maps a MySQL column type to the DuckDB type that stores it without loss.
func duckTypeFor(t sql.Type) (string, error) {
	switch t.Type() {
	case query.Type_INT8:
		return "TINYINT", nil
	case query.Type_INT16, query.Type_YEAR:
		return "SMALLINT", nil
	case query.Type_INT24, query.Type_INT32:
		return "INTEGER", nil
	case query.Type_INT64:
		return "BIGINT", nil
	case query.Type_UINT8:
		return "UTINYINT", nil
	case query.Type_UINT16:
		return "USMALLINT", nil
	case query.Type_UINT24, query.Type_UINT32:
		return "UINTEGER", nil
	case query.Type_UINT64:
		return "UBIGINT", nil
	case query.Type_FLOAT32:
		return "FLOAT", nil
	case query.Type_FLOAT64:
		return "DOUBLE", nil
	case query.Type_DECIMAL:
		dt := t.(sql.DecimalType)
		if dt.Precision() > 38 {
			return "", fmt.Errorf("DECIMAL(%d,%d): DuckDB storage supports a precision of at most 38", dt.Precision(), dt.Scale())
		}
		return fmt.Sprintf("DECIMAL(%d,%d)", dt.Precision(), dt.Scale()), nil
	case query.Type_VARCHAR, query.Type_CHAR, query.Type_TEXT, query.Type_JSON:
		return "VARCHAR", nil
	case query.Type_BLOB, query.Type_VARBINARY, query.Type_BINARY:
		return "BLOB", nil
	case query.Type_DATETIME, query.Type_TIMESTAMP:
		return "TIMESTAMP", nil
	case query.Type_DATE:
		return "DATE", nil
	}
	return "", fmt.Errorf("column type %s is not supported by ldpsql's DuckDB storage (supported: integers, FLOAT, DOUBLE, DECIMAL, CHAR/VARCHAR/TEXT, BINARY/VARBINARY/BLOB, JSON, BOOLEAN, DATE, DATETIME, TIMESTAMP, YEAR)", t.String())
}

// parseColumnType turns a recorded MySQL type string back into a GMS type. A string type recorded
// without a COLLATE clause (every string column of a file made before utf8mb4_0900_ai_ci became the
// default, and binary columns since) parses with an unspecified collation, which GMS then takes for a
// character set of its own: `col COLLATE utf8mb4_0900_bin` failed after a restart ("not valid for
// CHARACTER SET"). It is utf8mb4_0900_bin, GMS's default, which the recorded string left out.
func parseColumnType(s string) (sql.Type, error) {
	t, err := planbuilder.ParseColumnTypeString(s)
	if err != nil {
		return nil, err
	}
	if ct, ok := t.(sql.TypeWithCollation); ok && types.IsText(t) && ct.Collation() == sql.Collation_Unspecified {
		return ct.WithNewCollation(sql.Collation_utf8mb4_0900_bin)
	}
	return t, nil
}

// toDuck converts a GMS row value of type t into the Go value DuckDB's appender and parameters expect.
func toDuck(ctx *sql.Context, t sql.Type, v any) (driver.Value, error) {
	if v == nil {
		return nil, nil
	}
	v, err := sql.UnwrapAny(ctx, v)
	if err != nil {
		return nil, err
	}
	// Normalise to the canonical Go type of the column type first: GMS usually has, but a REPLACE or an
	// UPDATE expression may hand us another numeric type.
	cv, _, err := t.Convert(ctx, v)
	if err != nil {
		return nil, err
	}
	switch t.Type() {
	case query.Type_INT24:
		return int32(cv.(int32)), nil
	case query.Type_UINT24:
		return uint32(cv.(uint32)), nil
	case query.Type_DECIMAL:
		d := cv.(decimal.Decimal)
		dt := t.(sql.DecimalType)
		scaled := d.Shift(int32(dt.Scale())).Round(0).BigInt()
		return duckdb.Decimal{Width: uint8(dt.Precision()), Scale: uint8(dt.Scale()), Value: scaled}, nil
	case query.Type_VARCHAR, query.Type_CHAR, query.Type_TEXT:
		switch s := cv.(type) {
		case string:
			return s, nil
		case []byte:
			return string(s), nil
		}
	case query.Type_JSON:
		if w, ok := cv.(sql.JSONWrapper); ok {
			return types.JsonToMySqlString(ctx, w)
		}
		if s, ok := cv.(string); ok {
			return s, nil
		}
	case query.Type_BLOB, query.Type_VARBINARY, query.Type_BINARY:
		switch b := cv.(type) {
		case []byte:
			return b, nil
		case string:
			return []byte(b), nil
		}
	case query.Type_DATETIME, query.Type_TIMESTAMP, query.Type_DATE:
		if tm, ok := cv.(time.Time); ok {
			return tm.UTC(), nil
		}
	default:
		return cv, nil
	}
	return nil, fmt.Errorf("cannot store %T value in a %s column", cv, t.String())
}

// fromDuck converts a value scanned from DuckDB back into the canonical GMS value for type t.
func fromDuck(ctx *sql.Context, t sql.Type, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch t.Type() {
	case query.Type_INT8, query.Type_INT16, query.Type_INT32, query.Type_INT64, query.Type_UINT8,
		query.Type_UINT16, query.Type_UINT32, query.Type_UINT64, query.Type_FLOAT32, query.Type_FLOAT64,
		query.Type_VARCHAR, query.Type_CHAR, query.Type_TEXT, query.Type_BLOB, query.Type_VARBINARY,
		query.Type_BINARY:
		// DuckDB returns exactly the Go type GMS uses for these.
		return v, nil
	case query.Type_JSON:
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("JSON column holds %T", v)
		}
		var doc any
		if err := json.Unmarshal([]byte(s), &doc); err != nil {
			return nil, fmt.Errorf("JSON column holds invalid JSON: %w", err)
		}
		return types.JSONDocument{Val: doc}, nil
	case query.Type_DECIMAL:
		d, ok := v.(duckdb.Decimal)
		if !ok {
			return nil, fmt.Errorf("DECIMAL column holds %T", v)
		}
		return decimal.NewFromBigInt(new(big.Int).Set(d.Value), -int32(d.Scale)), nil
	}
	cv, _, err := t.Convert(ctx, v)
	return cv, err
}
