"""What Python analysts do with ldpsql, run by TestPythonClients (clients_test.go) against a running
`ldpsql serve`: pymysql with its commit() and rollback(), SQLAlchemy reflection, connections,
engine.begin() (committed, and rolled back by an exception) and the ORM, pandas' read_sql and to_sql
through an SQLAlchemy engine and inside a transaction, a 50,000-row to_sql → read_sql round trip (plain
and through FLIP_LABEL), and MySQLdb's rollback() and commit().

Usage: python3 python_clients.py HOST PORT. Prints one line per check and exits 1 at the first that fails.
"""
import sys
import warnings

import MySQLdb
import pandas as pd
import pymysql
import sqlalchemy as sa
from sqlalchemy.orm import Session, declarative_base

warnings.simplefilter("ignore")  # pandas and SQLAlchemy deprecation notices are not results

HOST, PORT = sys.argv[1], int(sys.argv[2])


def check(what, ok, detail=""):
    detail = str(detail)
    if ok and len(detail) > 160:
        detail = detail[:160] + "…"
    print(("ok   " if ok else "FAIL ") + what + (": " + detail if detail else ""), flush=True)
    if not ok:
        sys.exit(1)


# pymysql: autocommit off (its default: it sends SET AUTOCOMMIT = 0), as SQLAlchemy uses it.
conn = pymysql.connect(host=HOST, port=PORT, user="root", database="ldpsql")
cur = conn.cursor()
cur.execute("CREATE TABLE py_t (id INT PRIMARY KEY, x DOUBLE, y INT, name VARCHAR(20))")
rows = [(i, i / 4, i % 2, None if i % 5 == 0 else "n%d" % i) for i in range(200)]
n = cur.executemany("INSERT INTO py_t (id, x, y, name) VALUES (%s, %s, %s, %s)", rows)
check("executemany inserts 200 rows", n == 200, n)
conn.commit()
conn.rollback()
check("rollback() right after commit() succeeds", True)
cur.execute("SELECT COUNT(*), SUM(x) FROM py_t")
count, total = cur.fetchone()
check("the rows read back", count == 200 and abs(total - sum(r[1] for r in rows)) < 1e-9, (count, total))
conn.rollback()
check("rollback() after only reads succeeds", True)
other = pymysql.connect(host=HOST, port=PORT, user="root", database="ldpsql", autocommit=True)
ocur = other.cursor()
cur.executemany("INSERT INTO py_t VALUES (%s, %s, %s, %s)", [(1000, 0.5, 1, "late"), (1010, 0.5, 1, "gone")])
cur.execute("SELECT COUNT(*) FROM py_t WHERE id >= 1000")
check("the transaction reads its own inserts", cur.fetchone()[0] == 2)
ocur.execute("SELECT COUNT(*) FROM py_t WHERE id >= 1000")
check("another connection does not see them before commit()", ocur.fetchone()[0] == 0)
conn.rollback()
cur.execute("SELECT COUNT(*) FROM py_t WHERE id >= 1000")
check("rollback() after inserts undoes them", cur.fetchone()[0] == 0)
cur.execute("INSERT INTO py_t VALUES (1000, 0.5, 1, 'late')")
conn.commit()
ocur.execute("SELECT COUNT(*) FROM py_t WHERE id = 1000")
check("commit() makes the insert visible to another connection", ocur.fetchone()[0] == 1)
other.close()
conn.rollback()
check("rollback() after commit() succeeds again", True)
try:
    cur.execute("CALL ldp_cancel_job(987654)")  # fails: no such job
except pymysql.err.OperationalError:
    pass
conn.rollback()
check("rollback() after a failed CALL succeeds", True)
# Upserts with MySQL's semantics: the affected-row counts pymysql reports are MySQL's (2 per updated row).
n = cur.execute("INSERT INTO py_t VALUES (1000, 9.5, 1, 'late'), (1003, 0.0, 0, 'new') "
                "ON DUPLICATE KEY UPDATE name = VALUES(name), x = x + 1")
