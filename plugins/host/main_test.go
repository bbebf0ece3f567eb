package host

import (
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/ldpsql/ldpsql/plugins/internal/plugintest"
)

// bins holds the plugin binaries TestMain builds, by name: pca, identity,
// crash, hang, liar, notplugin.
var (
	bins   map[string]string
	binDir string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	dir, err := os.MkdirTemp("", "ldpsql-plugins-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	t0 := time.Now()
	bins, err = plugintest.Build(dir,
		"./plugins/builtin/pca", "./plugins/builtin/identity",
		"./plugins/host/testdata/crash", "./plugins/host/testdata/hang",
		"./plugins/host/testdata/liar", "./plugins/host/testdata/notplugin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if testing.Verbose() {
		fmt.Printf("built plugin binaries in %v\n", time.Since(t0).Round(time.Millisecond))
	}
	code := m.Run()
	// Every test closes its Host: no plugin process may outlive them.
	if pids := plugintest.Processes(dir); len(pids) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: plugin processes leaked: %v\n", pids)
		return 1
	}
	return code
}
