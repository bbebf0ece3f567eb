package udf

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/hashicorp/go-hclog"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/plugins/host"
	"github.com/ldpsql/ldpsql/plugins/sdk"
	"github.com/ldpsql/ldpsql/udf/boundary"
)

// BuiltinPlugins are the encoder plugins that ship with ldpsql, by mechanism name, with the file name of
// their binary (built by scripts/build.sh beside the ldpsql binary).
var BuiltinPlugins = map[string]string{
	"identity":          "ldpsql-plugin-identity",
	"pca":               "ldpsql-plugin-pca",
	"vlm":               "ldpsql-plugin-vlm",
	"task_aware_linear": "ldpsql-plugin-task_aware_linear",
	"task_aware":        "ldpsql-plugin-task_aware",
	"clm":               "ldpsql-plugin-clm",
}

// builtinDigests pins the built-in plugins' SHA-256 digests at build time: scripts/build.sh builds the
// plugins first and passes "name:hex,name:hex" with -ldflags "-X ...udf.builtinDigests=...". When it
// is set, a built-in binary with another digest is refused; when it is empty (go run, go test), the
// built-ins are trusted as found and re-pinned at start.
var builtinDigests string

func pinnedDigest(name string) string {
	for _, kv := range strings.Split(builtinDigests, ",") {
		if n, d, ok := strings.Cut(kv, ":"); ok && n == name {
			return d
		}
	}
	return ""
}

// Config configures Install.
type Config struct {
	// PluginDir holds the built-in plugin binaries. Empty: $LDPSQL_PLUGIN_DIR, else the directory of the
	// running executable.
	PluginDir string
	// Logf receives progress and notices (nothing if nil).
	Logf func(format string, args ...any)
	// PluginLogger receives the plugin host's and the plugins' own log lines (nothing if nil).
	PluginLogger hclog.Logger
	// PluginCallTimeout bounds every encoder call; a plugin that runs past it is killed and restarted
	// at the next call. Zero: host.DefaultCallTimeout.
	PluginCallTimeout time.Duration
}

// Install registers every ldpsql SQL function and procedure on e, starts the plugin host (stopped when
// e closes) and registers the built-in encoder plugins found in the plugin directory.
func Install(e *engine.Engine, cfg Config) (*Mechanisms, error) {
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	boundary.AddSlotVariable()
	if cfg.Logf != nil {
		boundary.SetSlotLog(cfg.Logf)
	}
	h := host.New(cfg.PluginLogger)
	e.OnClose(h.Close)
	mechs := newMechanisms(e.Catalog, h)
	mechs.callTimeout = cfg.PluginCallTimeout
	mechs.warn = logf
	e.Provider.RegisterFunction(Functions()...)
	e.Provider.RegisterFunction(
		sql.FunctionN{Name: "ldp_vector", Fn: NewLDPVector},
		sql.FunctionN{Name: "ldp_encode", Fn: newLDPEncode(mechs, false)},
		sql.FunctionN{Name: "ldp_encode_json", Fn: newLDPEncode(mechs, true)},
		sql.FunctionN{Name: "ldp_decode", Fn: newLDPDecode(mechs)},
	)
	procs := &procedures{e: e, mechs: mechs, log: logf}
	e.Provider.RegisterProcedure(procs.details()...)
	e.Provider.RegisterProcedure(procs.trainingDetails()...)
	e.Provider.RegisterProcedure(procs.diagnosticsDetails()...)
	e.Provider.RegisterProcedure(procs.ledgerDetails()...)
	e.Provider.RegisterProcedure(procs.externalChargeDetails()...)
	e.Provider.RegisterProcedure(procs.defaultDetails()...)
	cls := newClassifiers(procs)
	e.Provider.RegisterFunction(
		sql.FunctionN{Name: "train_noisy_classifier", Fn: cls.newTrain},
		sql.FunctionN{Name: "predict", Fn: cls.newPredict},
	)
	dir, err := pluginDir(cfg.PluginDir)
	if err != nil {
		return nil, err
	}
	if err := e.ProtectPath(dir); err != nil { // SQL never reads or writes a plugin binary
		return nil, err
	}
	if err := registerBuiltins(context.Background(), e.Catalog, dir, logf); err != nil {
		return nil, err
	}
	if err := dropLeftovers(e, logf); err != nil {
		return nil, err
	}
	warnKeylessMemoise(e, procs, logf)
	return mechs, nil
}

// warnKeylessMemoise logs the protected tables whose budget is in memoise mode but that have no primary
// key (set by an earlier ldpsql, which allowed it): the ledger cannot tell their rows apart, so it
// releases them as in charge mode (every release fresh and charged; see tableInstance.unitIsRow).
func warnKeylessMemoise(e *engine.Engine, p *procedures, logf func(string, ...any)) {
	ctx := e.NewContext(context.Background())
	for _, b := range e.Ledger.Budgets() {
		if b.Mode != engine.BudgetMemoise {
			continue
		}
		t, err := p.table(ctx, b.Database, b.Table)
		if err != nil || len(boundary.PrimaryKey(ctx, t)) > 0 {
			continue
		}
		logf("ldp ledger: protected table %s has no primary key, so its budget's memoise mode cannot apply: every release is fresh and charged, as in "+
			"charge mode (CALL ldp_set_budget('%s', %g, 'charge') records that)", b.TableRef, b.TableRef, b.EpsTotal)
	}
}

