package udf

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"

	"github.com/ldpsql/ldpsql/client"
	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/plugins/host"
	"github.com/ldpsql/ldpsql/plugins/sdk"
	"github.com/ldpsql/ldpsql/training/diagnostics"
)

// The ldp_ stored procedures. Those that change the catalog (register, drop, fit) are AdminOnly: a user
// needs root, or an explicit GRANT EXECUTE ON PROCEDURE ldpsql.<name> TO user, to call them.

// procedures carries what the procedures need.
type procedures struct {
	e     *engine.Engine
	mechs *Mechanisms
	log   func(format string, args ...any)
}

var nameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

func checkName(what, name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%s %q is not a valid name (letters, digits and _, at most 64, not starting with a digit)", what, name)
	}
	return nil
}

func user(ctx *sql.Context) string { return engine.SessionUser(ctx) }

func (p *procedures) details() []sql.ExternalStoredProcedureDetails {
	describe := sql.Schema{
		{Name: "mechanism", Type: types.LongText},
		{Name: "plugin", Type: types.LongText},
		{Name: "input_dim", Type: types.Int64},
		{Name: "output_dim", Type: types.Int64},
		{Name: "output_set", Type: types.LongText},
		{Name: "ready", Type: types.Boolean},
	}
	return []sql.ExternalStoredProcedureDetails{
		{Name: "ldp_register_mechanism", Schema: describe, AdminOnly: true, Function: p.register},
		{Name: "ldp_drop_mechanism", Schema: sql.Schema{{Name: "dropped", Type: types.LongText}}, AdminOnly: true, Function: p.drop},
		{Name: "ldp_fit_mechanism", Schema: append(describe.Copy(), &sql.Column{Name: "training_rows", Type: types.Int64}), AdminOnly: true, Function: p.fit},
		{Name: "ldp_privatize", Schema: sql.Schema{
			{Name: "dst_table", Type: types.LongText},
			{Name: "rows", Type: types.Int64},
			{Name: "seconds", Type: types.Float64},
			{Name: "rows_per_second", Type: types.Float64},
			{Name: "eps_x", Type: types.Float64},
			{Name: "eps_y", Type: types.Float64},
		}, Function: p.privatize},
		{Name: "ldp_export", Schema: exportSchema, Function: p.export},
	}
}

func describeRow(name, plugin string, d sdk.Description) sql.Row {
	return sql.Row{name, plugin, int64(d.InputDim), int64(d.OutputDim), d.OutputSet.Describe(), d.Ready()}
}

// register is CALL ldp_register_mechanism('name', '/abs/path', 'sha256hex').
func (p *procedures) register(ctx *sql.Context, name, path, digest string) (sql.RowIter, error) {
	const fn = "ldp_register_mechanism"
	if err := checkName(fn+": mechanism", name); err != nil {
		return nil, err
	}
	if err := checkBinary(fn, path); err != nil {
		return nil, err
	}
	digest = strings.ToLower(strings.TrimSpace(digest))
	got, err := host.Digest(path)
	if err != nil {
		return nil, fmt.Errorf("%s: reading %s: %w", fn, path, err)
	}
	if got != digest {
		return nil, fmt.Errorf("%s: %s has SHA-256 %s, not the %q given: nothing registered", fn, path, got, digest)
	}
	if _, err := p.mechs.catalog.Mechanism(ctx, name); err == nil {
		return nil, fmt.Errorf("%s: a mechanism called %q is already registered (CALL ldp_drop_mechanism('%s') first)", fn, name, name)
	}
	desc, err := host.Handshake(ctx, path, digest)
	if err != nil {
		return nil, fmt.Errorf("%s: %s did not start as an ldpsql encoder plugin: %w; nothing registered", fn, path, err)
	}
	if err := desc.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %s describes itself invalidly: %w; nothing registered", fn, path, err)
	}
	raw, err := json.Marshal(desc)
	if err != nil {
		return nil, err
	}
	rec := engine.Mechanism{Name: name, Plugin: "external", Path: path, SHA256: digest, Description: raw,
		RegisteredBy: user(ctx), RegisteredAt: time.Now()}
	if err := p.mechs.catalog.RegisterMechanism(ctx, rec); err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	p.mechs.forget(name)
	return sql.RowsToRowIter(describeRow(name, rec.Plugin, desc)), nil
}

