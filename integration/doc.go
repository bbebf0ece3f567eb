// Package integration holds ldpsql's end-to-end tests: they build the real ldpsql binary, start
// `ldpsql serve` on a free loopback port over a temporary DuckDB file, and talk to it as MySQL clients do
// (github.com/go-sql-driver/mysql, and the mysql command-line client when it is installed).
package integration
