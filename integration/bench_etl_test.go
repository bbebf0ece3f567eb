package integration

import (
	"bytes"
	"math"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// `ldpsql bench etl`, #21's scaling figure, end to end on 2,000 rows: the real ldpsql with its pca
// plugin, the real ldpsql-etl (Prism) as a process of its own, Fashion-MNIST from the data directory.
func TestBenchETL(t *testing.T) {
	buildETL(t)
	run := func(args ...string) cliResult {
		cmd := exec.Command(ldpsqlBin, append([]string{"bench", "etl"}, args...)...)
		cmd.Dir = ".." // the repository root, so ../shared/data is found as a user's checkout would
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil && cmd.ProcessState == nil {
			t.Fatal(err)
		}
		return cliResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errOut.String()}
	}
	r := run("--rows", "2000", "--rounds", "2")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	row := regexp.MustCompile(`(?m)^(\d+) +(\d+) +(\d+) \( *[0-9.]+ s\) +(\d+) \( *[0-9.]+ s\) +(\d+)% +([0-9.]+)x$`)
	rounds := row.FindAllStringSubmatch(r.stdout, -1)
	if len(rounds) != 2 {
		t.Fatalf("%d round lines, want 2:\n%s", len(rounds), r.stdout)
	}
	for i, m := range rounds {
		priv, _ := strconv.Atoi(m[2])
		one, _ := strconv.Atoi(m[3])
		two, _ := strconv.Atoi(m[4])
		share, _ := strconv.Atoi(m[5])
		// The share is printed from the unrounded rates: within a point of the printed ones' ratio.
		if m[1] != strconv.Itoa(i+1) || priv <= 0 || one <= 0 || two <= 0 || math.Abs(float64(share)-100*float64(two)/float64(priv)) > 1 {
			t.Errorf("round line %q: want round %d, positive rates, the share two/ldp_privatize", m[0], i+1)
		}
	}
	for _, want := range []string{"2000 Fashion-MNIST training rows", "2 cores / ldp_privatize: ", "2 cores / 1 core: ", "load average"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the report lacks %q:\n%s", want, r.stdout)
		}
	}
	if bad := run("--rows", "0"); bad.code == 0 || !strings.Contains(bad.stderr, "--rows must be 1..60000") {
		t.Errorf("--rows 0: exit %d, %q", bad.code, bad.stderr)
	}
}
