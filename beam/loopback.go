package beam

import (
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Beam's Go SDK (runnerlib.Execute, through v2.77.0) creates an empty file, os.TempDir()/
// beamloopbackworker-*, as the "worker binary" of every pipeline run in loopback mode (Prism's
// default) and never removes it (its own TODO, apache/beam#27569). A cron job running ldpsql-etl
// every minute would leave half a million of them in /tmp a year. withoutLoopbackLeftovers removes
// the one its run made (only a loopback run makes one).
//
// Which file a run made is not reported, so it is found by difference: the empty
// beamloopbackworker-* files that appeared in os.TempDir() during the run. Runs in this process take
// turns (loopbackMu), so the difference holds only this run's file, unless another process ran a
// pipeline at the same time. Such a file is needed only until its run has staged it, a few
// milliseconds after it is made, so it is removed only when it is the sole new file (then it is
// this run's, and this run has staged it) or older than leftoverAge (then whoever made it has staged
// it long since); anything else stays. By the same age rule a run also removes the empty files that
// were there before it: those of runs killed before they could clean up (SIGKILL, a crash).
const loopbackPattern = "beamloopbackworker-*"

const leftoverAge = 30 * time.Second

var loopbackMu sync.Mutex

func withoutLoopbackLeftovers(loopback bool, run func() error) error {
	if !loopback { // the run makes no such file: any that appears is another process's
		return run()
	}
	loopbackMu.Lock()
	defer loopbackMu.Unlock()
	dir := os.TempDir()
	before := loopbackFiles(dir)
	err := run()
	after := loopbackFiles(dir)
	fresh := 0
	for name := range after {
		if !before[name] {
			fresh++
		}
	}
	for name := range after {
		info, statErr := os.Lstat(name)
		if statErr != nil || !info.Mode().IsRegular() || info.Size() != 0 {
			continue
		}
		if (!before[name] && fresh == 1) || time.Since(info.ModTime()) > leftoverAge {
			os.Remove(name)
		}
	}
	return err
}

// loopbackFiles lists dir's beamloopbackworker-* files by path.
func loopbackFiles(dir string) map[string]bool {
	names, _ := filepath.Glob(filepath.Join(dir, loopbackPattern))
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
}
