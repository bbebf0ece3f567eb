// Package engine is ldpsql's SQL engine: go-mysql-server (GMS) parses, plans and executes MySQL-dialect
// SQL, and DuckDB stores the tables in one file.
//
// The storage mirrors GMS's memory package file for file: provider.go (databases), database.go (tables of
// one database), table.go (scans), table_editor.go (INSERT/UPDATE/DELETE), plus types.go (the mapping
// between MySQL column types and DuckDB) and engine.go / server.go (embedded use and the MySQL wire
// server). A GMS database is a DuckDB schema; a GMS table is a DuckDB table in it. The MySQL column type,
// default and auto-increment flag of every column are kept in the DuckDB column comment, so the schema a
// client sees survives a restart exactly.
//
// A scan reads the projected columns only. Because duckdb-go materialises a query's whole result
// before its first row, a large table is read in ranges of row ids inside one read transaction
// (table.go, rangeScan): the first rows come at once and every range sees the same snapshot.
//
// Every statement is atomic: a table editor writes into one DuckDB transaction that commits when GMS
// reports the statement complete and rolls back when it reports an error, unless the client opened a
// multi-statement transaction (BEGIN … COMMIT, autocommit off: transactions.go), which DuckDB's own
// transaction backs.
//
// mysql8.go sets MySQL 8's defaults where GMS's differ: the collation utf8mb4_0900_ai_ci (and how
// DuckDB's byte-wise keys are made to agree with it) and ERROR_FOR_DIVISION_BY_ZERO in sql_mode;
// collated.go makes DISTINCT, UNION and DISTINCT aggregates, which GMS hashes by bytes, follow the
// collation.
//
// store.go keeps the server going through a full disk: DuckDB invalidates the database when a checkpoint
// cannot write, and the engine then reopens the file in a new DuckDB instance, with no statement running.
//
// security.go is the server's boundary around the file system and server-wide state: LOAD_FILE, INTO
// OUTFILE/DUMPFILE and LOAD DATA INFILE need FILE and stay inside secure_file_priv, never touching the
// database, its WAL or the plugins; SET GLOBAL needs SUPER; other users' statements and the statistics
// of protected tables' raw columns are hidden from those without the privilege to see them.
//
// ldpsql's own metadata lives in the DuckDB schema ldpsql_catalog, which clients see as a read-only
// database: the mechanism catalog (catalog.go), the columns' default mechanisms (defaults.go), background
// jobs (jobs.go) and the privacy ledger
// (ledger.go), which keeps the budget of every protected table, what each privacy unit has spent, and
// a record of every release, and charges releases atomically (Ledger.Charge) for package udf's SQL
// functions and for any Go code that releases data.
package engine
