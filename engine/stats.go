package engine

import (
	"io"

	"github.com/dolthub/go-mysql-server/sql"
)

// analyzeEmptySafe is GMS's statistics provider with ANALYZE TABLE of an empty table made a no-op, as
// in MySQL: GMS's in-memory provider divides by the row count and panicked, which over the wire is one
// failed statement but in an in-process session (ldpsql sql --db) ends the process.
type analyzeEmptySafe struct{ sql.StatsProvider }

// AnalyzeTable implements sql.StatsProvider.
func (s analyzeEmptySafe) AnalyzeTable(ctx *sql.Context, table sql.Table, db string) error {
	empty, err := isEmpty(ctx, table)
	if err != nil || empty {
		return err
	}
	return s.StatsProvider.AnalyzeTable(ctx, table, db)
}

// isEmpty reports whether table has no row, reading at most one.
func isEmpty(ctx *sql.Context, table sql.Table) (bool, error) {
	parts, err := table.Partitions(ctx)
	if err != nil {
		return false, err
	}
	defer parts.Close(ctx)
	for {
		part, err := parts.Next(ctx)
		if err == io.EOF {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		rows, err := table.PartitionRows(ctx, part)
		if err != nil {
			return false, err
		}
		_, err = rows.Next(ctx)
		_ = rows.Close(ctx)
		if err == nil {
			return false, nil
		}
		if err != io.EOF {
			return false, err
		}
	}
}
