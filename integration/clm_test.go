package integration

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var clmAuditRowRE = regexp.MustCompile(`(?m)^\| (LDP_ENCODE\(c, laplace\)) +\| ([0-9.e+-]+) +\| ([0-9.e+-]+) +\| ([0-9.+-]+|[+-]Inf|NaN) +\| ([0-9.+-]+|[+-]Inf|NaN) +\| ([0-9]+) +\| (PASS|FAIL) +\|$`)

// A CLM trained with `ldpsql train --kind clm` on 200 min-max scaled WDBC rows, then `ldpsql audit
// encode:c` at ε = 1 through the real plugin, the host's clip into the recorded ℓ1 ball and its Laplace
// randomiser, with the default candidate inputs (±10⁶ along a few directions): the audit passes, and
// its point estimate stays at or below ε (the ball's diameter 2l bounds how far apart any two
// encodings can be).
func TestCLMTrainedAudit(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "clm.duckdb")
	run := cliRunner(t)
	_, vals := wdbcAuxRows(t, 200, false)
	run("sql", "--db", db, "-e", "CREATE TABLE aux (id INT PRIMARY KEY, features LONGBLOB NOT NULL); "+
		"INSERT INTO aux VALUES "+strings.Join(vals, ", "))
	out := run("train", "--db", db, "--kind", "clm", "--name", "c", "--table", "aux",
		"--params", `{"d": 4, "l": 2, "epochs": 5, "eps_pretrain": 20}`)
	if !strings.Contains(out, `mechanism "c" is registered`) {
		t.Fatalf("ldpsql train:\n%s", out)
	}
	out = run("audit", "encode:c", "--db", db, "--eps", "1", "--samples", "200000")
	got := clmAuditRowRE.FindStringSubmatch(out)
	if got == nil || got[7] != "PASS" {
		t.Fatalf("no PASS row in\n%s", out)
	}
	point, _ := strconv.ParseFloat(got[4], 64)
	t.Logf("ε̂ point %s, lower %s", got[4], got[5])
	if point > 1.2 {
		t.Errorf("point estimate %v above ε = 1\n%s", point, out)
	}
}
