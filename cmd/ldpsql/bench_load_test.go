package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ldpsql/ldpsql/udf"
)

func TestBenchLoad(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := benchCmd([]string{"load", "--clients", "3", "--duration", "1s", "--units", "200"}, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s%s", err, out.String(), errOut.String())
	}
	for _, want := range []string{"select ", "insert ", "flip_label ", "rr_frequency ", "laplace ", "charged ", "ledger: ", "inserts: ", "DuckDB threads 1", "ledger audit: exact"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
	if _, known := processCPU(); known {
		m := regexp.MustCompile(`CPU: ([0-9.]+) s user\+system .* ([0-9]+) µs per statement`).FindStringSubmatch(out.String())
		if m == nil || m[1] == "0.00" || m[2] == "0" {
			t.Errorf("the report lacks a CPU time > 0 per statement (%q):\n%s", m, out.String())
		}
	}
	for _, bad := range [][]string{{"load", "--mix", "select,nope"}, {"load", "--mix", "insert=0"}, {"load", "--release-rows", "20", "--units", "10"}, {"load", "--duckdb-threads", "-1"}} {
		if err := benchCmd(bad, &out, &errOut); err == nil {
			t.Errorf("bench %v succeeded", bad)
		}
	}
}

// The audit compares the ledger with what the clients counted, unit by unit, and fails on any difference.
func TestBenchLoadAudit(t *testing.T) {
	e, err := openEngine(filepath.Join(t.TempDir(), "db.duckdb"), udf.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	const units = 50
	if err := loadSetup(e, units, 100, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Query(e.NewContext(context.Background()), "SELECT id, LDP_LAPLACE(x, 0.5, 0, 100) FROM people WHERE id BETWEEN 0 AND 9"); err != nil {
		t.Fatal(err)
	}
	client := &loadClient{spent: make([]float64, units), releases: make([]int64, units)}
	for u := 0; u < 10; u++ {
		client.spent[u], client.releases[u] = 0.5, 1
	}
	var out bytes.Buffer
	if err := auditLoad(&out, e, []*loadClient{client}, units, 100); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	client.spent[3] = 1
	out.Reset()
	if err := auditLoad(&out, e, []*loadClient{client}, units, 100); err == nil || !strings.Contains(out.String(), "unit 3: charged ε 1") {
		t.Fatalf("a unit charged differently passed the audit: %v\n%s", err, out.String())
	}
}
