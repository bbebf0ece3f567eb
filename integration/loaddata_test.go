package integration

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/ldpsql/ldpsql/internal/benchdata"
)

// A CSV as spreadsheets and pandas write it (RFC 4180): a header, CRLF line ends, fields enclosed in
// double quotes only where needed, doubled quotes inside, separators and line breaks inside quoted
// fields; and MySQL's own \N for NULL, beside the quoted word "NULL", which is a string.
const rfc4180CSV = "id,name,note,amount\r\n" +
	"1,plain,,1.5\r\n" +
	"2,\"Smith, Jane\",\"she said \"\"hi\"\"\",2.25\r\n" +
	"3,\"two\r\nlines\",\\N,\\N\r\n" +
	"4,\"NULL\",NULL,-0.5\r\n"

const rfc4180Table = "CREATE TABLE people (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL, note TEXT, amount DOUBLE)"

const rfc4180Load = "INTO TABLE people FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"' LINES TERMINATED BY '\\r\\n' IGNORE 1 LINES"

// rfc4180Want is SELECT * FROM people ORDER BY id after the load, NULL as <nil>.
const rfc4180Want = "[1 plain  1.5] [2 Smith, Jane she said \"hi\" 2.25] [3 two\r\nlines <nil> <nil>] [4 NULL <nil> -0.5]"

func registerCSV(t *testing.T, name, data string) {
	t.Helper()
	mysql.RegisterReaderHandler(name, func() io.Reader { return strings.NewReader(data) })
	t.Cleanup(func() { mysql.DeregisterReaderHandler(name) })
}

