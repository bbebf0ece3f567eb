package udf

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ldpsql/ldpsql/engine"
)

// A built-in plugin binary whose digest differs from the one pinned at build time is not registered.
func TestBuiltinDigestPin(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, BuiltinPlugins["pca"])
	if err := os.WriteFile(path, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := builtinDigests
	builtinDigests = "identity:aa,pca:" + strings.Repeat("0", 64)
	defer func() { builtinDigests = old }()
	if pinnedDigest("pca") != strings.Repeat("0", 64) || pinnedDigest("vlm") != "" {
		t.Fatalf("pinnedDigest: %q %q", pinnedDigest("pca"), pinnedDigest("vlm"))
	}
	e, err := engine.Open(engine.MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var logged []string
	if _, err := Install(e, Config{PluginDir: dir, Logf: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Catalog.Mechanism(context.Background(), "pca"); err == nil {
		t.Fatal("a built-in with the wrong digest was registered")
	}
	if !strings.Contains(strings.Join(logged, "\n"), "but this ldpsql was built with") {
		t.Fatalf("no notice: %q", logged)
	}
}
