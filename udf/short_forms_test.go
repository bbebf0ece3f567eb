package udf_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ldpsql/ldpsql/udf"
)

// fillShort creates name(id, f, y) with n rows of 2-feature vectors (row 49, if any, with NULL f).
func (l *ledgerT) fillShort(name string, n int) {
	l.t.Helper()
	l.q(fmt.Sprintf("CREATE TABLE %s (id INT PRIMARY KEY, f LONGBLOB, y INT)", name))
	var vals []string
	for i := 0; i < n; i++ {
		vals = append(vals, fmt.Sprintf("(%d, LDP_VECTOR(%g, %g), %d)", i, float64(i%10)/10, 0.5, i%3))
	}
	l.q(fmt.Sprintf("INSERT INTO %s VALUES %s", name, strings.Join(vals, ", ")))
	if n > 49 {
		l.q(fmt.Sprintf("UPDATE %s SET f = NULL WHERE id = 49", name))
	}
}

// releasesByUnit maps ldp_releases' units of table to their input digests, for the releases at eps.
func (l *ledgerT) releasesByUnit(table string, eps float64) map[string][]string {
	l.t.Helper()
	rows, err := l.e.DuckDB.Query(`SELECT unit_key, input_digest, function_name, mechanism, randomiser FROM ldpsql_catalog.ldp_releases
		WHERE table_name = ? AND eps = ? ORDER BY id`, table, eps)
	if err != nil {
		l.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var unit, digest, fn, mech, rnd string
		if err := rows.Scan(&unit, &digest, &fn, &mech, &rnd); err != nil {
			l.t.Fatal(err)
		}
		out[unit] = append(out[unit], digest+" "+fn+" "+mech+" "+rnd)
	}
	return out
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one saying %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not say %q", err, p)
		}
	}
}

