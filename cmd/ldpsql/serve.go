package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/udf"
)

func serveCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve", "Serve the MySQL wire protocol over a DuckDB file until SIGINT or SIGTERM.",
		`  ldpsql serve
  ldpsql serve --addr 127.0.0.1:3306 --db /var/lib/ldpsql/data.duckdb
  LDPSQL_ROOT_PASSWORD=secret ldpsql serve --addr 0.0.0.0:3306
`, stderr)
	addr := fs.String("addr", "127.0.0.1:3306", "TCP address to listen on (port 0 picks a free port)")
	db := fs.String("db", engine.DefaultPath, "DuckDB file (created if missing), or :memory:")
	password := fs.String("root-password", os.Getenv("LDPSQL_ROOT_PASSWORD"),
		"password of user root (default $LDPSQL_ROOT_PASSWORD); empty is allowed only on loopback addresses")
	pluginTimeout := fs.Duration("plugin-timeout", 30*time.Second, "longest an encoder plugin call may take before the plugin is killed (restarted at the next call)")
	pluginDir := fs.String("plugin-dir", "", "directory of the built-in plugin binaries (default $LDPSQL_PLUGIN_DIR, else beside this executable)")
	secureFilePriv := fs.String("secure-file-priv", "",
		"the only directory whose files LOAD_FILE, SELECT … INTO OUTFILE/DUMPFILE and LOAD DATA INFILE may touch, for users with the FILE privilege (created if missing); NULL disables them (default "+engine.DefaultSecureFileDir+" beside --db)")
	debugAddr := fs.String("debug-addr", "", "loopback address for Go's profiling endpoints (/debug/pprof/); off by default")
	walCheckpoint := fs.String("wal-autocheckpoint", "", "WAL size at which a commit checkpoints the DuckDB file, e.g. 64MB (default DuckDB's, 16MB)")
	duckThreads := fs.Int("duckdb-threads", engine.DefaultServerDuckDBThreads, "DuckDB threads (a query's parallelism); 1 suits many concurrent clients (more make each statement busy-wait for its workers), 0 is one per core, for a few large analytical queries")
	grace := fs.Duration("shutdown-grace", 30*time.Second, "on SIGINT or SIGTERM, how long running statements may take to finish before they are cancelled (then the database is checkpointed and closed)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *duckThreads < 0 {
		return fmt.Errorf("--duckdb-threads %d must be ≥ 0", *duckThreads)
	}
	if *debugAddr != "" {
		addr, err := serveDebug(*debugAddr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "ldpsql debug endpoints on http://%s/debug/pprof/\n", addr)
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "ldpsql: "+format+"\n", a...) }
	opts := []engine.Option{engine.WithLog(func(msg string) { fmt.Fprintln(stderr, msg) }), engine.WithDuckDBThreads(*duckThreads)}
	if *walCheckpoint != "" {
		opts = append(opts, engine.WithWALAutocheckpoint(*walCheckpoint))
	}
	if *secureFilePriv != "" {
		opts = append(opts, engine.WithSecureFilePriv(*secureFilePriv))
	}
	e, err := openEngine(*db, udf.Config{PluginDir: *pluginDir, Logf: logf, PluginCallTimeout: *pluginTimeout}, opts...)
	if err != nil {
		return err
	}
	defer e.Close()
	for _, t := range e.DroppedUnfinished() {
		logf("dropped %s, left empty by a CREATE TABLE … AS SELECT that the previous process did not finish", t)
	}
	if dir, err := e.CreateSecureFileDir(); err != nil {
		return err
	} else if dir != engine.NoSecureFilePriv {
		logf("file access through SQL (FILE privilege) is confined to %s", dir)
	} else {
		logf("file access through SQL is off (secure_file_priv is NULL)")
	}
	srv, err := e.Serve(engine.ServerConfig{Addr: *addr, RootPassword: *password, Version: "8.0.31-ldpsql-" + version})
	if err != nil {
		return err
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- srv.Start() }()
	fmt.Fprintf(stdout, "ldpsql %s listening on %s (database %s)\n", version, srv.Addr(), *db)
	// <db>.serve tells a command run with --db on this file which --addr to use instead.
	removeInfo, err := writeServeInfo(*db, srv.Addr().String())
	if err != nil {
		logf("could not write %s (commands given --db on this file will not name the --addr to use): %v", serveInfoPath(*db), err)
	}
	defer removeInfo()
	select {
	case sig := <-signals:
		fmt.Fprintf(stderr, "ldpsql: %s: shutting down\n", sig)
		if err := srv.Close(); err != nil {
			fmt.Fprintf(stderr, "ldpsql: closing server: %v\n", err)
		}
		<-done
		// Let running statements finish (a write cut off would keep DuckDB from checkpointing), and
		// cancel those that take longer than the grace period: they roll back, charging nothing.
		go func() {
			if sig, ok := <-signals; ok {
				fmt.Fprintf(stderr, "ldpsql: %s again: cancelling the running statements now\n", sig)
				e.CancelRunning()
			}
		}()
		rep := e.Drain(*grace, 60*time.Second)
		switch {
		case rep.Unfinished > 0:
			logf("%d of %d running statements had not ended 60 s after they were cancelled", rep.Unfinished, rep.Running)
		case rep.Cancelled > 0:
			logf("cancelled %d of %d running statements, still running after the grace period (%v)", rep.Cancelled, rep.Running, *grace)
		case rep.Running > 0:
			logf("%d running statements finished", rep.Running)
		}
	case err := <-done:
		if err != nil {
			return err
		}
	}
	// The deferred Close checkpoints and closes the DuckDB file.
	if err := e.Close(); err != nil {
		return err
	}
	fmt.Fprintln(stderr, "ldpsql: database closed cleanly")
	return nil
}

// serveDebug serves Go's profiling endpoints (goroutine counts, CPU and heap profiles) on a loopback
// address only: they reveal the server's internals, never data, but are no business of remote clients.
func serveDebug(addr string) (string, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--debug-addr %q: %v", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", fmt.Errorf("--debug-addr %q: the profiling endpoints are served on a loopback address only", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	go func() { _ = http.Serve(ln, mux) }()
	return ln.Addr().String(), nil
}
