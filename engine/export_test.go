package engine

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func packF32(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// ExportTable writes Parquet with the vector column unpacked and the metadata inside, CSV with
// VectorAs1..N columns and a sidecar; it refuses an existing file and a path outside the directory,
// writing nothing.
func TestExportTable(t *testing.T) {
	dir := t.TempDir()
	e, err := Open(MemoryPath, WithSecureFilePriv(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := e.NewContext(t.Context())
	if _, _, err := e.Query(ctx, "CREATE TABLE r (id BIGINT PRIMARY KEY, features LONGBLOB NOT NULL, label INT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := e.DuckDB.Exec(`INSERT INTO ldpsql.r VALUES (?, ?, ?)`, i, packF32(float32(i), 0.5, -1), i%2); err != nil {
			t.Fatal(err)
		}
	}
	meta := func(rows int64) ([]byte, error) { return []byte(`{"rows":` + string(rune('0'+rows)) + `}`), nil }
	x := Export{Database: "ldpsql", Table: "r", Path: "r.parquet", Format: ExportParquet, Vector: "features", VectorAs: "z", VectorDim: 3, Metadata: meta}
	got, err := e.ExportTable(ctx, x)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rows != 3 || got.Path != filepath.Join(dir, "r.parquet") {
		t.Fatalf("got %+v", got)
	}
	var z string
	var kv []byte
	if err := e.DuckDB.QueryRow(`SELECT CAST(z AS VARCHAR) FROM read_parquet(?) WHERE id = 2`, got.Path).Scan(&z); err != nil {
		t.Fatal(err)
	}
	if err := e.DuckDB.QueryRow(`SELECT value FROM parquet_kv_metadata(?) WHERE CAST(key AS VARCHAR) = ?`, got.Path, MetadataKey).Scan(&kv); err != nil {
		t.Fatal(err)
	}
	if z != "[2.0, 0.5, -1.0]" || string(kv) != `{"rows":3}` {
		t.Fatalf("z %s, metadata %s", z, kv)
	}
	if _, err := e.ExportTable(ctx, x); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("an existing file: %v", err)
	}
	x.Format, x.Path = ExportCSV, "r.csv"
	if got, err = e.ExportTable(ctx, x); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(got.Path)
	side, _ := os.ReadFile(got.Sidecar)
	if !strings.HasPrefix(string(data), "id,z1,z2,z3,label\n0,0.0,0.5,-1.0,0\n") || string(side) != `{"rows":3}` || got.Sidecar != got.Path+".meta.json" {
		t.Fatalf("csv %q, sidecar %s %q", data, got.Sidecar, side)
	}
	x.Path = filepath.Join(t.TempDir(), "out.csv")
	if _, err := e.ExportTable(ctx, x); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("outside: %v", err)
	}
	if _, err := os.Stat(x.Path); err == nil {
		t.Fatal("written outside")
	}
	// A vector that is not whole float32s fails the COPY, and leaves nothing.
	if _, err := e.DuckDB.Exec(`INSERT INTO ldpsql.r VALUES (9, '\x01\x02\x03'::BLOB, 0)`); err != nil {
		t.Fatal(err)
	}
	x.Path, x.Format = "bad.parquet", ExportParquet
	if _, err := e.ExportTable(ctx, x); err == nil || !strings.Contains(err.Error(), "multiple of 4 bytes") {
		t.Fatalf("a malformed vector: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Fatalf("files left: %v", entries)
	}
}