// LDP_ENCODE(col, eps) and LDP_ENCODE_JSON(col, eps): the DBA's default, its checks, the rewrite into
// the long form (same releases, same charges and memo keys on a protected table), and the errors for
// everything that has no default.
func TestShortFormEncode(t *testing.T) {
	l := newLedgerEngine(t, buildIdentityPlugin(t))
	l.q("CREATE TABLE aux (id INT PRIMARY KEY, f LONGBLOB)")
	l.q("INSERT INTO aux VALUES (1, LDP_VECTOR(0, 0)), (2, LDP_VECTOR(1, 1))")
	l.q(`CALL ldp_fit_mechanism('box', 'identity', 'aux', 'f', '{}')`)
	l.fillShort("raw_rows", 50)
	l.fillShort("open_rows", 20)
	l.createAnalyst("analyst")

	// Before any default.
	_, err := l.as("root", "SELECT id, LDP_ENCODE(f, 1) FROM raw_rows")
	wantErr(t, err, "LDP_ENCODE(col, eps): no default mechanism for ldpsql.raw_rows.f; CALL ldp_set_default_mechanism('ldpsql.raw_rows', 'f', 'mechanism', 'randomiser') first, or write LDP_ENCODE(f, eps, 'mechanism')")

	// The procedure's checks.
	for q, want := range map[string]string{
		"CALL ldp_set_default_mechanism('nope', 'f', 'box')":                         "table not found",
		"CALL ldp_set_default_mechanism('raw_rows', 'g', 'box')":                     `table ldpsql.raw_rows has no column "g" (its columns: id, f, y)`,
		"CALL ldp_set_default_mechanism('raw_rows', 'f', 'nope')":                    `unknown mechanism "nope"`,
		"CALL ldp_set_default_mechanism('raw_rows', 'f', 'identity')":                `mechanism "identity" has no fitted model`,
		"CALL ldp_set_default_mechanism('raw_rows', 'f', 'box', 'rr')":               `randomiser "rr" cannot release mechanism "box"`,
		"CALL ldp_set_default_mechanism('ldpsql_catalog.ldp_models', 'name', 'box')": "is a catalog table",
		"CALL ldp_drop_default_mechanism('raw_rows', 'f')":                           "ldpsql.raw_rows.f has no default mechanism",
	} {
		_, err := l.as("root", q)
		wantErr(t, err, want)
	}
	_, err = l.as("analyst", "CALL ldp_set_default_mechanism('raw_rows', 'f', 'box')")
	wantErr(t, err, "denied")

	// Set (names as the table spells them, the randomiser laplace when left out), replaced, read by anyone.
	row := l.q("CALL ldp_set_default_mechanism('RAW_ROWS', 'F', 'box', 'duchi')")[0]
	if fmt.Sprint(row) != "[ldpsql.raw_rows f box duchi]" {
		t.Fatalf("ldp_set_default_mechanism returned %v", row)
	}
	if row := l.q("CALL ldp_set_default_mechanism('raw_rows', 'f', 'box')")[0]; fmt.Sprint(row) != "[ldpsql.raw_rows f box laplace]" {
		t.Fatalf("set again: %v", row)
	}
	l.q("CALL ldp_set_default_mechanism('open_rows', 'f', 'box')")
	// ldp_default_mechanisms is read as ldp_mechanisms is: by whoever may SELECT from ldpsql_catalog (not
	// the README's analyst, until granted it; the ledger's tables stay a DBA's).
	for _, table := range []string{"ldp_mechanisms", "ldp_default_mechanisms"} {
		_, err := l.as("analyst", "SELECT count(*) FROM ldpsql_catalog."+table)
		// (GMS names the table: every user holds SELECT on ldp_jobs alone in ldpsql_catalog, engine/jobs.go.)
		wantErr(t, err, "Access denied for user 'analyst'@'%' to table '"+table+"'")
	}
	l.q("GRANT SELECT ON ldpsql_catalog.* TO analyst@'%'")
	rows, err := l.as("analyst", "SELECT db, table_name, column_name, mechanism, randomiser FROM ldpsql_catalog.ldp_default_mechanisms ORDER BY table_name")
	if err != nil || fmt.Sprint(rows) != "[[ldpsql open_rows f box laplace] [ldpsql raw_rows f box laplace]]" {
		t.Fatalf("the analyst reading ldp_default_mechanisms: %v %v", rows, err)
	}

	// Unprotected: a release of the default's size, NULL for NULL, also through a derived table, a view,
	// a CTE, a subquery expression, an alias and INSERT … SELECT.
	for _, q := range []string{
		"SELECT id, LDP_ENCODE(f, 1) FROM open_rows",
		"SELECT id, LDP_ENCODE(o.f, 1) FROM open_rows o",
		"SELECT i, LDP_ENCODE(g, 1) FROM (SELECT id AS i, f AS g FROM open_rows) AS d",
		"WITH c AS (SELECT id, f FROM open_rows WHERE id < 20) SELECT id, LDP_ENCODE(f, 1) FROM c",
		"SELECT id, (SELECT LDP_ENCODE(o2.f, 1) FROM open_rows o2 WHERE o2.id = o.id) FROM open_rows o",
	} {
		rows, err := l.as("analyst", q)
		if err != nil || len(rows) != 20 {
			t.Fatalf("%s: %d rows, %v", q, len(rows), err)
		}
		for _, r := range rows {
			v, err := udf.UnpackVector(r[1].([]byte))
			if err != nil || len(v) != 2 {
				t.Fatalf("%s: release %v (%v)", q, r[1], err)
			}
		}
	}
	l.q("CREATE VIEW open_view AS SELECT id, f AS features FROM open_rows")
	if rows, err := l.as("analyst", "SELECT LDP_ENCODE_JSON(features, 2) FROM open_view WHERE id = 3"); err != nil || !strings.HasPrefix(fmt.Sprint(rows[0][0]), "[") {
		t.Fatalf("through a view: %v %v", rows, err)
	}
	l.q("UPDATE open_rows SET f = NULL WHERE id = 5")
	if rows := l.q("SELECT LDP_ENCODE(f, 1) FROM open_rows WHERE id = 5"); rows[0][0] != nil {
		t.Fatalf("NULL features of an unprotected table: %v", rows)
	}
	l.q("CREATE TABLE open_enc (id INT PRIMARY KEY, e LONGBLOB)")
	l.q("INSERT INTO open_enc SELECT id, LDP_ENCODE(f, 1) FROM open_rows")
	if n := l.count("SELECT count(*) FROM ldpsql.open_enc WHERE e IS NOT NULL"); n != 19 {
		t.Fatalf("INSERT … SELECT of short forms: %d releases", n)
	}

	// Everything without a default: another column, an expression, a computed derived column.
	for q, want := range map[string]string{
		"SELECT LDP_ENCODE(y, 1) FROM open_rows":                                    "no default mechanism for ldpsql.open_rows.y",
		"SELECT LDP_ENCODE_JSON(y, 1) FROM open_rows":                               "LDP_ENCODE_JSON(col, eps): no default mechanism for ldpsql.open_rows.y",
		"SELECT LDP_ENCODE(LDP_VECTOR(1, 2), 1)":                                    "is not one (an expression",
		"SELECT LDP_ENCODE(CONCAT(f, ''), 1) FROM open_rows":                        "is not one",
		"SELECT LDP_ENCODE(g, 1) FROM (SELECT CONCAT(f, '') AS g FROM open_rows) d": "is not one",
		"SELECT LDP_ENCODE(f) FROM open_rows":                                       "2, 3, 4 or 5",
	} {
		_, err := l.as("analyst", q)
		wantErr(t, err, want)
	}

	// Protected, memoise mode: the short form is the long form's release — the same bytes, the same memo
	// key — whichever comes first, and is charged once.
	l.q("CALL ldp_set_budget('raw_rows', 10)")
	short := l.q("SELECT id, LDP_ENCODE(f, 1) FROM raw_rows ORDER BY id")
	for _, q := range []string{
		"SELECT id, LDP_ENCODE(f, 1, 'box', 'laplace') FROM raw_rows ORDER BY id",
		"SELECT id, LDP_ENCODE(f, 1, 'box') FROM raw_rows ORDER BY id",
	} {
		long := l.q(q)
		for i := range short {
			if short[i][1] == nil || string(short[i][1].([]byte)) != string(long[i][1].([]byte)) {
				t.Fatalf("%s: unit %v: %v, the short form released %v", q, short[i][0], long[i][1], short[i][1])
			}
		}
	}
	if s := l.spent("raw_rows"); len(s) != 50 || s["3"] != 1 || s["49"] != 1 {
		t.Fatalf("after the short form and the long forms at eps 1: %v", s)
	}
	l.q("SELECT id, LDP_ENCODE(f, 0.5, 'box', 'laplace') FROM raw_rows") // the long form first this time
	if rows, err := l.as("analyst", "SELECT id, LDP_ENCODE_JSON(f, 0.5) FROM raw_rows"); err != nil || len(rows) != 50 {
		t.Fatalf("the analyst's short form: %v", err)
	}
	if s := l.spent("raw_rows"); s["3"] != 1.5 || s["49"] != 1.5 {
		t.Fatalf("after the long form and the analyst's short form at eps 0.5: %v", s)
	}
	// The roles apply as to the long form.
	_, err = l.as("analyst", "SELECT id, LDP_ENCODE(f, 1) FROM raw_rows WHERE y = 1")
	wantErr(t, err, "access denied: column y of protected table ldpsql.raw_rows is raw data")
	_, err = l.as("analyst", "SELECT id, (SELECT LDP_ENCODE(r.f, 1) FROM raw_rows r WHERE r.id = o.id) FROM open_rows o")
	wantErr(t, err, "is allowed only in a SELECT list")

	// Charge mode: the short and the long form at the same ε are recorded as the same release (unit,
	// digest, function, mechanism, randomiser), each charged.
	l.q("CALL ldp_set_budget('raw_rows', 10, 'charge')")
	l.q("SELECT id, LDP_ENCODE(f, 0.25) FROM raw_rows")
	l.q("SELECT id, LDP_ENCODE(f, 0.25, 'box', 'laplace') FROM raw_rows")
	recorded := l.releasesByUnit("raw_rows", 0.25)
	if len(recorded) != 50 {
		t.Fatalf("charge mode: %d units released", len(recorded))
	}
	for u, rs := range recorded {
		if len(rs) != 2 || rs[0] != rs[1] || !strings.HasSuffix(rs[0], " LDP_ENCODE box laplace") {
			t.Fatalf("unit %s: the short form, then the long form recorded %v", u, rs)
		}
	}
	if s := l.spent("raw_rows"); math.Abs(s["3"]-2) > 1e-12 || math.Abs(s["49"]-2) > 1e-12 {
		t.Fatalf("charge mode: %v", s)
	}

	// CREATE TABLE … AS SELECT of a short form is charged like the long form's.
	l.q("CREATE TABLE enc AS SELECT id, LDP_ENCODE(f, 0.125) AS e FROM raw_rows")
	if s := l.spent("raw_rows"); math.Abs(s["3"]-2.125) > 1e-12 {
		t.Fatalf("CREATE TABLE … AS SELECT: %v", s["3"])
	}

	// Dropped defaults and dropped mechanisms say so.
	l.q("CALL ldp_drop_default_mechanism('open_rows', 'f')")
	_, err = l.as("root", "SELECT LDP_ENCODE(f, 1) FROM open_rows")
	wantErr(t, err, "no default mechanism for ldpsql.open_rows.f")
	l.q("CALL ldp_drop_mechanism('box')")
	_, err = l.as("root", "SELECT LDP_ENCODE(f, 1) FROM raw_rows")
	wantErr(t, err, `the default mechanism of ldpsql.raw_rows.f is "box", which is no longer registered`)
}

