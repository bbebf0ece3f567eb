package beam

import (
	"context"
	"math/rand/v2"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

// A file job's releases cross the runner in batches: a runner encodes, groups and decodes every element
// on its own, which for a 37-byte release costs more than encoding and noising its row did
// (BenchmarkPrismFashionMNIST's profile: Prism's stage and element coding about 0.3 CPU s a
// 60,000-row job, against 0.3 s for checking, encoding and noising the rows). So Job's pipeline hands
// on each batch a part's reader releases (Spec.Batch rows, 4096 by default) as one releaseBatch, and
// the shard writers take them apart. ReadAndPrivatize and WriteReleases, the transforms a pipeline
// author composes, keep one Release an element.

// releaseBatch is a batch of releases travelling as one element.
type releaseBatch struct {
	Rels []Release
}

func init() {
	beam.RegisterType(reflect.TypeOf((*releaseBatch)(nil)).Elem())
	register.DoFn4x1[context.Context, FilePart, func(releaseBatch), func(BadRow), error](&readReleaseBatchFn{})
	register.DoFn2x1[releaseBatch, func(int, releaseBatch), error](&shardBatchFn{})
	register.DoFn4x1[context.Context, int, func(*releaseBatch) bool, func(Staged), error](&writeShardBatchesFn{})
	register.Emitter1[releaseBatch]()
	register.Emitter2[int, releaseBatch]()
	register.Iter1[*releaseBatch]()
}

// readAndPrivatizeBatches is ReadAndPrivatize with its releases in batches (releaseBatch).
func readAndPrivatizeBatches(s beam.Scope, glob string, cols Columns, spec Spec) (batches, bad beam.PCollection) {
	s = s.Scope("ldpsql.ReadAndPrivatize")
	return beam.ParDo2(s, &readReleaseBatchFn{Cols: cols, Spec: spec}, fileParts(s, glob, spec))
}

// readReleaseBatchFn is readReleaseFn emitting each batch of releases as one element.
type readReleaseBatchFn struct {
	Cols Columns
	Spec Spec

	read readReleaseFn // the reading and releasing; this type only emits its batches whole
}

func (f *readReleaseBatchFn) Setup() error {
	f.read = readReleaseFn{Cols: f.Cols, Spec: f.Spec}
	return f.read.Setup()
}

func (f *readReleaseBatchFn) ProcessElement(_ context.Context, part FilePart, emit func(releaseBatch), emitBad func(BadRow)) error {
	return f.read.parts.start(f.read.releasePart(part), emitBatch(emit, emitBad))
}

func (f *readReleaseBatchFn) FinishBundle(emit func(releaseBatch), emitBad func(BadRow)) error {
	return f.read.parts.drain(emitBatch(emit, emitBad))
}

func emitBatch(emit func(releaseBatch), emitBad func(BadRow)) func(released) {
	return func(r released) {
		if len(r.rels) > 0 {
			emit(releaseBatch{Rels: r.rels})
		}
		for _, b := range r.bad {
			emitBad(b)
		}
	}
}

// shardBatchFn spreads each release of a batch over the shards at random, as shardFn does, handing on
// a batch per shard.
type shardBatchFn struct{ Shards int }

func (f *shardBatchFn) ProcessElement(b releaseBatch, emit func(int, releaseBatch)) error {
	if f.Shards <= 1 {
		emit(0, b)
		return nil
	}
	per := make([][]Release, f.Shards)
	for _, r := range b.Rels {
		i := rand.IntN(f.Shards)
		per[i] = append(per[i], r)
	}
	for i, rels := range per {
		if len(rels) > 0 {
			emit(i, releaseBatch{Rels: rels})
		}
	}
	return nil
}

// writeShardBatchesFn is writeShardFn for batches.
type writeShardBatchesFn struct {
	Spec Spec
	Out  Output
}

func (f *writeShardBatchesFn) ProcessElement(ctx context.Context, shard int, batches func(*releaseBatch) bool, emit func(Staged)) error {
	var b releaseBatch
	i := 0
	next := func(r *Release) bool {
		for i == len(b.Rels) {
			if !batches(&b) {
				return false
			}
			i = 0
		}
		*r = b.Rels[i]
		i++
		return true
	}
	return writeShard(ctx, f.Spec, f.Out, shard, next, emit)
}