// checkBinary gives a clear error for a path that cannot be a plugin binary.
func checkBinary(fn, path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%s: plugin path %q must be absolute", fn, path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: plugin binary %s: %w", fn, path, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s: plugin binary %s is not an executable file", fn, path)
	}
	return nil
}

// drop is CALL ldp_drop_mechanism('name').
func (p *procedures) drop(ctx *sql.Context, name string) (sql.RowIter, error) {
	if err := p.mechs.catalog.DropMechanism(ctx, name); err != nil {
		return nil, fmt.Errorf("ldp_drop_mechanism: %w", err)
	}
	p.mechs.forget(name)
	return sql.RowsToRowIter(sql.Row{name}), nil
}

// fit is CALL ldp_fit_mechanism('name', 'plugin', 'aux_table', 'features_col', '{params}'): the
// plugin (a registered mechanism whose encoder can fit, e.g. the built-in 'pca' or 'identity') is
// fitted on the auxiliary table, the model is stored in ldp_models and mechanism 'name' is registered
// with it.
func (p *procedures) fit(ctx *sql.Context, name, plugin, auxTable, featuresCol, params string) (sql.RowIter, error) {
	const fn = "ldp_fit_mechanism"
	if err := checkName(fn+": mechanism", name); err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(params), &obj); err != nil {
		return nil, fmt.Errorf("%s: params %q are not a JSON object: %v", fn, params, err)
	}
	// eps_target and k_target are the diagnostics', the rest the plugin's; all are recorded.
	pluginParams, diag, err := splitDiagnosticParams(fn, params)
	if err != nil {
		return nil, err
	}
	base, err := p.mechs.catalog.Mechanism(ctx, plugin)
	if err != nil {
		return nil, fmt.Errorf("%s: plugin: %w", fn, err)
	}
	var baseDesc sdk.Description
	if err := json.Unmarshal(base.Description, &baseDesc); err != nil {
		return nil, err
	}
	if !baseDesc.CanFit {
		return nil, fmt.Errorf("%s: mechanism %q cannot be fitted (its encoder has no Fit)", fn, plugin)
	}
	if _, err := p.mechs.catalog.Mechanism(ctx, name); err == nil {
		return nil, fmt.Errorf("%s: a mechanism called %q is already registered (CALL ldp_drop_mechanism('%s') first)", fn, name, name)
	}
	reader, err := p.newVectorReader(ctx, fn, auxTable, featuresCol)
	if err != nil {
		return nil, err
	}
	defer reader.close()
	// Peek the first batch to learn the input dimension the plugin is told.
	first, err := reader.next()
	if err != nil {
		return nil, err
	}
	inputDim := len(first[0])
	pending := first
	// The diagnostics evaluate the fitted mechanism on a seeded sample of the rows streamed.
	sample := diagnostics.NewReservoir(diagnostics.MaxSample, diagnostics.DefaultSeed)
	stream := func() ([][]float32, error) {
		b := pending
		pending = nil
		if b == nil {
			var err error
			if b, err = reader.next(); err != nil {
				return nil, err
			}
		}
		for _, v := range b {
			sample.Add(v)
		}
		return b, nil
	}
	fitter, err := p.mechs.host.Get(ctx, host.Spec{Name: "fit:" + name, Path: base.Path, SHA256: base.SHA256})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	start := time.Now()
	artifact, err := fitter.Fit(ctx, pluginParams, inputDim, stream)
	if err != nil {
		return nil, fmt.Errorf("%s: fitting %s on %s: %w", fn, plugin, auxTable, err)
	}
	rows := reader.rows
	p.log("ldp_fit_mechanism: fitted %s on %d rows of %s in %s", plugin, rows, auxTable, time.Since(start).Round(time.Millisecond))
	desc, err := p.registerModel(ctx, name, base.Plugin, base, qualifiedTable(ctx, auxTable), featuresCol, rows, json.RawMessage(params), artifact, user(ctx))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	p.diagnoseAfterFit(ctx, fn, name, sample.Rows(), auxTable, featuresCol, diag)
	return sql.RowsToRowIter(append(describeRow(name, base.Plugin, desc), rows)), nil
}

