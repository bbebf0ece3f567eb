package engine

import (
	"cmp"
	"context"
	"slices"
)

// memoIndex is the exact index of one table's memoisable releases: for each memo key (memoHash of the
// unit and the digest), the id of the first release recorded under it. A release asked for for the first
// time, the common case, is known to be new without a query; a memoised one is read by its id, and
// because ids grow with time DuckDB reads only the row groups that hold the ids asked for (the min/max
// of id it keeps per row group), so neither costs more as the ledger grows. (DuckDB's semi-join on
// memo_key read every release's key, and its ART index on memo_key was not used for it.)
//
// It takes 17 bytes per memo key, and is built from ldp_releases when the table is first looked up in
// a process. Two keys with the same 64-bit hash (chance about n²/2⁶⁵: 3 in a million for 10⁷ keys) would
// share the first one's id: the second would then be released afresh and charged, never given the
// first one's release (Memo compares the unit and the digest it reads).
type memoIndex struct {
	n      int64           // memoisable releases recorded
	built  bool            // whether keys, ids and recent hold every one of them
	keys   []int64         // sorted memo keys
	ids    []int64         // ids[i]: the first release recorded under keys[i]
	dir    []uint32        // dir[b]: the first i whose key's top bits are ≥ b (see bucket)
	shift  uint            // 64 - the top bits dir is indexed by
	recent map[int64]int64 // keys added since the last merge into keys, with their first id
}

// bucket is the directory slot of memo key h: its top bits, in the keys' order. Memo keys are hashes,
// spread evenly, so a slot holds about four keys and a lookup reads the directory and one bucket
// (a binary search over 10⁷ keys read 23 places far apart: 2 µs of cache misses per key).
func (x *memoIndex) bucket(h int64) uint64 { return (uint64(h) ^ 1<<63) >> x.shift }

// dirBits is how many top bits of a key index the directory of n keys: about four keys a slot.
func dirBits(n int) uint {
	bits := uint(1)
	for 1<<(bits+2) < n {
		bits++
	}
	return bits
}

// index rebuilds dir for keys.
func (x *memoIndex) index() {
	bits := dirBits(len(x.keys))
	x.shift = 64 - bits
	x.dir = make([]uint32, 1<<bits+1)
	b := uint64(0)
	for i, k := range x.keys {
		for kb := x.bucket(k); b <= kb; b++ {
			x.dir[b] = uint32(i)
		}
	}
	for ; b < uint64(len(x.dir)); b++ {
		x.dir[b] = uint32(len(x.keys))
	}
}

// lookup returns the id of the first release recorded under memo key h. An unbuilt index finds nothing:
// the caller builds it first (Ledger.memoIndex).
func (x *memoIndex) lookup(h int64) (int64, bool) {
	if len(x.keys) > 0 {
		b := x.bucket(h)
		lo, hi := int(x.dir[b]), int(x.dir[b+1])
		if i, ok := slices.BinarySearch(x.keys[lo:hi], h); ok {
			return x.ids[lo+i], true
		}
	}
	id, ok := x.recent[h]
	return id, ok
}

// add records that release id was recorded under memo key h (ids arrive in increasing order).
func (x *memoIndex) add(h, id int64) {
	x.n++
	if !x.built {
		return
	}
	if _, ok := x.lookup(h); ok {
		return // a later release of the same key ('charge' mode): the first one is kept
	}
	if x.recent == nil {
		x.recent = map[int64]int64{}
	}
	x.recent[h] = id
	if len(x.recent) > max(4096, len(x.keys)/4) { // merging costs len(keys): at most 5 per key added
		x.merge()
	}
}

// merge moves recent into the sorted arrays.
func (x *memoIndex) merge() {
	add := make([]int64, 0, len(x.recent))
	for h := range x.recent {
		add = append(add, h)
	}
	slices.Sort(add)
	keys := make([]int64, 0, len(x.keys)+len(add))
	ids := make([]int64, 0, len(x.keys)+len(add))
	i, j := 0, 0
	for i < len(x.keys) || j < len(add) {
		if j == len(add) || (i < len(x.keys) && x.keys[i] < add[j]) {
			keys, ids = append(keys, x.keys[i]), append(ids, x.ids[i])
			i++
		} else {
			keys, ids = append(keys, add[j]), append(ids, x.recent[add[j]])
			j++
		}
	}
	x.keys, x.ids, x.recent = keys, ids, nil
	x.index()
}

