package integration

import (
	"database/sql"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Mechanism diagnostics over the MySQL protocol: fitting stores them in ldp_models.params, a collapsed
// encoder (PCA with eight components of rank-2 data) is flagged and a good one (two components) is
// not, ldp_evaluate_mechanism returns them as rows, and `ldpsql mechanisms compare` prints them side by
// side from the file.
func TestMechanismDiagnosticsOverTheWire(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "data.duckdb")
	s := startServer(t, dbPath)
	db := s.connect("root", "")
	fillAux(t, db, "aux", 3000) // two directions of standard deviation 3, six of 0.1
	mustExec(t, db, `CALL ldp_fit_mechanism('p2', 'pca', 'aux', 'f', '{"d": 2, "l": 10, "eps_target": 16}')`)
	mustExec(t, db, `CALL ldp_fit_mechanism('p8', 'pca', 'aux', 'f', '{"d": 8, "l": 10, "eps_target": 16}')`)
	diag := func(model string) map[string]any {
		t.Helper()
		var raw string
		if err := db.QueryRow("SELECT params FROM ldpsql_catalog.ldp_models WHERE name = ?", model).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		var params struct {
			D           int            `json:"d"`
			Diagnostics map[string]any `json:"diagnostics"`
		}
		if err := json.Unmarshal([]byte(raw), &params); err != nil || params.D == 0 || params.Diagnostics == nil {
			t.Fatalf("%s params %s: %v", model, raw, err)
		}
		return params.Diagnostics
	}
	if d := diag("p2"); d["collapsed"] != false || d["active_dims"] != 2.0 || d["eps"] != 16.0 {
		t.Errorf("p2: %v", d)
	}
	if d := diag("p8"); d["collapsed"] != true || d["active_dims"] != 2.0 || !strings.Contains(d["warnings"].([]any)[0].(string), "only 2 of 8") {
		t.Errorf("p8: %v", d)
	}
	if !strings.Contains(s.stderr.String()+s.stdoutText(), `mechanism "p8" at eps = 16 on aux: WARNING: collapse`) {
		t.Errorf("no collapse warning in the server log:\n%s%s", s.stdoutText(), s.stderr)
	}

	rows, err := db.Query(`CALL ldp_evaluate_mechanism('p2', 'aux', 'f', 16)`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]sql.NullFloat64{}
	for rows.Next() {
		var mech, metric, note string
		var v sql.NullFloat64
		if err := rows.Scan(&mech, &metric, &v, &note); err != nil {
			t.Fatal(err)
		}
		got[metric] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// noise variance 2(2·10/16)² = 3.125 per dimension against latent variances of about 9: the release
	// of p2 reconstructs better than the mean predictor.
	if got["collapsed"].Float64 != 0 || !got["private_vs_mean"].Valid || got["private_vs_mean"].Float64 >= 0.9 || got["noise_var"].Float64 != 3.125 {
		t.Errorf("ldp_evaluate_mechanism: %v", got)
	}

	s.stop() // the command line opens the file itself
	cmd := exec.Command(ldpsqlBin, "mechanisms", "compare", "--db", dbPath, "--table", "aux", "--column", "f", "--eps", "16", "p2", "p8")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ldpsql mechanisms compare: %v\n%s", err, out)
	}
	for _, want := range []string{"| metric ", "| p2 ", "| p8 ", "| active_dims ", "| collapsed ", "WARNING p8: collapse: only 2 of 8"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("compare output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "WARNING p2") {
		t.Errorf("p2 is flagged:\n%s", out)
	}
}