cur.execute("SELECT x, name FROM py_t WHERE id IN (1000, 1003) ORDER BY id")
got = cur.fetchall()
check("INSERT … ON DUPLICATE KEY UPDATE updates one row and inserts one", n == 3 and got == ((1.5, "late"), (0.0, "new")), (n, got))
cur.executemany("INSERT IGNORE INTO py_t VALUES (%s, %s, %s, %s)", [(1003, 7.0, 1, "x"), (1004, 7.0, 1, "ign")])
cur.execute("SELECT name FROM py_t WHERE id IN (1003, 1004) ORDER BY id")
got = [r[0] for r in cur.fetchall()]
check("INSERT IGNORE keeps the existing row and adds the new", got == ["new", "ign"], got)
cur.execute("REPLACE INTO py_t VALUES (1004, 8.0, 0, 'rep')")
cur.execute("SELECT x, name FROM py_t WHERE id = 1004")
got = cur.fetchone()
check("REPLACE replaces the row", got == (8.0, "rep"), got)
cur.execute("DELETE FROM py_t WHERE id >= 1003")
conn.commit()
conn.close()

# SQLAlchemy: reflection, pooled connections (each returned with a ROLLBACK), engine.begin().
engine = sa.create_engine("mysql+pymysql://root@%s:%d/ldpsql" % (HOST, PORT))
insp = sa.inspect(engine)
check("inspect(engine).get_table_names() lists py_t", "py_t" in insp.get_table_names(), insp.get_table_names())
cols = [c["name"] for c in insp.get_columns("py_t")]
check("get_columns", cols == ["id", "x", "y", "name"], cols)
pk = insp.get_pk_constraint("py_t")["constrained_columns"]
check("get_pk_constraint", pk == ["id"], pk)
for _ in range(3):  # the same pooled connection, returned with a ROLLBACK each time
    with engine.connect() as c:
        v = c.execute(sa.text("SELECT COUNT(*) FROM py_t")).scalar()
check("engine.connect() reads, three times through the pool", v == 201, v)
with engine.begin() as c:
    v = c.execute(sa.text("SELECT MAX(id) FROM py_t")).scalar()
check("engine.begin() that only reads", v == 1000, v)
with engine.begin() as c:
    c.execute(sa.text("INSERT INTO py_t VALUES (1001, 1.5, 0, 'begin')"))
with engine.connect() as c:
    v = c.execute(sa.text("SELECT name FROM py_t WHERE id = 1001")).scalar()
check("engine.begin() that writes commits", v == "begin", v)


def write_then_fail():
    with engine.begin() as c:
        c.execute(sa.text("INSERT INTO py_t VALUES (1002, 2.5, 1, 'undo?')"))
        raise ValueError("the application fails inside the transaction")


try:
    write_then_fail()
    check("engine.begin() whose block raises re-raises", False)
except ValueError:
    pass
with engine.connect() as c:
    v = c.execute(sa.text("SELECT COUNT(*) FROM py_t WHERE id = 1002")).scalar()
check("engine.begin() whose block raises after a write rolls it back", v == 0, v)

# The ORM: a declarative model, create_all, a Session that adds (AUTO_INCREMENT ids) and commits.
Base = declarative_base()


class Person(Base):
    __tablename__ = "py_people"
    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    name = sa.Column(sa.String(50), nullable=False)
    score = sa.Column(sa.Float)


Base.metadata.create_all(engine)
with Session(engine) as session:
    session.add_all([Person(name="ann", score=1.5), Person(name="bo")])
    session.commit()
    people = [(p.id, p.name, p.score) for p in session.query(Person).order_by(Person.id)]
check("ORM: create_all, add, commit, query", people == [(1, "ann", 1.5), (2, "bo", None)], people)
with Session(engine) as session:  # a session that only reads ends with a ROLLBACK
    n = session.query(Person).filter(Person.score.is_(None)).count()
check("ORM: a read-only Session closes", n == 1, n)

