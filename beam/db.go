package beam

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/go-sql-driver/mysql"

	"github.com/ldpsql/ldpsql/client"
	"github.com/ldpsql/ldpsql/plugins/sdk"
)

// The ldpsql server as a source and a sink, over the MySQL protocol (go-sql-driver), never through
// udf or engine: the workers talk to the server as any client does.
//
// A source table is read in parts along its primary key, any key (ranges of key tuples, so that
// workers read in parallel), each part in key order; a table without a primary key as one part
// (dbkey.go). The releases' id is the key, every column of it. When the table is protected (it has a
// privacy budget), every released row is charged to its unit through the server (CALL
// ldp_charge_external, DBA only) before it reaches the writer: the rows of a part are charged in
// batches whose ids are JOB/p<part>/b<n>, fixed by the job id, the parts and the key order, so a
// crashed job rerun with the same --job-id over the same rows retries the same batches and the server
// charges each unit once per release. Units the server refuses (over their budget) are left out and
// counted.
//
// The sink writes the releases into a staging table (_ldpsql_etl_<job>) that carries, from its
// creation, the metadata an ldp_privatize table carries, and renames it to the destination once every
// release is written: a job that fails or is killed leaves no destination.

// DBSource is a table on an ldpsql server to read.
type DBSource struct {
	// DSN is go-sql-driver's: user:pass@tcp(host:port)/db. The user must be able to read the raw rows
	// and, for a protected table, be a DBA (only a DBA reads the ledger and charges it).
	DSN string
	// Table is the table, db.table or a table of the DSN's database.
	Table string
	// Features names one packed-vector column (a BLOB of float32s, as LDP_VECTOR makes) or numeric
	// columns, one feature each, in order.
	Features []string
	// Partitions is how many key ranges to read in parallel (default 4; a table without a primary key
	// is read as one).
	Partitions int
	// ChargeBatch is the rows of one CALL ldp_charge_external (default 1000).
	ChargeBatch int
}

// DBSink is a new table on an ldpsql server to write the releases into.
type DBSink struct {
	DSN   string
	Table string
}

// dbPlan is what the driver finds out about a source before the pipeline is built.
type dbPlan struct {
	DSN, Database, Table string // the table as the server spells it
	// Key is the primary key's columns in order (nil: the table has none), the releases' id.
	Key []keyColumn
	// OrderBy is the ORDER BY list of a part's read ("" for none): the key's, or a protected table's
	// unit columns' when it has no key (dbkey.go).
	OrderBy     string
	Packed      bool     // one packed-vector features column
	Features    []string // the features columns
	Label       string
	Units       []string // the unit columns of a protected table; nil when unprotected
	Job         string
	ChargeBatch int
}

// sinkPlan is the destination and its staging table.
type sinkPlan struct {
	DSN, Database, Table, Staging string
	Key                           []keyColumn // the source's primary key; nil: a generated row_id
	Label                         bool
}

// dbCharged is a charge batch's outcome as the commit counts it.
type dbCharged struct {
	RefusedRows, RefusedUnits int
}

func init() {
	beam.RegisterType(reflect.TypeOf((*DBPart)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*dbPlan)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*sinkPlan)(nil)).Elem())
	register.Emitter1[DBPart]()
	register.DoFn3x1[context.Context, DBPart, func(Row), error](&readTableFn{})
	register.Function1x2[Release, string, Release](keyBatch)
	register.Emitter2[string, Release]()
	register.Iter1[*Release]()
	register.DoFn5x1[context.Context, string, func(*Release) bool, func(Release), func(Staged), error](&chargeFn{})
	register.DoFn4x1[context.Context, int, func(*Release) bool, func(Staged), error](&writeTableFn{})
	register.DoFn4x1[context.Context, int, func(*Staged) bool, func(Summary), error](&commitTableFn{})
}

// tableName splits db.table (or table, in the DSN's database).
func tableName(dsn, table string) (db, name string, err error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", "", fmt.Errorf("the DSN: %w", err)
	}
	db, name = cfg.DBName, table
	if i := strings.Index(table, "."); i >= 0 {
		db, name = table[:i], table[i+1:]
	}
	if db == "" || name == "" {
		return "", "", fmt.Errorf("table %q: name it as db.table or put the database in the DSN (user:pass@tcp(host:port)/db)", table)
	}
	return db, name, nil
}

