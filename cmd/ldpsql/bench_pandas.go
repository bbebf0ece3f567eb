package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// pandasToSQL is the Python side of benchPandas: it writes rows rows with DataFrame.to_sql through
// SQLAlchemy and pymysql (as an analyst's notebook does), reads them back with read_sql, and prints a
// JSON line. A missing package is exit status 3 with the Debian packages to install.
const pandasToSQL = `
import json, sys, time
missing = []
try:
    import pandas as pd
except ImportError:
    missing.append("python3-pandas")
try:
    import sqlalchemy
except ImportError:
    missing.append("python3-sqlalchemy")
try:
    import pymysql
except ImportError:
    missing.append("python3-pymysql")
if missing:
    print("missing Python packages: " + ", ".join(missing) + " (apt-get install -y " + " ".join(missing) + ")", file=sys.stderr)
    sys.exit(3)
addr, n = sys.argv[1], int(sys.argv[2])
df = pd.DataFrame({
    "id": range(n),
    "k": [i % 7 for i in range(n)],
    "x": [i / 3.0 for i in range(n)],
    "y": [(i * 7919) % 1000 / 10.0 for i in range(n)],
    "name": ["row %d" % i for i in range(n)],
})
engine = sqlalchemy.create_engine("mysql+pymysql://root:@" + addr + "/ldpsql")
start = time.perf_counter()
df.to_sql("pandas_bench", engine, if_exists="replace", index=False, chunksize=10000)
seconds = time.perf_counter() - start
back = pd.read_sql("SELECT id, k, x, y, name FROM pandas_bench ORDER BY id", engine)
equal = bool(back.equals(df))
with engine.begin() as conn:
    conn.execute(sqlalchemy.text("DROP TABLE pandas_bench"))
print(json.dumps({"rows": n, "seconds": seconds, "equal": equal, "pandas": pd.__version__, "sqlalchemy": sqlalchemy.__version__}))
`

// errPandasMissing is benchPandas's error when Python or its packages are not installed.
var errPandasMissing = errors.New("pandas to_sql benchmark skipped")

// pandasPythons are the interpreters benchPandas tries, in order: the python3 on PATH, then Debian's
// /usr/bin/python3, where apt-get installs python3-pandas and the others when PATH leads to another
// Python (pyenv's shim, a virtual environment's). The integration tests look for them the same way.
var pandasPythons = []string{"python3", "/usr/bin/python3"}

// benchPandas measures pandas' DataFrame.to_sql of rows rows into the server at addr (root, no
// password), through SQLAlchemy and pymysql, and checks that read_sql returns the same frame, with the
// first of pandasPythons that has the three. Without one it returns errPandasMissing, saying what each
// interpreter lacks and what to install.
func benchPandas(addr string, w io.Writer, rows int) error {
	var tried []string
	seen := map[string]bool{}
	for _, name := range pandasPythons {
		python, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		if real, err := filepath.EvalSymlinks(python); err == nil {
			if seen[real] {
				continue
			}
			seen[real] = true
		}
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(python, "-c", pandasToSQL, addr, strconv.Itoa(rows))
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err = cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 3 {
			tried = append(tried, python+": "+strings.TrimSpace(stderr.String()))
			continue
		}
		if err != nil {
			return fmt.Errorf("pandas to_sql with %s: %v\n%s", python, err, stderr.String())
		}
		return reportPandas(w, stdout.Bytes())
	}
	if len(tried) == 0 {
		return fmt.Errorf("%w: no python3 (looked for %s; apt-get install -y python3 python3-pandas python3-sqlalchemy python3-pymysql)",
			errPandasMissing, strings.Join(pandasPythons, " and "))
	}
	return fmt.Errorf("%w: %s", errPandasMissing, strings.Join(tried, "; "))
}

// reportPandas prints the pandas script's JSON report, checking that read_sql gave back what to_sql wrote.
func reportPandas(w io.Writer, report []byte) error {
	var res struct {
		Rows               int
		Seconds            float64
		Equal              bool
		Pandas, SQLAlchemy string
	}
	if err := json.Unmarshal(report, &res); err != nil {
		return fmt.Errorf("pandas to_sql: its report %q: %v", report, err)
	}
	if !res.Equal {
		return fmt.Errorf("pandas to_sql: read_sql did not return the %d rows to_sql wrote", res.Rows)
	}
	fmt.Fprintf(w, "pandas %s DataFrame.to_sql (SQLAlchemy %s, pymysql), %d rows x 5 columns, MySQL protocol on loopback:\n", res.Pandas, res.SQLAlchemy, res.Rows)
	fmt.Fprintf(w, "  %9.0f rows/s (read back equal with read_sql)\n\n", float64(res.Rows)/res.Seconds)
	return nil
}
