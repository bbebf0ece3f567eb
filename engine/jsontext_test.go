package engine

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"
)

// LEFT, RIGHT, INSTR and HEX read a JSON value (a user table's column, a catalog table's) as its text,
// as MySQL does; GMS refused it with "invalid type: types.JSONDocument".
func TestJSONColumnsInStringFunctions(t *testing.T) {
	e := openT(t, filepath.Join(t.TempDir(), "db.duckdb"))
	defer e.Close()
	mustQuery(t, e, "CREATE TABLE j (id INT PRIMARY KEY, x JSON)")
	mustQuery(t, e, `INSERT INTO j VALUES (1, '{"a": [1, 2, "x"]}'), (2, NULL)`)
	m := Mechanism{Name: "m1", Plugin: "pca", Path: "/opt/p", SHA256: "ab", Description: json.RawMessage(`{"output_dim":8}`),
		RegisteredBy: "root", RegisteredAt: time.Unix(1700000000, 0)}
	if err := e.Catalog.RegisterMechanism(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]string{
		"SELECT LEFT(x, 5) FROM j ORDER BY id":                                                "{\"a\":\n<nil>\n",
		"SELECT RIGHT(x, 4) FROM j WHERE id = 1":                                              "x\"]}\n",
		"SELECT INSTR(x, '2') FROM j WHERE id = 1":                                            "11\n",
		"SELECT HEX(LEFT(x, 2)), HEX(x) = HEX(CAST(x AS CHAR)) FROM j WHERE id = 1":           "7B22 true\n",
		"SELECT LEFT(description, 300) FROM ldpsql_catalog.ldp_mechanisms":                    "{\"output_dim\": 8}\n",
		"SELECT name FROM ldpsql_catalog.ldp_mechanisms WHERE LEFT(description, 2) = '{\"'":   "m1\n",
		"SELECT JSON_EXTRACT(description, '$.output_dim') FROM ldpsql_catalog.ldp_mechanisms": "8\n",
	} {
		if got := rowsString(mustQuery(t, e, q)); got != want {
			t.Errorf("%s: %q, want %q", q, got, want)
		}
	}
}
