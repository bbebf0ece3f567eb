package beam

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local" // fileio.MatchFiles on local paths
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/ldpsql/ldpsql/internal/rowfile"
)

// The files are read and written by package rowfile, the reader and writer of `ldpsql privatize` and
// `ldpsql import-releases` (CSV by encoding/csv, Parquet by an in-memory DuckDB): the same parsing of
// cells into features, the same output columns and the same metadata, so a file written here is one
// import-releases takes. rowfile reads and writes local paths (a shared file system on a cluster).

// Columns names an input file's id and label columns ("" for none) and its feature columns, in
// order; with no Features named, every other column is a feature, in order. A list column holds
// several (as ldpsql privatize reads them).
type Columns struct {
	ID, Label string
	Features  []string
}

func init() {
	beam.RegisterType(reflect.TypeOf((*Staged)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*Summary)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*FilePart)(nil)).Elem())
	register.DoFn2x0[fileio.FileMetadata, func(FilePart)](&splitFn{})
	register.Emitter1[FilePart]()
	register.DoFn3x1[context.Context, FilePart, func(Row), error](&readFn{})
	register.DoFn4x1[context.Context, FilePart, func(Release), func(BadRow), error](&readReleaseFn{})
	register.DoFn2x1[Release, func(int, Release), error](&shardFn{})
	register.DoFn4x1[context.Context, int, func(*Release) bool, func(Staged), error](&writeShardFn{})
	register.DoFn4x1[context.Context, int, func(*BadRow) bool, func(Staged), error](&writeBadFn{})
	register.DoFn4x1[context.Context, int, func(*Staged) bool, func(Summary), error](&commitFn{})
	register.Function1x2[BadRow, int, BadRow](keyBad)
	register.Function1x2[Staged, int, Staged](keyStaged)
	register.Emitter2[int, Release]()
	register.Emitter1[Staged]()
	register.Emitter1[Summary]()
	register.Iter1[*Release]()
	register.Iter1[*BadRow]()
	register.Iter1[*Staged]()
}

// ReadRows reads the rows of every file glob matches (CSV or Parquet, by each file's extension) as
// Rows for spec's mechanism. A row whose cells cannot be read (a number that is not one, a label that
// is not a class, the wrong number of features), and a file that cannot be opened or lacks a column,
// becomes a Row with Err set and Where naming the file and row, which Privatize reports as bad.
//
// A Parquet file is read in parts along its row groups (rowfile.Parts), a CSV file whole; the parts,
// not the rows, are spread over the workers, and each reads its parts and (fused with Privatize)
// releases their rows, so only the small releases cross the runner again. Reshuffling the rows
// instead held every row in Prism's memory: 2.1 GB against 0.7 GB for 60,000 × 784.
func ReadRows(s beam.Scope, glob string, cols Columns, spec Spec) beam.PCollection {
	s = s.Scope("ldpsql.ReadRows")
	rel, err := spec.Releaser()
	if err != nil {
		panic(fmt.Sprintf("ldpsql.ReadRows: %v", err))
	}
	files := fileio.MatchFiles(s, glob, fileio.MatchEmptyDisallow())
	parts := beam.Reshuffle(s, beam.ParDo(s, &splitFn{}, files))
	return beam.ParDo(s, &readFn{Cols: cols, Dim: rel.M.File.InputDim, Mechanism: rel.M.File.Name, K: spec.K}, parts)
}

// ReadAndPrivatize is ReadRows and PrivatizeWithErrors in one step, what a file job runs: each part's
// rows are checked and released in the goroutine that reads them (fanIn), so reading, encoding and
// noise all run on as many cores as read parts, and only the releases (37 bytes a row for d = 8, K =
// 10) leave the step, never the raw rows (3 KB for 784 features).
func ReadAndPrivatize(s beam.Scope, glob string, cols Columns, spec Spec) (releases, bad beam.PCollection) {
	s = s.Scope("ldpsql.ReadAndPrivatize")
	return beam.ParDo2(s, &readReleaseFn{Cols: cols, Spec: spec}, fileParts(s, glob, spec))
}

// fileParts checks spec and splits the files glob matches into parts, spread over the workers.
func fileParts(s beam.Scope, glob string, spec Spec) beam.PCollection {
	if _, err := spec.Releaser(); err != nil {
		panic(fmt.Sprintf("ldpsql.ReadAndPrivatize: %v", err))
	}
	files := fileio.MatchFiles(s, glob, fileio.MatchEmptyDisallow())
	return beam.Reshuffle(s, beam.ParDo(s, &splitFn{}, files))
}

