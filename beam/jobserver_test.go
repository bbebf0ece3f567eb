package beam

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// A job submitted to a Beam job server over the portable Job API, as to a Flink or Spark cluster's job
// server (--runner universal or flink or spark with --endpoint): here Beam's own Prism, started as a
// process of its own, with the workers in loopback in this process. The job commits its releases as
// on Prism in process, and a job run on Prism in process afterwards is not sent to that server.
func TestJobOnAJobServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Beam's prism job server")
	}
	dir := t.TempDir()
	prism := filepath.Join(dir, "prism")
	if out, err := exec.Command("go", "build", "-o", prism, "github.com/apache/beam/sdks/v2/go/cmd/prism").CombinedOutput(); err != nil {
		t.Fatalf("building prism: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	server := exec.Command(prism, "--job_port", strconv.Itoa(port), "--serve_http=false", "--log_level", "warn")
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Process.Kill(); server.Wait() })
	endpoint := "127.0.0.1:" + strconv.Itoa(port)
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", endpoint); err == nil {
			c.Close()
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("prism does not listen on %s", endpoint)
		}
	}

	rows, labels := wdbc(t)
	writeCSV(t, filepath.Join(dir, "rows.csv"), rows, labels, 0, 1)
	job := Job{In: filepath.Join(dir, "rows.csv"), Cols: Columns{ID: "id", Label: "y"}, Spec: Spec{Mechanism: pcaFile(t, rows), Eps: 4, Label: "y", K: 2, Lambda: 0.7},
		Out: Output{Dir: filepath.Join(dir, "remote")}, Runner: "universal", Endpoint: endpoint, EnvironmentType: "LOOPBACK"}
	sum, err := Run(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Rows != len(rows) || len(sum.Files) != 1 {
		t.Fatalf("on the job server: %+v, want %d rows in one file", sum, len(rows))
	}
	if got := readReleases(t, sum.Files[0]); len(got) != len(rows) {
		t.Errorf("%d distinct ids released, want %d", len(got), len(rows))
	}

	server.Process.Kill()
	server.Wait()
	job.Runner, job.Endpoint, job.EnvironmentType, job.Out.Dir = "prism", "", "", filepath.Join(dir, "local")
	if sum, err := Run(context.Background(), job); err != nil || sum.Rows != len(rows) {
		t.Errorf("on Prism in process after a job server's job: %+v, %v", sum, err)
	}
}