// vectorReader streams a features column in batches of BatchSize, checking that every vector is finite
// and has the dimension of the first; NULLs are skipped.
type vectorReader struct {
	ctx            *sql.Context
	fn, table, col string
	iter           sql.RowIter
	dim            int
	rows           int64
}

func (p *procedures) newVectorReader(ctx *sql.Context, fn, table, col string) (*vectorReader, error) {
	iter, err := p.query(ctx, fmt.Sprintf("SELECT %s FROM %s", quoteCol(col), quoteTable(table)))
	if err != nil {
		return nil, fmt.Errorf("%s: reading %s.%s: %w", fn, table, col, err)
	}
	return &vectorReader{ctx: ctx, fn: fn, table: table, col: col, iter: iter}, nil
}

// next returns the next batch, or io.EOF after the last; a column with no vector at all is an error.
func (r *vectorReader) next() ([][]float32, error) {
	var batch [][]float32
	for len(batch) < BatchSize {
		row, err := r.iter.Next(r.ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if row[0] == nil {
			continue
		}
		v, err := toVector(r.ctx, r.fn, r.col, row[0])
		if err != nil {
			return nil, err
		}
		if r.dim == 0 {
			r.dim = len(v)
		}
		if len(v) != r.dim {
			return nil, fmt.Errorf("%s: row %d of %s has %d features, earlier rows %d", r.fn, r.rows+1, r.table, len(v), r.dim)
		}
		if err := checkFinite(r.fn, r.col, v); err != nil {
			return nil, err
		}
		batch = append(batch, v)
		r.rows++
	}
	if len(batch) == 0 {
		if r.rows == 0 {
			return nil, fmt.Errorf("%s: %s has no non-NULL %s", r.fn, r.table, r.col)
		}
		return nil, io.EOF
	}
	return batch, nil
}

func (r *vectorReader) close() { _ = r.iter.Close(r.ctx) }

// query runs a statement as the calling user, so its privileges apply to what a procedure reads. It
// runs outside the process list: GMS ends (and cancels) a connection's current query when a query
// finishes, which would cancel the procedure itself.
func (p *procedures) query(ctx *sql.Context, q string) (sql.RowIter, error) {
	_, iter, err := p.querySchema(ctx, q)
	return iter, err
}

// querySchema is query that also returns the result's schema.
func (p *procedures) querySchema(ctx *sql.Context, q string) (sql.Schema, sql.RowIter, error) {
	inner := ctx.WithContext(ctx.Context)
	inner.ProcessList = sql.EmptyProcessList{}
	schema, iter, _, err := p.e.GMS.Query(inner, q)
	return schema, iter, err
}

// columnTypes are the types of schema's columns: engine.UnitKey keys a unit column's value by its type
// (an insensitive collation folds spellings into one unit).
func columnTypes(schema sql.Schema) []sql.Type {
	out := make([]sql.Type, len(schema))
	for i, c := range schema {
		out[i] = c.Type
	}
	return out
}

func quoteCol(c string) string { return "`" + strings.ReplaceAll(c, "`", "``") + "`" }

// quoteTable quotes a table name that may be qualified by its database (db.table).
func quoteTable(t string) string {
	parts := strings.Split(t, ".")
	for i, p := range parts {
		parts[i] = quoteCol(p)
	}
	return strings.Join(parts, ".")
}

// PrivatizeMetadata is what ldp_privatize records in the destination table's comment, so later steps
// (training a classifier on it) know how the data were noised without the user repeating it. It is
// client.TableMeta, which the writers of such tables outside the server (import-releases, the Beam
// job's --to-db) share.
type PrivatizeMetadata = client.TableMeta

// privatizeMetadataOf returns what ldp_privatize recorded in table t's comment, or nil for a table it
// did not write.
func privatizeMetadataOf(t sql.Table) *PrivatizeMetadata {
	ct, ok := sql.GetUnderlyingTable(t).(sql.CommentedTable)
	if !ok {
		return nil
	}
	return ParsePrivatizeComment(ct.Comment())
}

// privatizeTmpPrefix starts the name of ldp_privatize's temporary destination (see dropLeftovers).
const privatizeTmpPrefix = engine.StagingPrefix

// privatize is CALL ldp_privatize('src', 'features_col', 'label_col', 'dst', eps, lambda, 'mechanism',
// 'randomiser', K). The features get eps_x = lambda·eps through the mechanism, the label eps_y =
// (1 − lambda)·eps through k-RR (label_col ” releases no label and spends all of eps on the features).
// The source streams in batches; the destination is written in one transaction into a temporary table
// renamed at the end, so a failure leaves no destination at all; a protected source's charges commit
// with that rename.
func (p *procedures) privatize(ctx *sql.Context, src, featuresCol, labelCol, dst string, eps, lambda float64, mechanism, randomiser string, k int64) (sql.RowIter, error) {
	const fn = "ldp_privatize"
	pp, err := p.privatizeParams(ctx, fn, eps, lambda, mechanism, randomiser, k, labelCol != "")
	if err != nil {
		return nil, err
	}
	dstDB, dstName := splitTable(ctx, dst)
	if err := checkName(fn+": destination table", dstName); err != nil {
		return nil, err
	}
	if exists, err := p.tableExists(ctx, dstDB, dstName); err != nil {
		return nil, err
	} else if exists {
		return nil, fmt.Errorf("%s: destination table %s already exists; nothing written", fn, dst)
	}
	srcDB, srcName := splitTable(ctx, src)
	srcTable, err := p.table(ctx, srcDB, srcName)
	if err != nil {
		return nil, fmt.Errorf("%s: source: %w", fn, err)
	}
	layout := privatizeDestination(ctx, srcTable, featuresCol, labelCol)
	meta := PrivatizeMetadata{Source: src, Mechanism: mechanism, Randomiser: pp.randomiser, Epsilon: eps, Lambda: lambda,
		EpsX: pp.epsX, EpsY: pp.epsY, FeaturesCol: featuresCol, OutputDim: pp.mech.desc.OutputDim,
		OutputSet: pp.mech.desc.OutputSet.Describe()}
	if pp.withLabel {
		meta.K, meta.LabelCol = int(k), labelCol
	} else {
		meta.Lambda = 1
	}
	if meta.MechanismSHA256, meta.ModelSHA256, err = p.mechanismDigests(ctx, mechanism); err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	tmpName, err := p.createStaging(ctx, fn, dstDB, dstName, layout, meta)
	if err != nil {
		return nil, err
	}
	dropTmp := func() { _ = p.exec(ctx, fmt.Sprintf("DROP TABLE IF EXISTS %s.%s", quoteCol(dstDB), quoteCol(tmpName))) }
	start := time.Now()
	var n int64
	var charges []engine.Charge
	nKeys := len(layout.keyCols)
	if b, protected := p.e.Ledger.Budget(engine.TableRef{Database: srcDB, Table: srcName}); protected {
		n, err = p.privatizeRowsLedger(ctx, fn, b, srcDB, srcName, layout.selectCols, nKeys, pp.withLabel, pp.mech, pp.randomiser, pp.epsX, pp.krr, dstDB, tmpName, &charges)
	} else {
		n, err = p.privatizeRows(ctx, fn, srcDB, srcName, layout.selectCols, nKeys, pp.withLabel, pp.mech, pp.randomiser, pp.epsX, pp.krr, dstDB, tmpName)
	}
	if err != nil {
		dropTmp()
		return nil, err
	}
	if err := p.nameDestination(ctx, fn, dst, dstDB, tmpName, dstName, charges); err != nil {
		dropTmp()
		return nil, err
	}
	// After the statements above, each of which clears the session's warnings.
	pp.mech.warnCaveat(ctx, pp.randomiser, pp.epsX)
	secs := time.Since(start).Seconds()
	p.log("ldp_privatize: wrote %d rows to %s in %.1f s (%.0f rows/s), eps_x = %g, eps_y = %g", n, dst, secs, float64(n)/secs, pp.epsX, pp.epsY)
	return sql.RowsToRowIter(sql.Row{dst, n, secs, float64(n) / secs, pp.epsX, pp.epsY}), nil
}

// privatizeParams is what ldp_privatize releases with: the mechanism and randomiser for the features at
// eps_x, and k-RR for the label at eps_y.
type privatizeParams struct {
	mech       *resolvedMechanism
	randomiser string
	krr        *mechanisms.KRR // nil without a label
	epsX, epsY float64
	withLabel  bool
}

// privatizeParams checks ldp_privatize's privacy parameters and resolves its mechanism.
func (p *procedures) privatizeParams(ctx *sql.Context, fn string, eps, lambda float64, mechanism, randomiser string, k int64, withLabel bool) (*privatizeParams, error) {
	if math.IsNaN(eps) || math.IsInf(eps, 0) || eps <= 0 {
		return nil, fmt.Errorf("%s: eps = %v must be a finite number > 0", fn, eps)
	}
	pp := &privatizeParams{epsX: eps, withLabel: withLabel}
	if withLabel {
		if !(lambda > 0 && lambda < 1) {
			return nil, fmt.Errorf("%s: lambda = %v must be in (0, 1): eps_x = lambda·eps goes to the features, eps_y = (1-lambda)·eps to the label", fn, lambda)
		}
		if k < 2 {
			return nil, fmt.Errorf("%s: K = %d must be at least 2", fn, k)
		}
		pp.epsX, pp.epsY = splitEpsilon(eps, lambda)
	}
	pp.randomiser = strings.ToLower(randomiser)
	if pp.randomiser == "" {
		pp.randomiser = mechanisms.RandomiserLaplace
	}
	var err error
	if pp.mech, err = p.mechs.resolve(ctx, mechanism); err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	if _, err := pp.mech.randomiser(pp.randomiser, pp.epsX); err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	if withLabel {
		if pp.krr, err = mechanisms.NewKRR(pp.epsY, int(k)); err != nil {
			return nil, fmt.Errorf("%s: label: %w", fn, err)
		}
	}
	return pp, nil
}

// destinationLayout is the columns ldp_privatize reads from its source and writes to its destination:
// the source's primary key (or a generated row_id), the released features and the released label.
type destinationLayout struct {
	keyCols    []*sql.Column // the source's primary key (none: row_id is generated)
	selectCols []string      // what is read from the source: the key, the features, the label
	defs       []string      // the destination's column definitions
	keyNames   []string      // the destination's primary key
}

// privatizeDestination lays out ldp_privatize's destination for source table src.
func privatizeDestination(ctx *sql.Context, src sql.Table, featuresCol, labelCol string) destinationLayout {
	var l destinationLayout
	pk := src.(sql.PrimaryKeyTable).PrimaryKeySchema(ctx)
	for _, i := range pk.PkOrdinals {
		l.keyCols = append(l.keyCols, pk.Schema[i])
	}
	for _, c := range l.keyCols {
		l.selectCols = append(l.selectCols, quoteCol(c.Name))
		l.defs = append(l.defs, quoteCol(c.Name)+" "+c.Type.String()+" NOT NULL")
		l.keyNames = append(l.keyNames, quoteCol(c.Name))
	}
	if len(l.keyCols) == 0 {
		l.defs = append(l.defs, "`row_id` BIGINT NOT NULL")
		l.keyNames = append(l.keyNames, "`row_id`")
	}
	l.selectCols = append(l.selectCols, quoteCol(featuresCol))
	l.defs = append(l.defs, quoteCol(featuresCol)+" LONGBLOB NOT NULL")
	if labelCol != "" {
		l.selectCols = append(l.selectCols, quoteCol(labelCol))
		l.defs = append(l.defs, quoteCol(labelCol)+" INT NOT NULL")
	}
	return l
}

// createStaging creates ldp_privatize's temporary destination, with meta in its comment, and returns
// its name (engine.StagingPrefix: nothing can read it).
func (p *procedures) createStaging(ctx *sql.Context, fn, dstDB, dstName string, layout destinationLayout, meta PrivatizeMetadata) (string, error) {
	metaJSON, _ := json.Marshal(map[string]any{"ldp_privatize": meta})
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	tmpName := privatizeTmpPrefix + dstName + "_" + hex.EncodeToString(suffix[:])
	create := fmt.Sprintf("CREATE TABLE %s.%s (%s, PRIMARY KEY (%s)) COMMENT=%s", quoteCol(dstDB), quoteCol(tmpName),
		strings.Join(layout.defs, ", "), strings.Join(layout.keyNames, ", "), sqlString(string(metaJSON)))
	if err := p.exec(ctx, create); err != nil {
		return "", fmt.Errorf("%s: creating the destination: %w", fn, err)
	}
	return tmpName, nil
}

// nameDestination renames the temporary destination to dstName (dst as the user named it). A protected source's charges commit
// in the transaction that names the destination: the destination and every charge for its rows, or
// neither (engine/ledger_tx.go). On an error the caller drops the temporary table.
func (p *procedures) nameDestination(ctx *sql.Context, fn, dst, dstDB, tmpName, dstName string, charges []engine.Charge) error {
	rctx := ctx
	if len(charges) > 0 {
		rctx = engine.WithChargesOnWrite(ctx)
		if _, err := p.e.Ledger.Defer(rctx, user(ctx), charges); err != nil {
			return fmt.Errorf("%s: %w", fn, err)
		}
	}
	if err := p.renameIn(rctx, dstDB, tmpName, dstName); err != nil {
		return fmt.Errorf("%s: naming the destination %s: %w", fn, dst, err)
	}
	if left := engine.TakeCharges(rctx); len(left) > 0 {
		// The rename did not take them (it always does): never leave the destination uncharged.
		if err := p.e.Ledger.Charge(ctx, user(ctx), left); err != nil {
			_ = p.exec(ctx, fmt.Sprintf("DROP TABLE IF EXISTS %s.%s", quoteCol(dstDB), quoteCol(dstName)))
			return fmt.Errorf("%s: %w", fn, err)
		}
	}
	return nil
}

// splitEpsilon is ldp_privatize's eps_x = λε and eps_y = (1 − λ)ε, each rounded to 15 significant
// digits, so that they are the decimals the user means (0.6 × 7 is 4.2, where the float product is
// 4.199999999999999) and print and record as such. The rounded values are the ones the randomisers use
// and the ledger charges, so what is recorded is exactly what was spent; rounding moves each by less
// than 1e-15 of itself.
func splitEpsilon(eps, lambda float64) (epsX, epsY float64) {
	return roundSignificant(lambda*eps, 15), roundSignificant((1-lambda)*eps, 15)
}

// roundSignificant rounds v to digits significant decimal digits (the nearest float64 to that decimal).
func roundSignificant(v float64, digits int) float64 {
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', digits, 64), 64)
	if err != nil {
		return v
	}
	return r
}

// privatizeRows streams the source, releases every row, and inserts the releases into the temporary
// table in one transaction (committed only if every row succeeded).
func (p *procedures) privatizeRows(ctx *sql.Context, fn, srcDB, srcName string, selectCols []string, nKeys int, withLabel bool,
	mech *resolvedMechanism, randomiser string, epsX float64, krr *mechanisms.KRR, dstDB, tmpName string) (int64, error) {
	iter, err := p.query(ctx, fmt.Sprintf("SELECT %s FROM %s.%s", strings.Join(selectCols, ", "), quoteCol(srcDB), quoteCol(srcName)))
	if err != nil {
		return 0, fmt.Errorf("%s: reading the source: %w", fn, err)
	}
	defer iter.Close(ctx)
	ins, fail, err := p.openDestination(ctx, dstDB, tmpName)
	if err != nil {
		return 0, err
	}
	src := mechanisms.NewCryptoSource()
	var n int64
	lastLog := time.Now()
	rd := readAhead(ctx, iter)
	defer rd.close() // before iter.Close
	for {
		batch, err := rd.next()
		if err != nil {
			return fail(fmt.Errorf("%s: reading the source: %w", fn, err))
		}
		if len(batch) == 0 {
			break
		}
		feats := make([][]float32, len(batch))
		for i, r := range batch {
			v := r[nKeys]
			if v == nil {
				return fail(fmt.Errorf("%s: source row %d has NULL features", fn, n+int64(i)+1))
			}
			vec, err := toVector(ctx, fn, "features", v)
			if err != nil {
				return fail(err)
			}
			if len(vec) != mech.desc.InputDim {
				return fail(fmt.Errorf("%s: source row %d has %d features, mechanism %q expects %d", fn, n+int64(i)+1, len(vec), mech.record.Name, mech.desc.InputDim))
			}
			feats[i] = vec
		}
		released, err := mech.privatise(ctx, feats, randomiser, epsX) // the host refuses NaN and ±Inf
		var nf *host.NonFiniteInputError
		if errors.As(err, &nf) {
			return fail(fmt.Errorf("%s (source row %d)", nonFiniteError(fn, "features", nf.Value, nf.Index), n+int64(nf.Row)+1))
		}
		if err != nil {
			return fail(fmt.Errorf("%s: %w", fn, err))
		}
		for i, r := range batch {
			out := make(sql.Row, 0, nKeys+2)
			if nKeys == 0 {
				out = append(out, n+int64(i)+1)
			} else {
				out = append(out, r[:nKeys]...)
			}
			out = append(out, PackVector(toFloat32(released[i])))
			if withLabel {
				if r[nKeys+1] == nil {
					return fail(fmt.Errorf("%s: source row %d has a NULL label", fn, n+int64(i)+1))
				}
				y, err := toInt(ctx, fn, "label", r[nKeys+1])
				if err != nil {
					return fail(err)
				}
				noisy, err := krr.Randomise(int(y), src)
				if err != nil {
					return fail(fmt.Errorf("%s: source row %d: %w", fn, n+int64(i)+1, err))
				}
				out = append(out, int32(noisy))
			}
			if err := ins.Insert(ctx, out); err != nil {
				return fail(fmt.Errorf("%s: writing: %w", fn, err))
			}
		}
		n += int64(len(batch))
		if time.Since(lastLog) > 5*time.Second {
			p.log("ldp_privatize: %d rows so far", n)
			lastLog = time.Now()
		}
	}
	if err := ins.StatementComplete(ctx); err != nil {
		_ = ins.Close(ctx)
		return 0, fmt.Errorf("%s: committing: %w", fn, err)
	}
	return n, ins.Close(ctx)
}

// renameIn renames table from to to within database db, as the calling user (RENAME TABLE needs ALTER
// and DROP on from, CREATE and INSERT on to). A rename works within the session's current database
// (engine/rename.go), so the statement runs with db as the current database, which is restored after.
func (p *procedures) renameIn(ctx *sql.Context, db, from, to string) error {
	if cur := ctx.GetCurrentDatabase(); !strings.EqualFold(cur, db) {
		ctx.SetCurrentDatabase(db)
		defer ctx.SetCurrentDatabase(cur)
	}
	return p.exec(ctx, fmt.Sprintf("RENAME TABLE %s.%s TO %s.%s", quoteCol(db), quoteCol(from), quoteCol(db), quoteCol(to)))
}

func (p *procedures) exec(ctx *sql.Context, q string) error {
	iter, err := p.query(ctx, q)
	if err != nil {
		return err
	}
	_, err = sql.RowIterToRows(ctx, iter)
	return err
}

// resolveTable finds table (name or db.name) for procedure fn and names it as the catalog spells it,
// so that the ledger and the catalog key it one way whatever case the caller wrote.
func (p *procedures) resolveTable(ctx *sql.Context, fn, table string) (sql.Table, engine.TableRef, error) {
	dbName, name := splitTable(ctx, table)
	d, err := p.e.Provider.Database(ctx, dbName)
	if err != nil {
		return nil, engine.TableRef{}, fmt.Errorf("%s: %w", fn, err)
	}
	t, err := p.table(ctx, dbName, name)
	if err != nil {
		return nil, engine.TableRef{}, fmt.Errorf("%s: %w", fn, err)
	}
	return t, engine.TableRef{Database: d.Name(), Table: t.Name()}, nil
}

func (p *procedures) table(ctx *sql.Context, db, name string) (sql.Table, error) {
	return p.e.LookupTable(ctx, db, name)
}

func (p *procedures) tableExists(ctx *sql.Context, db, name string) (bool, error) {
	_, err := p.table(ctx, db, name)
	if sql.ErrTableNotFound.Is(err) {
		return false, nil
	}
	if err != nil && sql.ErrDatabaseNotFound.Is(err) {
		return false, err
	}
	return err == nil, err
}

// qualifiedTable is db.table for a table name that may leave out its database (the session's current).
func qualifiedTable(ctx *sql.Context, t string) string {
	db, name := splitTable(ctx, t)
	return db + "." + name
}

// splitTable splits db.table, defaulting to the session's current database.
func splitTable(ctx *sql.Context, t string) (db, name string) {
	if i := strings.Index(t, "."); i >= 0 {
		return t[:i], t[i+1:]
	}
	return ctx.GetCurrentDatabase(), t
}

func sqlString(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", "''") + "'"
}

// batchReader reads a row iterator in batches of BatchSize on a goroutine of its own, one batch ahead
// of its consumer, so that reading the source (DuckDB and GMS) overlaps with releasing and writing the
// batch before. Only its goroutine touches the iterator until close returns.
type batchReader struct {
	batches chan readBatch
	stop    chan struct{}
	wg      sync.WaitGroup
}

type readBatch struct {
	rows []sql.Row
	err  error
}

func readAhead(ctx *sql.Context, iter sql.RowIter) *batchReader {
	r := &batchReader{batches: make(chan readBatch, 1), stop: make(chan struct{})}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(r.batches)
		for {
			batch, done, err := nextBatch(ctx, iter)
			if len(batch) > 0 || err != nil {
				select {
				case r.batches <- readBatch{batch, err}:
				case <-r.stop:
					return
				}
			}
			if done || err != nil {
				return
			}
		}
	}()
	return r
}