// released is what a part's goroutine hands on: releases of a batch, and the bad rows met so far.
type released struct {
	rels []Release
	bad  []BadRow
}

// readReleaseFn reads parts as readFn does and releases their rows as privatizeFn does, in the
// reading goroutine, each with a batcher of its own.
type readReleaseFn struct {
	Cols Columns
	Spec Spec

	reader readFn
	parts  fanIn[released]
	free   chan *batcher // batchers of finished parts, for the next
}

func (f *readReleaseFn) Setup() error {
	rel, err := f.Spec.Releaser()
	if err != nil {
		return err
	}
	f.reader = readFn{Cols: f.Cols, Dim: rel.M.File.InputDim, Mechanism: rel.M.File.Name, K: f.Spec.K}
	f.parts.setup()
	f.free = make(chan *batcher, cap(f.parts.slots))
	return nil
}

func (f *readReleaseFn) ProcessElement(_ context.Context, part FilePart, emit func(Release), emitBad func(BadRow)) error {
	return f.parts.start(f.releasePart(part), emitReleased(emit, emitBad))
}

func (f *readReleaseFn) FinishBundle(emit func(Release), emitBad func(BadRow)) error {
	return f.parts.drain(emitReleased(emit, emitBad))
}

// releasePart is the work of reading part and releasing its rows, a batch at a time.
func (f *readReleaseFn) releasePart(part FilePart) func(send func(released)) error {
	return func(send func(released)) error {
		var b *batcher
		select {
		case b = <-f.free:
		default:
			var err error
			if b, err = newBatcher(f.Spec); err != nil {
				return err
			}
		}
		defer func() { f.free <- b }()
		var out released
		keep := func(r Release) { out.rels = append(out.rels, r) }
		keepBad := func(r BadRow) { out.bad = append(out.bad, r) }
		handOn := func() {
			if len(out.rels)+len(out.bad) > 0 {
				send(out)
				out = released{}
			}
		}
		var err error
		f.reader.read(part, func(r Row) {
			if err == nil {
				err = b.add(r, keep, keepBad)
			}
			if len(out.rels) > 0 { // a batch was released
				handOn()
			}
		})
		if err == nil {
			err = b.flush(keep)
		}
		handOn()
		return err
	}
}

// emitReleased emits, on the DoFn's goroutine, what a part's goroutine handed on.
func emitReleased(emit func(Release), emitBad func(BadRow)) func(released) {
	return func(r released) {
		for _, rel := range r.rels {
			emit(rel)
		}
		for _, b := range r.bad {
			emitBad(b)
		}
	}
}

// FilePart is rows [From, To) of a Parquet file, bytes [From, To) of a CSV file whose line Line is at
// From (rowfile.CSVPart), or a whole file (Whole).
type FilePart struct {
	Path     string
	From, To int64
	Line     int64
	Whole    bool
}

// splitFn splits a file into its parts: a Parquet file along its row groups, a CSV file at record
// boundaries (rowfile.CSVParts; about 64 MiB each). A file of one part, or whose parts cannot be found
// (readFn then reports why), is read whole.
type splitFn struct{}

func (splitFn) ProcessElement(md fileio.FileMetadata, emit func(FilePart)) {
	if isRemote(md.Path) { // an object is read whole (store.go)
		emit(FilePart{Path: md.Path, Whole: true})
		return
	}
	switch f, _ := rowfile.FormatOf(md.Path); f {
	case rowfile.Parquet:
		if parts, err := rowfile.Parts(md.Path); err == nil {
			for _, p := range parts {
				emit(FilePart{Path: md.Path, From: p[0], To: p[1]})
			}
			return
		}
	case rowfile.CSV:
		if parts, err := rowfile.CSVParts(md.Path); err == nil && len(parts) > 1 {
			for _, p := range parts {
				emit(FilePart{Path: md.Path, From: p.From, To: p.To, Line: p.Line})
			}
			return
		}
	}
	emit(FilePart{Path: md.Path, Whole: true})
}

// readFn reads the parts of a bundle several at once (fanIn), a part's rows in order.
type readFn struct {
	Cols      Columns
	Dim       int
	Mechanism string
	K         int

	parts fanIn[Row]
}

func (f *readFn) Setup() { f.parts.setup() }

