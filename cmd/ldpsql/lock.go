package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/ldpsql/ldpsql/engine"
)

// While it runs, `ldpsql serve` writes the address clients reach it at and its process id to a small
// file beside the database (<db>.serve), so that a command given --db on the file it holds can name
// the --addr to use instead. It removes the file when it exits; a file left behind by a killed server
// is ignored, because it is only read when DuckDB reports the lock, and only believed when the PID in
// it is the one DuckDB names as the lock's holder.

type serveInfo struct {
	Addr string `json:"addr"`
	PID  int    `json:"pid"`
}

func serveInfoPath(db string) string { return db + ".serve" }

// writeServeInfo records that this process serves db at listenAddr; the returned function removes the
// record if it is still this process's. An in-memory database has no file and no record.
func writeServeInfo(db, listenAddr string) (remove func(), err error) {
	remove = func() {}
	if db == engine.MemoryPath {
		return remove, nil
	}
	data, _ := json.Marshal(serveInfo{Addr: clientAddr(listenAddr), PID: os.Getpid()})
	path := serveInfoPath(db)
	tmp := path + ".tmp" + strconv.Itoa(os.Getpid())
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return remove, err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return remove, err
	}
	return func() {
		if info, ok := readServeInfo(db); ok && info.PID == os.Getpid() {
			_ = os.Remove(path)
		}
	}, nil
}

func readServeInfo(db string) (serveInfo, bool) {
	var info serveInfo
	data, err := os.ReadFile(serveInfoPath(db))
	if err != nil || json.Unmarshal(data, &info) != nil || info.Addr == "" {
		return serveInfo{}, false
	}
	return info, true
}

// clientAddr is the address a client on this machine reaches a listener on: the loopback address for
// a listener on every interface.
func clientAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if ip.To4() != nil {
			host = "127.0.0.1"
		} else {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}

// DuckDB: `IO Error: Could not set lock on file "/x/data.duckdb": Conflicting lock is held in
// /usr/bin/ldpsql (PID 21793). See also …`.
var duckLockRE = regexp.MustCompile(`Could not set lock on file .*?(?:held in (.*) \(PID (\d+)\))?\.?(?: See also|$)`)

// lockedError is the error for a database file that another process has open.
type lockedError struct {
	path, holder, addr string
	pid                int
	err                error
}

func (e *lockedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the database file %s is locked by another process", e.path)
	switch {
	case e.addr != "":
		fmt.Fprintf(&b, ", `ldpsql serve` (PID %d) listening on %s; use --addr %s to talk to it", e.pid, e.addr, e.addr)
	case e.pid != 0:
		fmt.Fprintf(&b, " (PID %d, %s: a running `ldpsql serve`?); use --addr HOST:PORT to talk to it", e.pid, e.holder)
	default:
		b.WriteString(" (a running `ldpsql serve`?); use --addr HOST:PORT to talk to it")
	}
	b.WriteString(" (--db opens the file in this process, and DuckDB lets one process at a time have it)")
	return b.String()
}

func (e *lockedError) Unwrap() error { return e.err }

// explainLock turns DuckDB's lock error on opening path into a lockedError; other errors are returned
// as they are.
func explainLock(path string, err error) error {
	m := duckLockRE.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	le := &lockedError{path: path, holder: m[1], err: err}
	le.pid, _ = strconv.Atoi(m[2])
	if info, ok := readServeInfo(path); ok && (le.pid == 0 || info.PID == le.pid) {
		le.addr, le.pid = info.Addr, info.PID
	}
	return le
}