// next returns the next batch; no rows and no error after the last one.
func (r *batchReader) next() ([]sql.Row, error) {
	b, ok := <-r.batches
	if !ok {
		return nil, nil
	}
	return b.rows, b.err
}

// close stops the reader and waits for its goroutine; the iterator may be closed after.
func (r *batchReader) close() {
	close(r.stop)
	r.wg.Wait()
}

// nextBatch reads up to BatchSize rows from iter; done says it is exhausted.
func nextBatch(ctx *sql.Context, iter sql.RowIter) (batch []sql.Row, done bool, err error) {
	for len(batch) < BatchSize {
		r, err := iter.Next(ctx)
		if err == io.EOF {
			return batch, true, nil
		}
		if err != nil {
			return nil, false, err
		}
		batch = append(batch, r)
	}
	return batch, false, nil
}

// openDestination starts one insert statement into ldp_privatize's temporary destination; fail discards
// everything inserted and returns err.
func (p *procedures) openDestination(ctx *sql.Context, db, name string) (ins sql.RowInserter, fail func(error) (int64, error), err error) {
	tmp, err := p.table(ctx, db, name)
	if err != nil {
		return nil, nil, err
	}
	ins = tmp.(sql.InsertableTable).Inserter(ctx)
	ins.StatementBegin(ctx)
	return ins, func(err error) (int64, error) {
		_ = ins.DiscardChanges(ctx, err)
		_ = ins.Close(ctx)
		return 0, err
	}, nil
}