func (f *readFn) ProcessElement(_ context.Context, part FilePart, emit func(Row)) error {
	return f.parts.start(func(send func(Row)) error { f.read(part, send); return nil }, emit)
}

func (f *readFn) FinishBundle(emit func(Row)) error { return f.parts.drain(emit) }

// read reads part's rows, and Rows with Err for what it could not read.
func (f *readFn) read(part FilePart, emit func(Row)) {
	bad := func(where string, err error) { countRead.Add(1); emit(Row{Where: where, Err: err.Error()}) }
	var src rowfile.Source
	var err error
	switch f, _ := rowfile.FormatOf(part.Path); {
	case part.Whole && isRemote(part.Path):
		src, err = openObject(part.Path)
	case part.Whole:
		src, err = rowfile.Open(part.Path)
	case f == rowfile.CSV:
		src, err = rowfile.OpenCSVPart(part.Path, rowfile.CSVPart{From: part.From, To: part.To, Line: part.Line})
	default:
		src, err = rowfile.OpenPart(part.Path, part.From, part.To)
	}
	if err != nil {
		bad(part.Path, err)
		return
	}
	defer src.Close()
	lay, err := rowfile.NewLayout(part.Path, src.Columns(), f.Cols.ID, f.Cols.Label, f.Cols.Features, f.Dim, f.Mechanism, f.K)
	if err != nil {
		if part.Whole || part.From == 0 {
			bad(part.Path, err) // once a file
		}
		return
	}
	for { // NaN and infinite features are the batcher's to report, as for rows from any source
		cells, err := src.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			// A file that cannot be read on (a CSV line with the wrong number of fields is one):
			// what was read stands, the rest of the part is reported once.
			bad(src.Where(), fmt.Errorf("reading on: %w", err))
			return
		}
		x, id, y, err := lay.Row(cells, src.Where())
		if err != nil {
			bad(src.Where(), err)
			continue
		}
		countRead.Add(1)
		r := Row{Where: src.Where(), X: x, Label: y}
		if f.Cols.ID != "" {
			r.ID = []string{id}
		}
		emit(r)
	}
}

// Output is where WriteReleases writes: a directory Dir, files in Format ("parquet", the default, or
// "csv"), the releases split over Shards files (default 1), and the id columns' names in them (none
// without one, several for a table's primary key of several columns; the label column is the
// spec's).
type Output struct {
	Dir    string
	Format string
	Shards int
	ID     []string
}

func (o Output) ext() string {
	if strings.EqualFold(o.Format, "csv") {
		return ".csv"
	}
	return ".parquet"
}

// Staged is one file written to the staging directory, to be committed.
type Staged struct {
	Path, Final string
	Rows        int
	Bad         bool // the bad rows' file
	Marker      bool // no file: makes the commit run when there is nothing to write, or carries counts
	// RefusedRows and RefusedUnits count releases left out because the server refused their units
	// (over their budget): a charge batch's.
	RefusedRows, RefusedUnits int
	// Parts is the parts a --from-db table is read in (the planner's marker).
	Parts int
}

// Summary is what a committed job wrote: the release files, their rows, the bad rows and their file.
type Summary struct {
	Files   []string
	Table   string `json:",omitempty"` // the destination table of a job writing to a server
	Rows    int
	Bad     int
	BadFile string
	// RefusedRows rows of RefusedUnits units of a protected source were left out: the server refused
	// to charge them (their units' budgets would be exceeded).
	RefusedRows, RefusedUnits int `json:",omitempty"`
	// Parts is the parts a --from-db table was read in, in parallel.
	Parts int `json:",omitempty"`
	// Template is where the Dataflow runner staged the job as a template (its --template_location),
	// instead of running it: nothing was released.
	Template string `json:",omitempty"`
}

// StagingDir is where WriteReleases writes before its commit, inside the output directory.
const StagingDir = ".ldpsql-staging"

// SummaryFile is the file a committed job writes last in its output directory.
const SummaryFile = "_SUMMARY.json"

// WriteReleases writes releases (Release) and bad rows (BadRow) into out.Dir: the releases as
// releases.parquet (or releases-00000.parquet … with several shards), each file with its own metadata
// (ldpsql privatize's, its rows counted) so ldpsql import-releases takes each as it is; the bad rows
// as bad_rows.jsonl (a JSON object a line: where, reason); and _SUMMARY.json last. Every file is
// written to a staging directory first and moved into place only once all are written, so a job that
// fails or is killed leaves no release file in out.Dir. It returns the Summary.
func WriteReleases(s beam.Scope, releases, bad beam.PCollection, spec Spec, out Output) beam.PCollection {
	return writeReleases(s, releases, bad, nil, spec, out)
}