# pandas through the engine.
df = pd.read_sql("SELECT id, FLIP_LABEL(y, 1, 2) AS r FROM py_t", engine)
check("pandas.read_sql rows", len(df) == 202, len(df))
check("pandas.read_sql labels in {0, 1}", set(df["r"].unique()) <= {0, 1}, sorted(df["r"].unique()))
frame = pd.DataFrame({"a": [1, 2, 3], "b": ["x", None, "z"], "c": [1.5, None, -2.0]})
frame.to_sql("py_frame", engine, index=False)
frame.to_sql("py_frame", engine, index=False, if_exists="append")
back = pd.read_sql("SELECT a, b, c FROM py_frame ORDER BY a, c", engine)
check("DataFrame.to_sql(index=False), appended, reads back", len(back) == 6 and back["b"].isna().sum() == 2
      and back["c"].isna().sum() == 2 and abs(back["c"].sum() - 2 * (1.5 - 2.0)) < 1e-9, back.to_dict("list"))
# The defaults: index=True makes pandas CREATE INDEX on its index column (accepted, not kept), and
# if_exists="replace" drops and recreates the table; chunksize sends several INSERTs.
frame.to_sql("py_indexed", engine)
frame.to_sql("py_indexed", engine, if_exists="replace", chunksize=2)
back = pd.read_sql("SELECT * FROM py_indexed ORDER BY `index`", engine)
check("DataFrame.to_sql with its defaults (index column, CREATE INDEX), replaced in chunks", list(back.columns) == ["index", "a", "b", "c"]
      and back["index"].tolist() == list(range(len(frame))), back.to_dict("list"))
# to_sql inside a transaction: its INSERTs commit or roll back with it (the CREATE TABLE, DDL, commits
# implicitly, as in MySQL, so the table is made first).
frame.to_sql("py_tx_frame", engine, index=False)
with engine.begin() as c:
    frame.to_sql("py_tx_frame", c, index=False, if_exists="append")
    n = c.execute(sa.text("SELECT COUNT(*) FROM py_tx_frame")).scalar()
check("to_sql in engine.begin() sees its rows", n == 6, n)
try:
    with engine.begin() as c:
        frame.to_sql("py_tx_frame", c, index=False, if_exists="append")
        raise ValueError("fail after to_sql")
except ValueError:
    pass
n = pd.read_sql("SELECT COUNT(*) AS n FROM py_tx_frame", engine)["n"][0]
check("to_sql in engine.begin(): committed once, rolled back once", n == 6, n)
# 50,000 rows out with to_sql (in chunks) and back with read_sql: equal to the frame; and read_sql of
# FLIP_LABEL over them: every id once, every label a class.
big = pd.DataFrame({"id": range(50000), "x": [i / 7 for i in range(50000)], "y": [i % 3 for i in range(50000)],
                    "name": ["r%d" % i for i in range(50000)]})
big.to_sql("py_big", engine, index=False, chunksize=10000)
back = pd.read_sql("SELECT id, x, y, name FROM py_big ORDER BY id", engine)
check("to_sql then read_sql of 50,000 rows is the same frame", back.equals(big), back.dtypes.to_dict())
flipped = pd.read_sql("SELECT id, FLIP_LABEL(y, 2, 3) AS r FROM py_big ORDER BY id", engine)
check("read_sql of FLIP_LABEL over the 50,000 rows", flipped["id"].tolist() == list(range(50000)) and set(flipped["r"].unique()) <= {0, 1, 2},
      (len(flipped), sorted(flipped["r"].unique())))
engine.dispose()

# MySQLdb (mysqlclient): autocommit off, rollback() undoes an insert, commit() keeps one.
my = MySQLdb.connect(host=HOST, port=PORT, user="root", database="ldpsql")
mc = my.cursor()
mc.execute("CREATE TABLE my_t (id INT PRIMARY KEY)")
mc.execute("INSERT INTO my_t VALUES (1)")
my.rollback()
mc.execute("SELECT count(*) FROM my_t")
check("MySQLdb: rollback() undoes the insert", mc.fetchone()[0] == 0)
mc.execute("INSERT INTO my_t VALUES (2)")
my.commit()
my.rollback()
mc.execute("SELECT count(*) FROM my_t")
check("MySQLdb: commit() keeps it, a rollback() after commit() succeeds", mc.fetchone()[0] == 1)
my.close()
print("all Python client checks passed")