// LOAD DATA LOCAL INFILE over go-sql-driver: MySQL's quoting, IGNORE n LINES, LINES TERMINATED BY,
// NULL; a bad row fails the statement naming its row, line and column and loads nothing; duplicate keys
// follow MySQL (LOCAL skips them, REPLACE replaces, server-side without either fails with 1062).
func TestLoadDataLocalQuotingAndErrors(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, filepath.Join(dir, "load.duckdb"))
	db := s.connect("root", "")
	db.SetMaxOpenConns(1)
	mustExec(t, db, rfc4180Table)
	registerCSV(t, "people", rfc4180CSV)

	rowsOf := func() string {
		t.Helper()
		rows, err := db.Query("SELECT id, name, note, amount FROM people ORDER BY id")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var id int
			var name string
			var note *string
			var amount *float64
			if err := rows.Scan(&id, &name, &note, &amount); err != nil {
				t.Fatal(err)
			}
			n, a := "<nil>", "<nil>"
			if note != nil {
				n = *note
			}
			if amount != nil {
				a = fmt.Sprint(*amount)
			}
			out = append(out, fmt.Sprintf("[%d %s %s %s]", id, name, n, a))
		}
		return strings.Join(out, " ")
	}

	res, err := db.Exec("LOAD DATA LOCAL INFILE 'Reader::people' " + rfc4180Load)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 4 {
		t.Errorf("rows affected %d, want 4", n)
	}
	if got := rowsOf(); got != rfc4180Want {
		t.Errorf("loaded\n%q\nwant\n%q", got, rfc4180Want)
	}

	t.Run("a bad value names row, line and column and loads nothing", func(t *testing.T) {
		registerCSV(t, "bad", "10,ok,,1\n11,\"multi\nline\",,2\n12,bad,,not-a-number\n13,late,,4\n")
		_, err := db.Exec("LOAD DATA LOCAL INFILE 'Reader::bad' INTO TABLE people FIELDS TERMINATED BY ',' ENCLOSED BY '\"'")
		wantMySQLError(t, "LOAD DATA with a bad value", err, 1366)
		if err == nil || !strings.Contains(err.Error(), "'not-a-number' for column 'amount' at row 3 (line 4 of the file)") {
			t.Errorf("error %v does not name the value, column, row and line", err)
		}
		if got := rowsOf(); got != rfc4180Want {
			t.Errorf("after the failed load the table holds\n%q", got)
		}
	})

	t.Run("too few or too many fields", func(t *testing.T) {
		registerCSV(t, "short", "20,a,,1\n21,b\n")
		_, err := db.Exec("LOAD DATA LOCAL INFILE 'Reader::short' INTO TABLE people FIELDS TERMINATED BY ','")
		wantMySQLError(t, "a short record", err, 1261)
		registerCSV(t, "long", "20,a,,1,extra\n")
		_, err = db.Exec("LOAD DATA LOCAL INFILE 'Reader::long' INTO TABLE people FIELDS TERMINATED BY ','")
		wantMySQLError(t, "a long record", err, 1262)
		if got := rowsOf(); got != rfc4180Want {
			t.Errorf("after the failed loads the table holds\n%q", got)
		}
	})

	t.Run("duplicates: LOCAL skips, REPLACE replaces", func(t *testing.T) {
		registerCSV(t, "dups", "1,changed,,9\n5,new,,5\n5,second,,6\n")
		res, err := db.Exec("LOAD DATA LOCAL INFILE 'Reader::dups' INTO TABLE people FIELDS TERMINATED BY ','")
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			t.Errorf("LOCAL with duplicates: %d rows affected, want 1 (two skipped)", n)
		}
		if got, _ := queryString(t, db, "SELECT GROUP_CONCAT(CONCAT(id, ':', name) ORDER BY id) FROM people WHERE id IN (1, 5)"); got != "1:plain,5:new" {
			t.Errorf("after LOCAL with duplicates: %s, want the stored row 1 and the first row 5 kept", got)
		}
		if _, err := db.Exec("LOAD DATA LOCAL INFILE 'Reader::dups' REPLACE INTO TABLE people FIELDS TERMINATED BY ','"); err != nil {
			t.Fatal(err)
		}
		if got, _ := queryString(t, db, "SELECT GROUP_CONCAT(CONCAT(id, ':', name) ORDER BY id) FROM people WHERE id IN (1, 5)"); got != "1:changed,5:second" {
			t.Errorf("after REPLACE: %s, want the file's last rows", got)
		}
	})

	t.Run("server-side without IGNORE: a duplicate key fails the whole file", func(t *testing.T) {
		secure := filepath.Join(dir, "ldpsql-files")
		if err := os.WriteFile(filepath.Join(secure, "dup.csv"), []byte("30,x,,1\n1,dup,,2\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := db.Exec("LOAD DATA INFILE 'dup.csv' INTO TABLE people FIELDS TERMINATED BY ','")
		wantMySQLError(t, "server-side LOAD DATA with a duplicate key", err, 1062)
		if n, _ := queryString(t, db, "SELECT COUNT(*) FROM people WHERE id = 30"); n != "0" {
			t.Errorf("the failed load left row 30 behind")
		}
	})

	t.Run("AUTO_INCREMENT: a missing, NULL or 0 field takes the next value", func(t *testing.T) {
		mustExec(t, db, "CREATE TABLE events (id BIGINT AUTO_INCREMENT PRIMARY KEY, kind VARCHAR(10) NOT NULL, n INT)")
		mustExec(t, db, "INSERT INTO events (kind, n) VALUES ('before', 0)")
		registerCSV(t, "events", "a,1\nb,2\n")
		mustExec(t, db, "LOAD DATA LOCAL INFILE 'Reader::events' INTO TABLE events FIELDS TERMINATED BY ',' (kind, n)")
		registerCSV(t, "events2", "\\N,c,3\n0,d,4\n10,e,5\n")
		mustExec(t, db, "LOAD DATA LOCAL INFILE 'Reader::events2' INTO TABLE events FIELDS TERMINATED BY ','")
		mustExec(t, db, "INSERT INTO events (kind, n) VALUES ('after', 6)")
		if got, _ := queryString(t, db, "SELECT GROUP_CONCAT(CONCAT(id, kind) ORDER BY id) FROM events"); got != "1before,2a,3b,4c,5d,10e,11after" {
			t.Errorf("AUTO_INCREMENT ids after LOAD DATA: %s", got)
		}
	})

	t.Run("inside a transaction, rolled back", func(t *testing.T) {
		registerCSV(t, "tx", "40,tx,,1\n")
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec("LOAD DATA LOCAL INFILE 'Reader::tx' INTO TABLE people FIELDS TERMINATED BY ','"); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := tx.QueryRow("SELECT COUNT(*) FROM people WHERE id = 40").Scan(&n); err != nil || n != 1 {
			t.Errorf("inside the transaction: %d rows, %v", n, err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if n, _ := queryString(t, db, "SELECT COUNT(*) FROM people WHERE id = 40"); n != "0" {
			t.Errorf("ROLLBACK kept the loaded row")
		}
	})
}

// The 10,000 rows through LOAD DATA LOCAL INFILE, and the same CSV through the mysql command
// line client (mariadb-client's --local-infile).
func TestLoadDataLocal10kAndMySQLClient(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, filepath.Join(dir, "load.duckdb"))
	db := s.connect("root", "")
	data := benchdata.TenColumnCSV(10_000)
	mysql.RegisterReaderHandler("wide10k", func() io.Reader { return bytes.NewReader(data) })
	defer mysql.DeregisterReaderHandler("wide10k")
	mustExec(t, db, tenColumnTable)
	mustExec(t, db, "LOAD DATA LOCAL INFILE 'Reader::wide10k' INTO TABLE wide FIELDS TERMINATED BY ','")
	if got, _ := queryString(t, db, "SELECT CONCAT(COUNT(*), ' ', SUM(id), ' ', SUM(d)) FROM wide"); got != "10000 49995000 "+fmt.Sprint(sumD(10_000)) {
		t.Errorf("10,000 rows loaded as %s", got)
	}

	client := mariaDBTool(t, "mysql")
	path := filepath.Join(dir, "people.csv")
	if err := os.WriteFile(path, []byte(rfc4180CSV), 0o600); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(s.addr, ":")
	out, err := exec.Command(client, "--local-infile=1", "-h", host, "-P", port, "-u", "root", "--batch", "ldpsql", "-e",
		rfc4180Table+"; LOAD DATA LOCAL INFILE '"+path+"' "+rfc4180Load+"; SELECT COUNT(*), SUM(amount IS NULL) FROM people; SELECT name FROM people WHERE id = 2; SELECT HEX(name) FROM people WHERE id = 3").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if want := "COUNT(*)\tSUM(amount IS NULL)\n4\t1\nname\nSmith, Jane\nHEX(name)\n74776F0D0A6C696E6573\n"; string(out) != want {
		t.Errorf("mysql client:\n%s\nwant\n%s", out, want)
	}
}

func sumD(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += (i * 4) % 1000
	}
	return s
}