// writeReleases is WriteReleases that also adds counts (Staged markers: the charge's) to the summary.
// releases holds Release elements, or releaseBatch elements (what readAndPrivatizeBatches gives).
func writeReleases(s beam.Scope, releases, bad beam.PCollection, counts []beam.PCollection, spec Spec, out Output) beam.PCollection {
	s = s.Scope("ldpsql.WriteReleases")
	if _, err := spec.Releaser(); err != nil {
		panic(fmt.Sprintf("ldpsql.WriteReleases: %v", err))
	}
	shards := max(1, out.Shards)
	var written beam.PCollection
	if releases.Type().Type() == reflect.TypeOf(releaseBatch{}) {
		keyed := beam.ParDo(s, &shardBatchFn{Shards: shards}, releases)
		written = beam.ParDo(s, &writeShardBatchesFn{Spec: spec, Out: out}, beam.GroupByKey(s, keyed))
	} else {
		keyed := beam.ParDo(s, &shardFn{Shards: shards}, releases)
		written = beam.ParDo(s, &writeShardFn{Spec: spec, Out: out}, beam.GroupByKey(s, keyed))
	}
	badWritten := beam.ParDo(s, &writeBadFn{Out: out}, beam.GroupByKey(s, beam.ParDo(s, keyBad, bad)))
	marker := beam.Create(s, Staged{Marker: true})
	all := beam.Flatten(s, append([]beam.PCollection{written, badWritten, marker}, counts...)...)
	return beam.ParDo(s, &commitFn{Out: out}, beam.GroupByKey(s, beam.ParDo(s, keyStaged, all)))
}

func keyBad(b BadRow) (int, BadRow)     { return 0, b }
func keyStaged(st Staged) (int, Staged) { return 0, st }

// shardFn spreads the releases over the shards at random.
type shardFn struct{ Shards int }

func (f *shardFn) ProcessElement(r Release, emit func(int, Release)) error {
	emit(rand.IntN(f.Shards), r)
	return nil
}

func stagingPath(dir, name string) string { return joinPath(joinPath(dir, StagingDir), name) }

// writeShardFn writes one shard's releases with rowfile, the metadata client.Releaser.Meta gives.
type writeShardFn struct {
	Spec Spec
	Out  Output
}

func (f *writeShardFn) ProcessElement(ctx context.Context, shard int, rels func(*Release) bool, emit func(Staged)) error {
	return writeShard(ctx, f.Spec, f.Out, shard, rels, emit)
}

// writeShard writes one shard's releases, as rels gives them.
func writeShard(ctx context.Context, spec Spec, out Output, shard int, rels func(*Release) bool, emit func(Staged)) error {
	rel, err := spec.Releaser()
	if err != nil {
		return err
	}
	name := "releases" + out.ext()
	if out.Shards > 1 {
		name = fmt.Sprintf("releases-%05d%s", shard, out.ext())
	}
	staged, final := stagingPath(out.Dir, name), joinPath(out.Dir, name)
	path := staged // where rowfile writes: a local file, uploaded to staged for an object store
	if isRemote(out.Dir) {
		tmp, err := os.MkdirTemp("", "ldpsql-etl-out-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		path = filepath.Join(tmp, name)
	} else if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	sink, err := rowfile.Create(path, rowfile.OutColumns(out.ID, spec.Label, rel.M.File.OutputDim))
	if err != nil {
		return err
	}
	defer sink.Discard()
	n := 0
	var r Release
	cells := make([]any, 0, len(out.ID)+2)
	for rels(&r) {
		cells = cells[:0]
		if len(r.ID) != len(out.ID) {
			return fmt.Errorf("a release has %d id values for the %d id columns %v", len(r.ID), len(out.ID), out.ID)
		}
		for _, v := range r.ID {
			cells = append(cells, v)
		}
		cells = append(cells, r.Z)
		if spec.Label != "" {
			cells = append(cells, r.Label)
		}
		if err := sink.Write(cells...); err != nil {
			return err
		}
		n++
	}
	meta, err := json.MarshalIndent(rel.Meta(n), "", "  ")
	if err != nil {
		return err
	}
	if err := sink.Finish(meta); err != nil {
		return err
	}
	csv := out.ext() == ".csv" // its metadata is a file beside it
	if path != staged {
		if err := upload(ctx, path, staged); err != nil {
			return err
		}
		if csv {
			if err := upload(ctx, rowfile.MetadataAt(path), rowfile.MetadataAt(staged)); err != nil {
				return err
			}
		}
	}
	emit(Staged{Path: staged, Final: final, Rows: n})
	if csv {
		emit(Staged{Path: rowfile.MetadataAt(staged), Final: rowfile.MetadataAt(final)})
	}
	return nil
}

// writeBadFn writes the bad rows, a JSON object a line.
type writeBadFn struct{ Out Output }

func (f *writeBadFn) ProcessElement(ctx context.Context, _ int, bad func(*BadRow) bool, emit func(Staged)) error {
	path := stagingPath(f.Out.Dir, "bad_rows.jsonl")
	if err := mkdirAll(joinPath(f.Out.Dir, StagingDir)); err != nil {
		return err
	}
	var rows []BadRow
	var b BadRow
	for bad(&b) {
		rows = append(rows, b)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Where < rows[j].Where })
	var sb strings.Builder
	for _, b := range rows {
		line, _ := json.Marshal(map[string]string{"where": b.Where, "reason": b.Reason})
		sb.Write(line)
		sb.WriteByte('\n')
	}
	if err := writeFile(ctx, path, []byte(sb.String())); err != nil {
		return err
	}
	emit(Staged{Path: path, Final: joinPath(f.Out.Dir, "bad_rows.jsonl"), Rows: len(rows), Bad: true})
	return nil
}

