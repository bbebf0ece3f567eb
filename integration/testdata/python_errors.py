"""Run by TestPythonErrorClasses (errors_test.go) against a running `ldpsql serve` holding its fixture
(table t with a primary key and a NOT NULL VARCHAR(5) s, user analyst with password pw): each error
must reach pymysql as the exception class its MySQL number maps to, so that Python code catches it.

Usage: python3 python_errors.py HOST PORT. Prints one line per check and exits 1 at the first that fails.
"""
import sys

import pymysql
from pymysql import err

HOST, PORT = sys.argv[1], int(sys.argv[2])


def connect(user="root", password=""):
    return pymysql.connect(host=HOST, port=PORT, user=user, password=password, database="ldpsql",
                           autocommit=True)


def expect(what, cls, number, f):
    try:
        f()
    except Exception as e:
        ok = type(e) is cls and e.args and e.args[0] == number
        print(("ok   " if ok else "FAIL ") + f"{what}: {type(e).__module__}.{type(e).__name__} {e.args}", flush=True)
        if not ok:
            print(f"want {cls.__name__} {number}")
            sys.exit(1)
        return
    print(f"FAIL {what}: succeeded; want {cls.__name__} {number}")
    sys.exit(1)


root = connect()
cur = root.cursor()
expect("missing table", err.ProgrammingError, 1146, lambda: cur.execute("SELECT * FROM nope"))
expect("syntax error", err.ProgrammingError, 1064, lambda: cur.execute("SELEC 1"))
expect("duplicate primary key", err.IntegrityError, 1062, lambda: cur.execute("INSERT INTO t VALUES (1, 'a', 0)"))
expect("NULL into NOT NULL", err.IntegrityError, 1048, lambda: cur.execute("INSERT INTO t VALUES (5, NULL, 0)"))
expect("data too long", err.DataError, 1406, lambda: cur.execute("INSERT INTO t VALUES (6, 'abcdefgh', 0)"))
expect("wrong password", err.OperationalError, 1045, lambda: connect("analyst", "bad"))
analyst = connect("analyst", "pw").cursor()
expect("analyst writes a table", err.OperationalError, 1142,
       lambda: analyst.execute("INSERT INTO t VALUES (9, 'x', 0)"))
print("all Python error checks passed")
