// Package plugintest builds plugin binaries for tests and finds their
// processes.
package plugintest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// Build runs one `go build -o dir pkgs...` from the module root (pkgs are
// module-relative, e.g. "./plugins/builtin/pca") and returns the binaries'
// absolute paths by the last element of each package path.
func Build(dir string, pkgs ...string) (map[string]string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(goBin, "env", "GOMOD").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(goBin, append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go build %v: %v\n%s", pkgs, err, stderr.String())
	}
	bins := map[string]string{}
	for _, p := range pkgs {
		name := filepath.Base(p)
		bins[name] = filepath.Join(dir, name)
	}
	return bins, nil
}

// Processes returns the pids of live processes whose executable lies in dir
// (Linux /proc; nil elsewhere). Zombies count as live.
func Processes(dir string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	dir = filepath.Clean(dir) + string(filepath.Separator)
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err == nil && strings.HasPrefix(exe, dir) {
			pids = append(pids, pid)
			continue
		}
		// A zombie has no exe link; its stat names the command.
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
				if ppid := fields(string(stat[i+2:])); ppid == os.Getpid() {
					pids = append(pids, pid)
				}
			}
		}
	}
	return pids
}

// fields returns the ppid from the part of /proc/pid/stat after the command.
func fields(s string) int {
	f := strings.Fields(s)
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// Alive reports whether pid names a process that has not been reaped.
func Alive(pid int) bool {
	_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid)))
	return err == nil
}