// commitFn moves every staged file into place once all are written, then writes the summary.
type commitFn struct{ Out Output }

func (f *commitFn) ProcessElement(ctx context.Context, _ int, staged func(*Staged) bool, emit func(Summary)) error {
	var sum Summary
	if err := commitStaged(ctx, f.Out, staged, &sum); err != nil {
		return err
	}
	emit(sum)
	return nil
}

// commitStaged moves every staged file of out into place, adds them and the counts to sum, then writes
// the summary and removes the staging directory.
func commitStaged(ctx context.Context, out Output, staged func(*Staged) bool, sum *Summary) error {
	var all []Staged
	var st Staged
	for staged(&st) {
		sum.RefusedRows += st.RefusedRows
		sum.RefusedUnits += st.RefusedUnits
		sum.Parts += st.Parts
		if !st.Marker {
			all = append(all, st)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Final < all[j].Final })
	for _, st := range all {
		if st.Path != "" {
			if err := moveFile(ctx, st.Path, st.Final); err != nil {
				return fmt.Errorf("committing %s: %w", st.Final, err)
			}
		}
		switch {
		case st.Bad:
			sum.Bad, sum.BadFile = st.Rows, st.Final
		case st.Final == "":
			sum.Rows += st.Rows // rows written to a table
		case !strings.HasSuffix(st.Final, ".meta.json"):
			sum.Files = append(sum.Files, st.Final)
			sum.Rows += st.Rows
		}
	}
	raw, _ := json.MarshalIndent(sum, "", "  ")
	if err := writeFile(ctx, joinPath(out.Dir, SummaryFile), append(raw, '\n')); err != nil {
		return err
	}
	return removeAll(ctx, joinPath(out.Dir, StagingDir))
}

// CheckOutput refuses an output directory that already holds releases, a summary or a staging
// directory (a job must not mix its files with another's), and creates it when it does not exist.
func CheckOutput(dir string) error { return checkOutput(dir, "") }

// jobFile, in the staging directory, names the job that stages there.
const jobFile = "JOB"

// checkOutput is CheckOutput for job: a staging directory that job left (a killed try of it) is
// removed, as its releases never became final.
func checkOutput(dir, job string) error {
	ctx := context.Background()
	names, err := listDir(ctx, dir)
	if err != nil {
		return err
	}
	if names == nil {
		return mkdirAll(dir)
	}
	staging := joinPath(dir, StagingDir)
	for _, n := range names {
		if n == StagingDir && job != "" {
			if raw, err := readFile(ctx, joinPath(staging, jobFile)); err == nil && string(raw) == job {
				if err := removeAll(ctx, staging); err != nil {
					return err
				}
				continue
			}
		}
		if n == StagingDir || n == SummaryFile || n == "bad_rows.jsonl" || strings.HasPrefix(n, "releases") {
			return fmt.Errorf("%s already holds %s: write to a new directory", dir, n)
		}
	}
	return nil
}