// TRAIN_NOISY_CLASSIFIER('table'): the marginal objective with the mechanism's training rows where the
// caller may read them, forward otherwise, and an error for each default that is missing.
func TestShortFormTrain(t *testing.T) {
	l := newLedgerEngine(t, buildPlugins(t, "pca"))
	l.q("CREATE DATABASE private")
	l.createAnalyst("analyst")
	l.q("CREATE DATABASE scratch")
	l.q("GRANT SELECT, INSERT, CREATE, DROP, ALTER, EXECUTE ON scratch.* TO analyst@'%'")
	for _, table := range []string{"aux", "private.aux2", "d2"} {
		l.q(fmt.Sprintf("CREATE TABLE %s (id INT PRIMARY KEY, f LONGBLOB, y INT)", table))
		var vals []string
		for i := 0; i < 200; i++ {
			y := i % 2
			x := float64(2*y-1) + 0.3*math.Sin(float64(i))
			vals = append(vals, fmt.Sprintf("(%d, LDP_VECTOR(%g, %g, %g), %d)", i, x, 0.3*math.Cos(float64(i)), 0.1*x, y))
		}
		l.q(fmt.Sprintf("INSERT INTO %s VALUES %s", table, strings.Join(vals, ", ")))
	}
	l.q(`CALL ldp_fit_mechanism('p_open', 'pca', 'aux', 'f', '{"d": 2, "l": 2}')`)
	l.q(`CALL ldp_fit_mechanism('p_private', 'pca', 'private.aux2', 'f', '{"d": 2, "l": 2}')`)
	if rows := l.q("SELECT training_table, training_column FROM ldpsql_catalog.ldp_models WHERE name = 'p_private'"); fmt.Sprint(rows) != "[[private.aux2 f]]" {
		t.Fatalf("ldp_models records the training rows as %v", rows)
	}
	l.q("CALL ldp_privatize('d2', 'f', 'y', 'rel_open', 8, 0.5, 'p_open', 'laplace', 2)")
	l.q("CALL ldp_privatize('d2', 'f', 'y', 'rel_private', 8, 0.5, 'p_private', 'laplace', 2)")
	l.q("CALL ldp_privatize('d2', 'f', 'y', 'rel_private2', 8, 0.5, 'p_private', 'laplace', 2)")
	l.q("CALL ldp_privatize('d2', 'f', 'y', 'rel_duchi', 8, 0.5, 'p_open', 'duchi', 2)")

	start := func(user, table string) (objective, aux string) {
		t.Helper()
		rows, err := l.as(user, fmt.Sprintf("SELECT TRAIN_NOISY_CLASSIFIER('%s')", table))
		if err != nil {
			t.Fatalf("%s: TRAIN_NOISY_CLASSIFIER('%s'): %v", user, table, err)
		}
		id := toInt64(t, rows[0][0])
		job, err := l.e.Jobs.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Model     string `json:"model"`
			Objective string `json:"objective"`
			AuxTable  string `json:"aux_table"`
			AuxCol    string `json:"aux_features_col"`
		}
		if err := json.Unmarshal(job.Params, &p); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if job, err = l.e.Jobs.Wait(ctx, id); err != nil || job.State != "succeeded" {
			t.Fatalf("job %d (%s): %s %s %v", id, p.Objective, job.State, job.Error, err)
		}
		if p.Model != strings.TrimPrefix(table, "scratch.")+"_classifier" {
			t.Fatalf("model %q", p.Model)
		}
		return p.Objective, p.AuxTable + "." + p.AuxCol
	}

	// The analyst may read ldpsql.aux, not private.aux2; root reads both.
	if obj, aux := start("analyst", "rel_open"); obj != "marginal" || aux != "ldpsql.aux.f" {
		t.Fatalf("the analyst's short form on rel_open: %s with %s", obj, aux)
	}
	if obj, _ := start("analyst", "rel_private"); obj != "forward" {
		t.Fatalf("the analyst's short form on rel_private: %s", obj)
	}
	if obj, _ := start("analyst", "rel_duchi"); obj != "forward" {
		t.Fatalf("a duchi release: %s", obj)
	}
	if obj, aux := start("root", "rel_private2"); obj != "marginal" || aux != "private.aux2.f" {
		t.Fatalf("root's short form on rel_private2: %s with %s", obj, aux)
	}
	// The classifier predicts.
	if rows := l.q("SELECT AVG(PREDICT('rel_open_classifier', f) = y) FROM d2"); toFloat(t, rows[0][0]) < 0.6 {
		t.Fatalf("rel_open_classifier's accuracy on the clean rows: %v", rows[0][0])
	}

	// The errors.
	_, err := l.as("analyst", "SELECT TRAIN_NOISY_CLASSIFIER('rel_open')")
	wantErr(t, err, `a model called "rel_open_classifier" exists, and TRAIN_NOISY_CLASSIFIER('rel_open') never replaces one`, `'{"replace": true}'`)
	_, err = l.as("analyst", "SELECT TRAIN_NOISY_CLASSIFIER('aux')")
	wantErr(t, err, "table aux has no ldp_privatize metadata", "TRAIN_NOISY_CLASSIFIER('aux', '{\"mechanism\"")
	_, err = l.as("analyst", "SELECT TRAIN_NOISY_CLASSIFIER('nope')")
	wantErr(t, err, "not found")
	_, err = l.as("analyst", "SELECT TRAIN_NOISY_CLASSIFIER()")
	wantErr(t, err, "1 or 2")
}
