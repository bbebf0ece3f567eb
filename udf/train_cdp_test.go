package udf_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// CDP training on a protected auxiliary table charges ε_CDP to every unit before training, records
// what the run met (σ, steps, spent ε ≤ the target) in ldp_models.params, and a table whose units
// lack the budget trains nothing (the job fails naming the budget). Training it without CDP leaves a
// warning on the job. Its units are people spelled two ways ('P7', 'p7') in an insensitive column: one
// unit each, charged once under the key a release of either row charges ('p7').
func TestCDPTrainingChargesTheLedger(t *testing.T) {
	l := newLedgerEngine(t, buildPlugins(t, "vlm"))
	l.q("CREATE TABLE aux (id INT PRIMARY KEY, person VARCHAR(20) NOT NULL, f LONGBLOB NOT NULL)")
	r := rand.New(rand.NewPCG(1, 2))
	var vals []string
	for i := range 300 {
		v := make([]string, 10)
		for j := range v {
			v[j] = fmt.Sprint(r.IntN(2))
		}
		person := fmt.Sprintf("p%d", i/2)
		if i%2 == 0 { // upper case first, which GMS's DISTINCT returns
			person = strings.ToUpper(person)
		}
		vals = append(vals, fmt.Sprintf("(%d, '%s', LDP_VECTOR(%s))", i+1, person, strings.Join(v, ", ")))
	}
	l.q("INSERT INTO aux VALUES " + strings.Join(vals, ", "))
	l.q("CALL ldp_set_budget('aux', 3, 'charge', 'person')")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	wait := func(q string) (string, string, string) {
		id := toInt64(t, l.q(q)[0][0])
		job, err := l.e.Jobs.Wait(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return job.State, job.Error, job.Warning
	}
	const params = `{"d": 2, "l": 2, "hidden": [8], "epochs": 2, "batch_size": 50, "eps_pretrain": 10, "cdp": {"epsilon": 2, "delta": 1e-4}}`
	if state, msg, _ := wait(`CALL ldp_train_mechanism('c1', 'vlm', 'aux', 'f', '` + params + `')`); state != "succeeded" {
		t.Fatalf("CDP training: %s %s", state, msg)
	}
	spent := l.q("SELECT COUNT(*), MIN(spent), MAX(spent) FROM ldpsql_catalog.ldp_budget_units WHERE table_name = 'aux'")
	if toInt64(t, spent[0][0]) != 150 || toFloat(t, spent[0][1]) != 2 || toFloat(t, spent[0][2]) != 2 {
		t.Fatalf("units charged: %v, want all 150 at ε = 2", spent)
	}
	if n := l.count("SELECT count(*) FROM ldpsql_catalog.ldp_budget_units WHERE table_name = 'aux' AND unit_key <> lower(unit_key)"); n != 0 {
		t.Fatalf("%d units charged under a spelling other than the canonical 'p7'", n)
	}
	var raw string
	if err := l.e.DuckDB.QueryRow("SELECT params FROM ldpsql_catalog.ldp_models WHERE name = 'c1'").Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var m map[string]map[string]float64
	_ = json.Unmarshal([]byte(raw), &m)
	c := m["cdp"]
	if c["epsilon"] != 2 || c["delta"] != 1e-4 || !(c["spent_epsilon"] <= 2 && c["spent_epsilon"] > 1.9) || c["steps"] != 12 || !(c["noise_multiplier"] > 0) {
		t.Fatalf("recorded params %s", raw)
	}
	// 1 of the 3 budget left: a second CDP run at ε = 2 is refused before training.
	if state, msg, _ := wait(`CALL ldp_train_mechanism('c2', 'vlm', 'aux', 'f', '` + params + `')`); state != "failed" || !strings.Contains(msg, "budget") {
		t.Fatalf("over budget: %s %q", state, msg)
	}
	if n := l.q("SELECT COUNT(*) FROM ldpsql_catalog.ldp_models WHERE name = 'c2'"); toInt64(t, n[0][0]) != 0 {
		t.Fatal("the over-budget run registered a model")
	}
	// Without CDP: trained (a DBA may), with a warning on the job.
	if state, msg, warn := wait(`CALL ldp_train_mechanism('plain', 'vlm', 'aux', 'f', '{"d": 2, "l": 2, "hidden": [8], "epochs": 1, "eps_pretrain": 10}')`); state != "succeeded" ||
		!strings.Contains(warn, "without CDP on protected table") {
		t.Fatalf("without CDP: %s %q, warning %q", state, msg, warn)
	}
}

// The task-aware mechanism trained under CDP on a protected labelled table: every unit charged ε_CDP
// before training, the run's record in ldp_models.params, the mechanism usable.
func TestTaskAwareCDPChargesTheLedger(t *testing.T) {
	l := newLedgerEngine(t, buildPlugins(t, "task_aware"))
	fillWDBCMinMax(l)
	l.q("CREATE TABLE aux AS SELECT * FROM wdbc WHERE id <= 398")
	l.q("CALL ldp_set_budget('aux', 5, 'charge', 'id')")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	id := toInt64(t, l.q(`CALL ldp_train_mechanism('tacdp', 'task_aware', 'aux', 'features', '{"label": "label", "eps": 10, "epochs": 20, "task_epochs": 20, "batch_size": 40, "input_range": [0, 1], "classes": 2, "cdp": {"epsilon": 3}}')`)[0][0])
	if job, err := l.e.Jobs.Wait(ctx, id); err != nil || job.State != "succeeded" {
		t.Fatalf("job: %s %s %v", job.State, job.Error, err)
	}
	spent := l.q("SELECT COUNT(*), MIN(spent), MAX(spent) FROM ldpsql_catalog.ldp_budget_units WHERE table_name = 'aux'")
	if toInt64(t, spent[0][0]) != 398 || toFloat(t, spent[0][1]) != 3 || toFloat(t, spent[0][2]) != 3 {
		t.Fatalf("units charged: %v, want all 398 at ε = 3", spent)
	}
	var raw string
	if err := l.e.DuckDB.QueryRow("SELECT params FROM ldpsql_catalog.ldp_models WHERE name = 'tacdp'").Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var m map[string]map[string]float64
	_ = json.Unmarshal([]byte(raw), &m)
	if c := m["cdp"]; !(c["spent_epsilon"] <= 3 && c["spent_epsilon"] > 2.9) || c["steps"] != 40*10 {
		t.Fatalf("recorded params %s", raw)
	}
	if n := l.q("SELECT COUNT(*) FROM wdbc WHERE LDP_ENCODE(features, 10, 'tacdp') IS NOT NULL AND id > 398"); toInt64(t, n[0][0]) != 171 {
		t.Fatalf("releases: %v", n)
	}
}