// memoIndex returns table t's index, building it from ldp_releases if need be (nil: no releases).
func (l *Ledger) memoIndex(ctx context.Context, t TableRef) (*memoIndex, error) {
	l.cacheMu.RLock()
	x := l.memo[t.key()]
	ready := x == nil || x.n == 0 || x.built
	l.cacheMu.RUnlock()
	if ready {
		return x, nil
	}
	// Build it while no charge runs, so that none of the releases is missed.
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cacheMu.RLock()
	x = l.memo[t.key()]
	ready = x.built
	n := x.n
	l.cacheMu.RUnlock()
	if ready {
		return x, nil
	}
	// A plain scan, sorted here: DuckDB's GROUP BY and ORDER BY of the keys took three times as long.
	rows, err := l.db.QueryContext(ctx, `SELECT memo_key, id FROM `+CatalogSchema+`.ldp_releases
		WHERE db = ? AND table_name = ? AND released_value IS NOT NULL`, t.Database, t.Table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	all := make([]memoEntry, 0, n)
	for rows.Next() {
		var e memoEntry
		if err := rows.Scan(&e.key, &e.id); err != nil {
			return nil, err
		}
		all = append(all, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// DuckDB returns a plain scan in insertion order (preserve_insertion_order), which is id order; a
	// stable sort by key keeps the first release of each key first.
	all = sortByKey(all)
	nx := &memoIndex{n: n, built: true, keys: make([]int64, 0, len(all)), ids: make([]int64, 0, len(all))}
	for i, e := range all {
		if i == 0 || e.key != all[i-1].key { // the first release of each key
			nx.keys, nx.ids = append(nx.keys, e.key), append(nx.ids, e.id)
		}
	}
	nx.keys, nx.ids = slices.Clip(nx.keys), slices.Clip(nx.ids)
	nx.index()
	l.cacheMu.Lock()
	l.memo[t.key()] = nx
	l.cacheMu.Unlock()
	return nx, nil
}

// memoEntry is one memoisable release while the index is built: its memo key and its id.
type memoEntry struct{ key, id int64 }

// sortByKey sorts s stably by key in about linear time: one pass scatters the entries into buckets by
// their keys' top bits (memo keys are hashes, so a bucket holds a few), an insertion sort orders each
// bucket. (slices.SortFunc of 10⁶ entries took several times as long.)
func sortByKey(s []memoEntry) []memoEntry {
	shift := 64 - dirBits(len(s))
	top := func(k int64) uint64 { return (uint64(k) ^ 1<<63) >> shift }
	start := make([]int, 1<<(64-shift)+1)
	for _, e := range s {
		start[top(e.key)+1]++
	}
	for i := 1; i < len(start); i++ {
		start[i] += start[i-1]
	}
	out := make([]memoEntry, len(s))
	next := slices.Clone(start)
	for _, e := range s {
		b := top(e.key)
		out[next[b]] = e
		next[b]++
	}
	for b := 0; b+1 < len(start); b++ {
		bucket := out[start[b]:start[b+1]]
		if len(bucket) > 32 { // keys that are not spread evenly
			slices.SortStableFunc(bucket, func(x, y memoEntry) int { return cmp.Compare(x.key, y.key) })
			continue
		}
		for i := 1; i < len(bucket); i++ {
			for j := i; j > 0 && bucket[j].key < bucket[j-1].key; j-- {
				bucket[j], bucket[j-1] = bucket[j-1], bucket[j]
			}
		}
	}
	return out
}

// idRange is a range of release ids to read, and the ids wanted in it.
type idRange struct {
	lo, hi int64
	ids    []int64
}

// releaseRowGroup is DuckDB's row group size: ids further apart than this lie in different row groups.
const releaseRowGroup = 122_880

// maxIDRanges bounds the queries of one Memo call: ids spread wider are read in fewer, wider ranges
// (every query costs its planning; a range costs the row groups it spans).
const maxIDRanges = 4

// idRanges splits ids into at most maxIDRanges ranges, cutting where consecutive ids are far apart.
func idRanges(ids []int64) []idRange {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	for gap := int64(releaseRowGroup); ; gap *= 2 {
		var out []idRange
		start := 0
		for i := 1; i <= len(ids); i++ {
			if i == len(ids) || ids[i]-ids[i-1] > gap {
				out = append(out, idRange{lo: ids[start], hi: ids[i-1], ids: ids[start:i]})
				start = i
			}
		}
		if len(out) <= maxIDRanges {
			return out
		}
	}
}
