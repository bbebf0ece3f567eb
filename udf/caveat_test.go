package udf_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/dolthub/go-mysql-server/sql"
)

// TestDuchiOnBallWarns: releasing an l1-ball encoder through duchi is made (it is eps-LDP) but warns,
// once per statement, that laplace adds far less noise; on the protected (ledger) path too, when a
// column's default is set to it, and never for laplace or for duchi on a box.
func TestDuchiOnBallWarns(t *testing.T) {
	l := newLedgerEngine(t, buildPlugins(t, "pca", "identity"))
	l.q("CREATE TABLE aux (id INT PRIMARY KEY, f LONGBLOB, y INT)")
	var vals []string
	for i := 0; i < 300; i++ {
		x := float64(i%7) - 3
		vals = append(vals, fmt.Sprintf("(%d, LDP_VECTOR(%g, %g, %g, %g, %g), %d)", i, x, math.Sin(float64(i)), 0.5*x, math.Cos(float64(i)), 0.1, i%2))
	}
	l.q("INSERT INTO aux VALUES " + strings.Join(vals, ", "))
	l.q(`CALL ldp_fit_mechanism('ball', 'pca', 'aux', 'f', '{"d": 4, "l": 3}')`)
	l.q(`CALL ldp_fit_mechanism('cube', 'identity', 'aux', 'f', '{}')`)

	caveats := func(warnings []*sql.Warning) []string {
		var out []string
		for _, w := range warnings {
			if strings.Contains(w.Message, "bounding cube") {
				out = append(out, w.Message)
			}
		}
		return out
	}
	check := func(query string, want int, parts ...string) {
		t.Helper()
		rows, warnings, err := l.asWithWarnings("root", query)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		got := caveats(warnings)
		if len(got) != want {
			t.Fatalf("%s: %d caveats, want %d: %q (rows %d)", query, len(got), want, got, len(rows))
		}
		for _, msg := range got {
			for _, p := range parts {
				if !strings.Contains(msg, p) {
					t.Errorf("%s: caveat %q lacks %q", query, msg, p)
				}
			}
		}
	}
	// ε_x = 4·0.5 = 2 for ldp_privatize; 4 for LDP_ENCODE. d = 4: C_4 = 8/3.
	check("CALL ldp_privatize('aux', 'f', 'y', 'rel_duchi', 4, 0.5, 'ball', 'duchi', 2)", 1,
		`mechanism "ball"`, "d = 4, radius 3", "epsilon = 2", "use laplace")
	if n := l.count("SELECT count(*) FROM ldpsql.rel_duchi"); n != 300 {
		t.Fatalf("the warned release wrote %d rows, not 300", n)
	}
	check("SELECT LDP_ENCODE(f, 4, 'ball', 'duchi') FROM aux", 1, "epsilon = 4")
	check("SELECT LDP_ENCODE(f, 4, 'ball', 'duchi'), LDP_ENCODE(f, 1, 'ball', 'duchi') FROM aux", 2)
	check("SELECT LDP_ENCODE(f, 4, 'ball', 'laplace'), LDP_ENCODE(f, 4, 'ball', 'privunit') FROM aux", 0)
	check("SELECT LDP_ENCODE(f, 4, 'cube', 'duchi') FROM aux", 0)
	check("CALL ldp_set_default_mechanism('aux', 'f', 'ball', 'duchi')", 1, "at every epsilon", "at least 3.6×")
	check("CALL ldp_set_default_mechanism('aux', 'f', 'ball', 'laplace')", 0)

	// The ledger's path: a protected table, its releases charged.
	l.q("CALL ldp_set_budget('aux', 100)")
	check("SELECT LDP_ENCODE(f, 4, 'ball', 'duchi') FROM aux", 1, "epsilon = 4")
	check("CALL ldp_privatize('aux', 'f', 'y', 'rel_duchi2', 4, 0.5, 'ball', 'duchi', 2)", 1, "epsilon = 2")
}
