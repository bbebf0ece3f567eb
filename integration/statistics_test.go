package integration

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var statusLine = regexp.MustCompile(`Uptime: \d+  Threads: \d+  Questions: \d+  Slow queries: 0  Opens: 0  Flush tables: 1  Open tables: 0  Queries per second avg: \d+\.\d{3}`)

// COM_STATISTICS: `mysqladmin status` and the mysql client's `status` get MySQL's one-line answer, and
// the connection goes on working after it.
func TestMySQLAdminStatus(t *testing.T) {
	admin := mariaDBTool(t, "mysqladmin")
	client := mariaDBTool(t, "mysql")
	s := startServer(t, filepath.Join(t.TempDir(), "stat.duckdb"))
	host, port, _ := strings.Cut(s.addr, ":")
	out, err := exec.Command(admin, "-h", host, "-P", port, "-u", "root", "status").CombinedOutput()
	if err != nil || !statusLine.Match(out) {
		t.Errorf("mysqladmin status: %v\n%s", err, out)
	}
	out, err = exec.Command(client, "-h", host, "-P", port, "-u", "root", "ldpsql", "-e", "status; SELECT 40 + 2 AS answer").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Threads: ") || !strings.Contains(string(out), "answer\n42\n") {
		t.Errorf("mysql -e 'status; SELECT …': %v\n%s", err, out)
	}
}