// dropLeftovers drops the temporary tables of ldp_privatize runs that a crash interrupted (a run that
// ends, well or badly, drops or renames its own): nothing in them was released.
func dropLeftovers(e *engine.Engine, logf func(string, ...any)) error {
	ctx := e.NewContext(context.Background())
	_, dbs, err := e.Query(ctx, "SHOW DATABASES")
	if err != nil {
		return err
	}
	for _, d := range dbs {
		db := fmt.Sprint(d[0])
		switch strings.ToLower(db) {
		case "information_schema", "mysql", engine.CatalogSchema:
			continue
		}
		_, tables, err := e.Query(ctx, "SHOW TABLES FROM "+quoteCol(db))
		if err != nil {
			return err
		}
		for _, t := range tables {
			name := fmt.Sprint(t[0])
			if !strings.HasPrefix(name, privatizeTmpPrefix) {
				continue
			}
			if _, _, err := e.Query(ctx, fmt.Sprintf("DROP TABLE %s.%s", quoteCol(db), quoteCol(name))); err != nil {
				return fmt.Errorf("dropping the leftover %s.%s of an interrupted ldp_privatize: %w", db, name, err)
			}
			logf("dropped %s.%s, left by an ldp_privatize that the previous process did not finish", db, name)
		}
	}
	return nil
}

func pluginDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("LDPSQL_PLUGIN_DIR")
	}
	if dir == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("locating the built-in plugins: %w", err)
		}
		dir = filepath.Dir(exe)
	}
	return filepath.Abs(dir)
}

// registerBuiltins registers (or re-pins, after ldpsql was rebuilt) each built-in plugin found in dir.
// A first start over a new database, or the first after a rebuild, hashes and starts every plugin to
// learn its description: that runs for all plugins at once (0.1–0.7 s each on a loaded machine, which
// one after another made up most of a first start), and the catalog is written afterwards, in name
// order.
func registerBuiltins(ctx context.Context, cat *engine.Catalog, dir string, logf func(string, ...any)) error {
	names := slices.Sorted(maps.Keys(BuiltinPlugins))
	found := make([]builtinFound, len(names))
	for i, name := range names {
		f := &found[i]
		f.name, f.path = name, filepath.Join(dir, BuiltinPlugins[name])
		f.oldPath = f.path
		if _, err := os.Stat(f.path); err != nil {
			logf("built-in plugin %s not found at %s (build it with scripts/build.sh, or set LDPSQL_PLUGIN_DIR): mechanisms using it are unavailable", name, f.path)
			f.skip = true
			continue
		}
		if rec, err := cat.Mechanism(ctx, name); err == nil {
			f.registered = rec
		}
	}
	var wg sync.WaitGroup
	for i := range found {
		if !found[i].skip {
			wg.Go(func() { found[i].inspect(ctx) })
		}
	}
	wg.Wait()
	for _, f := range found {
		switch {
		case f.skip:
			continue
		case f.err != nil:
			return fmt.Errorf("built-in plugin %s at %s: %w", f.name, f.path, f.err)
		case f.refused != "":
			logf("built-in plugin %s at %s has SHA-256 %s, but this ldpsql was built with %s: not registered (rebuild with scripts/build.sh)", f.name, f.path, f.digest, f.refused)
			continue
		case f.unchanged:
			// Mechanisms pinned to another digest at this path were left so by an ldpsql before
			// RegisterBuiltin's transaction, stopped between registering the plugin and re-pinning.
			if n, err := cat.RepinBuiltin(ctx, f.name, f.path, f.path, f.digest); err != nil {
				return err
			} else if n > 0 {
				logf("re-pinned %d mechanism(s) of built-in plugin %s to its binary at %s (sha256 %s): an earlier start stopped before it re-pinned them", n, f.name, f.path, f.digest[:12])
			}
			continue
		}
		raw, err := json.Marshal(f.desc)
		if err != nil {
			return err
		}
		if err := cat.RegisterBuiltin(ctx, engine.Mechanism{Name: f.name, Plugin: f.name, Path: f.path, SHA256: f.digest,
			Description: raw, RegisteredBy: "ldpsql (built-in)", RegisteredAt: time.Now()}, f.oldPath); err != nil {
			return err
		}
		logf("registered built-in plugin %s (%s, sha256 %s)", f.name, f.path, f.digest[:12])
		if f.oldPath != f.path {
			logf("built-in plugin %s moved from %s: the mechanisms that ran it there now run it at %s", f.name, f.oldPath, f.path)
		}
	}
	return nil
}

// builtinFound is what registerBuiltins learns of one built-in plugin binary before it writes the catalog.
type builtinFound struct {
	name, path string
	registered engine.Mechanism // its catalog record, if it has one
	skip       bool             // its binary is not there

	digest    string
	refused   string // the digest this ldpsql was built with, when the binary's differs
	unchanged bool   // registered at this path with this digest
	oldPath   string // where the mechanisms trained on it run it now
	desc      sdk.Description
	err       error
}

// inspect hashes the binary and, unless it is registered unchanged or refused, starts it for its
// description.
func (f *builtinFound) inspect(ctx context.Context) {
	if f.digest, f.err = host.Digest(f.path); f.err != nil {
		return
	}
	if pinned := pinnedDigest(f.name); pinned != "" && pinned != f.digest {
		f.refused = pinned
		return
	}
	if f.registered.Name != "" {
		if f.registered.Path == f.path && f.registered.SHA256 == f.digest {
			f.unchanged = true
			return
		}
		f.oldPath = f.registered.Path // ldpsql was installed elsewhere before: its trained mechanisms follow
	}
	f.desc, f.err = host.Handshake(ctx, f.path, f.digest)
}