func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

func quoteString(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", "''") + "'"
}

func (p dbPlan) qualified() string { return quoteIdent(p.Database) + "." + quoteIdent(p.Table) }

// planSource connects to the server and finds the source's columns, primary key, budget and parts.
func planSource(ctx context.Context, src DBSource, label, job string) (dbPlan, []DBPart, error) {
	p := dbPlan{DSN: src.DSN, Label: label, Job: job, ChargeBatch: src.ChargeBatch}
	if p.ChargeBatch <= 0 {
		p.ChargeBatch = 1000
	}
	var err error
	if p.Database, p.Table, err = tableName(src.DSN, src.Table); err != nil {
		return p, nil, err
	}
	db, err := sql.Open("mysql", src.DSN)
	if err != nil {
		return p, nil, err
	}
	defer db.Close()
	info, err := p.readColumns(ctx, db)
	if err != nil {
		return p, nil, err
	}
	column := func(what, c string) (string, error) {
		if i, ok := info[strings.ToLower(c)]; ok {
			return i.Name, nil
		}
		return "", fmt.Errorf("%s: table %s.%s has no column %q", what, p.Database, p.Table, c)
	}
	if len(src.Features) == 0 {
		return p, nil, errors.New("--features: name the features column (a packed vector) or columns")
	}
	for _, f := range src.Features {
		c, err := column("--features", f)
		if err != nil {
			return p, nil, err
		}
		p.Features = append(p.Features, c)
	}
	if t := info[strings.ToLower(p.Features[0])].DataType; len(p.Features) == 1 && (strings.Contains(t, "blob") || strings.Contains(t, "binary")) {
		p.Packed = true
	}
	if label != "" {
		if p.Label, err = column("--label", label); err != nil {
			return p, nil, err
		}
	}
	if err := p.readPrimaryKey(ctx, db, info); err != nil {
		return p, nil, err
	}
	if err := p.readUnits(ctx, db, column); err != nil {
		return p, nil, err
	}
	switch {
	case p.Key != nil:
		p.OrderBy = orderBy(p.Key)
	case p.Units != nil:
		units := make([]keyColumn, len(p.Units))
		for i, u := range p.Units {
			units[i] = info[strings.ToLower(u)].keyColumn()
		}
		p.OrderBy = orderBy(units)
	}
	n := src.Partitions
	if n <= 0 {
		n = 4
	}
	parts, err := partition(ctx, db, p, n)
	return p, parts, err
}

