package udf

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/hashicorp/go-hclog"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/plugins/host"
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
func registerBuiltins(ctx context.Context, cat *engine.Catalog, dir string, logf func(string, ...any)) error {
	for name, file := range BuiltinPlugins {
		path := filepath.Join(dir, file)
		if _, err := os.Stat(path); err != nil {
			logf("built-in plugin %s not found at %s (build it with scripts/build.sh, or set LDPSQL_PLUGIN_DIR): mechanisms using it are unavailable", name, path)
			continue
		}
		digest, err := host.Digest(path)
		if err != nil {
			return fmt.Errorf("built-in plugin %s: %w", name, err)
		}
		if pinned := pinnedDigest(name); pinned != "" && pinned != digest {
			logf("built-in plugin %s at %s has SHA-256 %s, but this ldpsql was built with %s: not registered (rebuild with scripts/build.sh)", name, path, digest, pinned)
			continue
		}
		oldPath := path
		if rec, err := cat.Mechanism(ctx, name); err == nil {
			if rec.Path == path && rec.SHA256 == digest {
				continue // registered and unchanged
			}
			oldPath = rec.Path // ldpsql was installed elsewhere before: its trained mechanisms follow
		}
		desc, err := host.Handshake(ctx, path, digest)
		if err != nil {
			return fmt.Errorf("built-in plugin %s at %s: %w", name, path, err)
		}
		raw, err := json.Marshal(desc)
		if err != nil {
			return err
		}
		if err := cat.ReplaceMechanism(ctx, engine.Mechanism{Name: name, Plugin: name, Path: path, SHA256: digest,
			Description: raw, RegisteredBy: "ldpsql (built-in)", RegisteredAt: time.Now()}); err != nil {
			return err
		}
		if err := cat.RepinBuiltin(ctx, name, oldPath, path, digest); err != nil {
			return err
		}
		logf("registered built-in plugin %s (%s, sha256 %s)", name, path, digest[:12])
		if oldPath != path {
			logf("built-in plugin %s moved from %s: the mechanisms that ran it there now run it at %s", name, oldPath, path)
		}
	}
	return nil
}