// readColumns reads the table's columns from information_schema, by lower-case name, and sets
// p.Database and p.Table to the names as the server spells them.
func (p *dbPlan) readColumns(ctx context.Context, db *sql.DB) (map[string]columnInfo, error) {
	info := map[string]columnInfo{}
	rows, err := db.QueryContext(ctx, `SELECT table_schema, table_name, column_name, data_type, column_type, collation_name FROM information_schema.columns
		WHERE lower(table_schema) = lower(?) AND lower(table_name) = lower(?)`, p.Database, p.Table)
	if err != nil {
		return nil, fmt.Errorf("reading %s.%s's columns: %w", p.Database, p.Table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var c columnInfo
		var collation sql.NullString
		if err := rows.Scan(&p.Database, &p.Table, &c.Name, &c.DataType, &c.ColumnType, &collation); err != nil {
			return nil, err
		}
		c.DataType, c.Collation = strings.ToLower(c.DataType), collation.String
		info[strings.ToLower(c.Name)] = c
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(info) == 0 {
		return nil, fmt.Errorf("there is no table %s.%s (or this user may not see it)", p.Database, p.Table)
	}
	return info, nil
}

// readPrimaryKey sets p.Key to the table's primary key columns, in the key's order (none: nil).
func (p *dbPlan) readPrimaryKey(ctx context.Context, db *sql.DB, info map[string]columnInfo) error {
	// SHOW KEYS lists a key's columns in their order (Seq_in_index).
	keys, err := queryStrings(ctx, db, "SHOW KEYS FROM "+p.qualified()+" WHERE Key_name = 'PRIMARY'", 4)
	if err != nil {
		return fmt.Errorf("reading %s.%s's primary key: %w", p.Database, p.Table, err)
	}
	for _, k := range keys {
		c, ok := info[strings.ToLower(k)]
		if !ok {
			return fmt.Errorf("%s.%s's primary key names column %q, which information_schema does not list", p.Database, p.Table, k)
		}
		p.Key = append(p.Key, c.keyColumn())
	}
	return nil
}

// readUnits sets p.Units to the table's privacy units' columns (column spells them as the table
// does) when the ledger protects it. Only a DBA may read the ledger. Another user is refused, and then
// reads the table as any client does: the server refuses them a protected table's raw rows (the
// analyst role), so what they can read is not protected.
func (p *dbPlan) readUnits(ctx context.Context, db *sql.DB, column func(what, c string) (string, error)) error {
	budget, err := queryStrings(ctx, db, fmt.Sprintf("SELECT eps_total, unit_columns FROM ldpsql_catalog.ldp_budget WHERE lower(db) = lower(%s) AND lower(table_name) = lower(%s)",
		quoteString(p.Database), quoteString(p.Table)), -1)
	if err != nil && !strings.Contains(strings.ToLower(err.Error()), "denied") {
		return fmt.Errorf("reading the ledger: %w", err)
	}
	if len(budget) != 2 {
		return nil
	}
	if err := json.Unmarshal([]byte(budget[1]), &p.Units); err != nil || len(p.Units) == 0 {
		return fmt.Errorf("the unit columns of %s.%s, %q: %v", p.Database, p.Table, budget[1], err)
	}
	for i, u := range p.Units {
		c, err := column("a unit column", u)
		if err != nil {
			return err
		}
		p.Units[i] = c
	}
	return nil
}

// queryStrings runs q and returns its first row's cells as text (column col of every row instead,
// when col ≥ 0).
func queryStrings(ctx context.Context, db *sql.DB, q string, col int) ([]string, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []string
	for rows.Next() {
		cells := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range cells {
			ptrs[i] = &cells[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		if col >= 0 {
			out = append(out, cells[col].String)
			continue
		}
		for _, c := range cells {
			out = append(out, c.String)
		}
		break
	}
	return out, rows.Err()
}

// readTableFn reads one part of the source, in key order, as Rows: the key's values as the id, the
// unit key (a protected table's) and the charge batch the row belongs to.
type readTableFn struct {
	Plan dbPlan
	K    int

	db    *sql.DB
	parts fanIn[Row] // the parts of a bundle, read at once
}

func (f *readTableFn) Setup() error {
	var err error
	f.db, err = sql.Open("mysql", f.Plan.DSN)
	f.parts.setup()
	return err
}

func (f *readTableFn) Teardown() error { return f.db.Close() }

func (f *readTableFn) ProcessElement(ctx context.Context, part DBPart, emit func(Row)) error {
	return f.parts.start(func(send func(Row)) error { return f.read(ctx, part, send) }, emit)
}

func (f *readTableFn) FinishBundle(emit func(Row)) error { return f.parts.drain(emit) }

// read reads one part, in order.
func (f *readTableFn) read(ctx context.Context, part DBPart, emit func(Row)) error {
	p := f.Plan
	var cols []string
	for _, k := range p.Key {
		cols = append(cols, quoteIdent(k.Name))
	}
	nk := len(cols)
	for _, c := range p.Features {
		cols = append(cols, quoteIdent(c))
	}
	if p.Label != "" {
		cols = append(cols, quoteIdent(p.Label))
	}
	unitAt := len(cols)
	if p.Units != nil {
		// The server names the unit (engine.UnitKey, whatever the columns' types), so that its charge
		// falls on the unit its own releases of the row are charged to.
		units := make([]string, len(p.Units))
		for i, u := range p.Units {
			units[i] = quoteIdent(u)
		}
		cols = append(cols, "LDP_UNIT_KEY("+strings.Join(units, ", ")+")")
	}
	q := fmt.Sprintf("SELECT %s FROM %s", strings.Join(cols, ", "), p.qualified())
	if part.Where != "" {
		q += " WHERE " + part.Where
	}
	if p.OrderBy != "" {
		q += " ORDER BY " + p.OrderBy
	}
	rows, err := f.db.QueryContext(ctx, q)
	if err != nil {
		return fmt.Errorf("reading %s.%s: %w", p.Database, p.Table, err)
	}
	defer rows.Close()
	cells := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range cells {
		ptrs[i] = &cells[i]
	}
	for n := 0; rows.Next(); n++ {
		if err := rows.Scan(ptrs...); err != nil {
			return fmt.Errorf("reading %s.%s: %w", p.Database, p.Table, err)
		}
		countRead.Add(1)
		r := Row{Batch: fmt.Sprintf("%s/p%d/b%d", p.Job, part.Index, n/p.ChargeBatch)}
		r.Where = fmt.Sprintf("%s.%s row %d", p.Database, p.Table, n+1)
		if nk > 0 {
			r.ID = make([]string, nk)
			for i := range r.ID {
				r.ID[i] = string(cells[i])
			}
			r.Where = p.rowWhere(r.ID)
		}
		if err := f.parse(&r, cells[nk:unitAt], cells[unitAt:]); err != nil {
			r.Err = r.Where + ": " + err.Error()
		}
		emit(r)
	}
	return rows.Err()
}

// rowWhere names a row by its key: "db.t row id = 7", "db.t row (name, n) = (alice, 2)".
func (p dbPlan) rowWhere(id []string) string {
	if len(id) == 1 {
		return fmt.Sprintf("%s.%s row %s = %s", p.Database, p.Table, p.Key[0].Name, id[0])
	}
	names := make([]string, len(p.Key))
	for i, k := range p.Key {
		names[i] = k.Name
	}
	return fmt.Sprintf("%s.%s row (%s) = (%s)", p.Database, p.Table, strings.Join(names, ", "), strings.Join(id, ", "))
}

// parse reads a row's features, label and unit key from its cells (text, as the server sends them).
func (f *readTableFn) parse(r *Row, cells, units []sql.RawBytes) error {
	p := f.Plan
	if p.Packed {
		b := cells[0]
		if b == nil {
			return fmt.Errorf("%s is NULL", p.Features[0])
		}
		if len(b)%4 != 0 {
			return fmt.Errorf("%s has %d bytes, not a packed vector of float32s", p.Features[0], len(b))
		}
		r.X = make([]float32, len(b)/4)
		for i := range r.X {
			r.X[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	} else {
		r.X = make([]float32, len(p.Features))
		for i, c := range p.Features {
			if cells[i] == nil {
				return fmt.Errorf("%s is NULL", c)
			}
			v, err := strconv.ParseFloat(string(cells[i]), 32)
			if err != nil {
				return fmt.Errorf("%s, %q, is not a number", c, cells[i])
			}
			r.X[i] = float32(v)
		}
	}
	if p.Label != "" {
		c := cells[len(p.Features)]
		if c == nil {
			return fmt.Errorf("label %s is NULL", p.Label)
		}
		y, err := strconv.Atoi(string(c))
		if err != nil || y < 0 || y >= f.K {
			return fmt.Errorf("label %s, %q, is not a class 0..%d", p.Label, c, f.K-1)
		}
		r.Label = y
	}
	if len(units) > 0 {
		switch {
		case units[0] == nil:
			return fmt.Errorf("a unit column (%s) is NULL, which names no unit", strings.Join(p.Units, ", "))
		case len(units[0]) == 0:
			return fmt.Errorf("unit column %s is empty, which ldp_charge_external does not take as a unit", p.Units[0])
		}
		r.Unit = string(units[0])
	}
	return nil
}

func keyBatch(r Release) (string, Release) { return r.Batch, r }

// chargeFn charges one batch's releases to their units (CALL ldp_charge_external) and passes on
// those whose unit the server charged (now, or in an earlier try of the batch); the others are left
// out and counted.
type chargeFn struct {
	Plan       dbPlan
	EpsX, EpsY float64
	db         *sql.DB
}

func (f *chargeFn) Setup() error {
	var err error
	f.db, err = sql.Open("mysql", f.Plan.DSN)
	return err
}

func (f *chargeFn) Teardown() error { return f.db.Close() }

func (f *chargeFn) ProcessElement(ctx context.Context, batch string, rels func(*Release) bool, emit func(Release), emitCount func(Staged)) error {
	var all []Release
	var units []string
	var r Release
	for rels(&r) {
		all = append(all, r)
		units = append(units, r.Unit)
	}
	raw, _ := json.Marshal(units)
	q := fmt.Sprintf("CALL ldp_charge_external(%s, %s, %s, %s, %s)", quoteString(f.Plan.Database+"."+f.Plan.Table), quoteString(batch),
		strconv.FormatFloat(f.EpsX, 'g', -1, 64), strconv.FormatFloat(f.EpsY, 'g', -1, 64), quoteString(string(raw)))
	res, err := f.db.QueryContext(ctx, q)
	if err != nil {
		return fmt.Errorf("charging batch %s: %w", batch, err)
	}
	defer res.Close()
	status := map[string]string{}
	for res.Next() {
		var u, s string
		var n int64
		if err := res.Scan(&u, &n, &s); err != nil {
			return fmt.Errorf("charging batch %s: %w", batch, err)
		}
		status[u] = s
	}
	if err := res.Err(); err != nil {
		return fmt.Errorf("charging batch %s: %w", batch, err)
	}
	var count dbCharged
	for _, r := range all {
		switch status[r.Unit] {
		case "charged", "already charged":
			emit(r)
		case "refused":
			count.RefusedRows++
		default:
			return fmt.Errorf("charging batch %s: the server said nothing of unit %s", batch, r.Unit)
		}
	}
	for _, s := range status {
		if s == "refused" {
			count.RefusedUnits++
		}
	}
	chargedRows.Add(int64(len(all) - count.RefusedRows))
	emitCount(Staged{Marker: true, RefusedRows: count.RefusedRows, RefusedUnits: count.RefusedUnits})
	return nil
}

// ChargeReleases charges releases (Releases whose Unit and Batch readTableFn set) to their units
// through the server, a batch per call, and returns those charged and the counts of those left out.
func chargeReleases(s beam.Scope, releases beam.PCollection, plan dbPlan, epsX, epsY float64) (charged, counts beam.PCollection) {
	s = s.Scope("ldpsql.Charge")
	return beam.ParDo2(s, &chargeFn{Plan: plan, EpsX: epsX, EpsY: epsY}, beam.GroupByKey(s, beam.ParDo(s, keyBatch, releases)))
}

// planSink checks the destination (a new table; the mechanism registered on that server with the
// model the releases are made with, as import-releases checks) and creates the staging table with
// the metadata, dropping one a crashed try of the same job left.
func planSink(ctx context.Context, dst DBSink, spec Spec, key []keyColumn, source, job string) (sinkPlan, error) {
	sp := sinkPlan{DSN: dst.DSN, Key: key, Label: spec.Label != ""}
	var err error
	if sp.Database, sp.Table, err = tableName(dst.DSN, dst.Table); err != nil {
		return sp, err
	}
	sp.Staging = "_ldpsql_etl_" + job
	rel, err := spec.Releaser()
	if err != nil {
		return sp, err
	}
	db, err := sql.Open("mysql", dst.DSN)
	if err != nil {
		return sp, err
	}
	defer db.Close()
	exists, err := queryStrings(ctx, db, fmt.Sprintf("SELECT table_name FROM information_schema.tables WHERE lower(table_schema) = lower(%s) AND lower(table_name) = lower(%s)",
		quoteString(sp.Database), quoteString(sp.Table)), 0)
	if err != nil {
		return sp, fmt.Errorf("--to-db: %w", err)
	}
	if len(exists) > 0 {
		return sp, fmt.Errorf("--into: table %s.%s exists: write to a new table", sp.Database, sp.Table)
	}
	m := rel.M.File
	got, err := queryStrings(ctx, db, "SELECT k.description, SHA2(m.artifact, 256) FROM ldpsql_catalog.ldp_mechanisms k "+
		"LEFT JOIN ldpsql_catalog.ldp_models m ON m.name = k.model WHERE k.name = "+quoteString(m.Name), -1)
	if err != nil {
		return sp, fmt.Errorf("--to-db: looking up mechanism %q: %w", m.Name, err)
	}
	if len(got) != 2 {
		return sp, fmt.Errorf("--to-db: mechanism %q is not registered on the destination server, so nothing there could train on these releases", m.Name)
	}
	var desc sdk.Description
	if err := json.Unmarshal([]byte(got[0]), &desc); err != nil {
		return sp, fmt.Errorf("--to-db: mechanism %q: its description: %w", m.Name, err)
	}
	if strings.ToLower(got[1]) != m.ArtifactSHA256 {
		return sp, fmt.Errorf("--to-db: the destination's mechanism %q has a model whose SHA-256 is %q, the mechanism file's %s: release with a file exported from that server",
			m.Name, got[1], m.ArtifactSHA256)
	}
	meta := client.TableMeta{Source: source, Mechanism: m.Name, Randomiser: rel.Randomiser, Epsilon: rel.Eps, Lambda: 1, EpsX: rel.EpsX, EpsY: rel.EpsY,
		FeaturesCol: "features", OutputDim: m.OutputDim, OutputSet: desc.OutputSet.Describe(), MechanismSHA256: m.SHA256, ModelSHA256: m.ArtifactSHA256}
	// The source's key, column for column (as ldp_privatize's destination), or a generated row_id.
	var defs, keyNames []string
	for _, k := range key {
		if n := strings.ToLower(k.Name); n == "features" || n == "label" {
			return sp, fmt.Errorf("--to-db: the source's key column %s would be the destination's %s column: rename it, or release into files (--out)", k.Name, n)
		}
		def := quoteIdent(k.Name) + " " + k.Type
		if k.Collation != "" {
			def += " COLLATE " + k.Collation
		}
		defs = append(defs, def+" NOT NULL")
		keyNames = append(keyNames, quoteIdent(k.Name))
	}
	if key == nil {
		defs, keyNames = []string{"row_id BIGINT NOT NULL AUTO_INCREMENT"}, []string{"row_id"}
	}
	defs = append(defs, "features LONGBLOB NOT NULL")
	if sp.Label {
		meta.Lambda, meta.K, meta.LabelCol = rel.Lambda, rel.K, "label"
		defs = append(defs, "label INT NOT NULL")
	}
	defs = append(defs, "PRIMARY KEY ("+strings.Join(keyNames, ", ")+")")
	comment, _ := json.Marshal(map[string]any{"ldp_privatize": meta})
	staging := quoteIdent(sp.Database) + "." + quoteIdent(sp.Staging)
	// A staging table of this job is what a killed try of it left: its releases never became final.
	for _, q := range []string{"DROP TABLE IF EXISTS " + staging, fmt.Sprintf("CREATE TABLE %s (%s) COMMENT=%s", staging, strings.Join(defs, ", "), quoteString(string(comment)))} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return sp, fmt.Errorf("--to-db: %w", err)
		}
	}
	return sp, nil
}

// writeTableFn inserts one shard's releases into the staging table.
type writeTableFn struct {
	Sink sinkPlan
	db   *sql.DB
}

func (f *writeTableFn) Setup() error {
	var err error
	f.db, err = sql.Open("mysql", f.Sink.DSN)
	return err
}

func (f *writeTableFn) Teardown() error { return f.db.Close() }

func (f *writeTableFn) ProcessElement(ctx context.Context, _ int, rels func(*Release) bool, emit func(Staged)) error {
	var cols []string
	for _, k := range f.Sink.Key {
		cols = append(cols, quoteIdent(k.Name))
	}
	cols = append(cols, "features")
	if f.Sink.Label {
		cols = append(cols, "label")
	}
	head := fmt.Sprintf("INSERT INTO %s.%s (%s) VALUES ", quoteIdent(f.Sink.Database), quoteIdent(f.Sink.Staging), strings.Join(cols, ", "))
	var sb strings.Builder
	n, pending := 0, 0
	flush := func() error {
		if pending == 0 {
			return nil
		}
		if _, err := f.db.ExecContext(ctx, sb.String()); err != nil {
			return fmt.Errorf("writing the releases: %w", err)
		}
		sb.Reset()
		pending = 0
		return nil
	}
	packed := []byte{}
	var r Release
	for rels(&r) {
		if len(r.ID) != len(f.Sink.Key) {
			return fmt.Errorf("a release has %d key values for the %d key columns", len(r.ID), len(f.Sink.Key))
		}
		if pending == 0 {
			sb.WriteString(head)
		} else {
			sb.WriteByte(',')
		}
		sb.WriteByte('(')
		for i, k := range f.Sink.Key {
			sb.WriteString(k.literal([]byte(r.ID[i])))
			sb.WriteString(", ")
		}
		packed = packed[:0]
		for _, v := range r.Z {
			packed = binary.LittleEndian.AppendUint32(packed, math.Float32bits(v))
		}
		fmt.Fprintf(&sb, "X'%s'", hex.EncodeToString(packed))
		if f.Sink.Label {
			fmt.Fprintf(&sb, ", %d", r.Label)
		}
		sb.WriteByte(')')
		n++
		if pending++; pending == 500 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	emit(Staged{Rows: n})
	return nil
}

// commitTableFn renames the staging table to the destination once every shard is written, then
// commits the bad rows' file and the summary into the report directory (Out.Dir).
type commitTableFn struct {
	Sink sinkPlan
	Out  Output
}

func (f *commitTableFn) ProcessElement(ctx context.Context, _ int, staged func(*Staged) bool, emit func(Summary)) error {
	db, err := sql.Open("mysql", f.Sink.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	sum := Summary{Table: f.Sink.Database + "." + f.Sink.Table}
	if _, err := db.ExecContext(ctx, fmt.Sprintf("RENAME TABLE %s.%s TO %s.%s", quoteIdent(f.Sink.Database), quoteIdent(f.Sink.Staging),
		quoteIdent(f.Sink.Database), quoteIdent(f.Sink.Table))); err != nil {
		return fmt.Errorf("committing %s: %w", sum.Table, err)
	}
	if err := commitStaged(ctx, f.Out, staged, &sum); err != nil {
		return err
	}
	emit(sum)
	return nil
}

// writeTable writes releases into the sink's staging table (in out.Shards parts, in parallel), the
// bad rows into out.Dir, and commits: the staging table renamed to the destination, then the files.
func writeTable(s beam.Scope, releases, bad beam.PCollection, counts []beam.PCollection, sink sinkPlan, out Output) beam.PCollection {
	s = s.Scope("ldpsql.WriteTable")
	keyed := beam.ParDo(s, &shardFn{Shards: max(1, out.Shards)}, releases)
	written := beam.ParDo(s, &writeTableFn{Sink: sink}, beam.GroupByKey(s, keyed))
	badWritten := beam.ParDo(s, &writeBadFn{Out: out}, beam.GroupByKey(s, beam.ParDo(s, keyBad, bad)))
	marker := beam.Create(s, Staged{Marker: true})
	all := beam.Flatten(s, append([]beam.PCollection{written, badWritten, marker}, counts...)...)
	return beam.ParDo(s, &commitTableFn{Sink: sink, Out: out}, beam.GroupByKey(s, beam.ParDo(s, keyStaged, all)))
}

// dbPipeline builds a job that reads From (and writes To, or files): ReadTable, PrivatizeWithErrors,
// the charge when the source is protected, then the writer.
func (j Job) dbPipeline(plan dbPlan, parts []DBPart, sink *sinkPlan) (*beam.Pipeline, error) {
	rel, err := j.Spec.Releaser()
	if err != nil {
		return nil, err
	}
	p, s := beam.NewPipelineWithRoot()
	read := s.Scope("ldpsql.ReadTable")
	rows := beam.ParDo(read, &readTableFn{Plan: plan, K: j.Spec.K}, beam.Reshuffle(read, beam.CreateList(read, parts)))
	releases, bad := PrivatizeWithErrors(s, rows, j.Spec)
	counts := []beam.PCollection{beam.Create(s, Staged{Marker: true, Parts: len(parts)})}
	if plan.Units != nil {
		var c beam.PCollection
		releases, c = chargeReleases(s, releases, plan, rel.EpsX, rel.EpsY)
		counts = append(counts, c)
	}
	if sink != nil {
		writeTable(s, releases, bad, counts, *sink, j.Out)
	} else {
		out := j.Out
		if out.ID == nil {
			for _, k := range plan.Key {
				out.ID = append(out.ID, k.Name)
			}
		}
		writeReleases(s, releases, bad, counts, j.Spec, out)
	}
	return p, nil
}

// dropStaging drops the staging table of a job that failed: its releases never became final.
func dropStaging(sink sinkPlan) {
	db, err := sql.Open("mysql", sink.DSN)
	if err != nil {
		return
	}
	defer db.Close()
	_, _ = db.Exec("DROP TABLE IF EXISTS " + quoteIdent(sink.Database) + "." + quoteIdent(sink.Staging))
}
