package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
)

func sqlCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("sql", "Run SQL statements and print the results as tables: in process on a DuckDB file (--db), or on a\nrunning `ldpsql serve` over the MySQL protocol (--addr). Without -e, read statements (ending in ;)\nfrom standard input as an interactive shell.",
		`  ldpsql sql -e "CREATE TABLE t (id INT PRIMARY KEY, y INT); INSERT INTO t VALUES (1, 0)"
  ldpsql sql -e "SELECT y, FLIP_LABEL(y, 1.0, 2) FROM t"
  ldpsql sql --db :memory:
  LDPSQL_PASSWORD=secret ldpsql sql --addr 127.0.0.1:3306 -e "SELECT * FROM ldpsql_catalog.ldp_jobs"
`, stderr)
	tgt := addTargetFlags(fs, "DuckDB file (created if missing), or :memory:")
	exec := fs.String("e", "", "statements to run, separated by ;")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		// A bare path here would otherwise be ignored and ./ldpsql.duckdb opened (or created) instead.
		return fmt.Errorf("sql: unexpected argument %q: name the database with --db FILE or a server with --addr HOST:PORT, before -e", fs.Arg(0))
	}
	ctx := context.Background()
	s, err := tgt.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	if *exec != "" {
		for _, stmt := range splitStatements(*exec) {
			if err := runStatement(ctx, s, stmt, stdout); err != nil {
				return err
			}
		}
		return s.close()
	}
	return shell(ctx, s, stdin, stdout, stderr)
}

// shell reads statements terminated by ';' and runs each; errors are printed and the shell goes on.
func shell(ctx context.Context, s session, stdin io.Reader, stdout, stderr io.Writer) error {
	in := bufio.NewScanner(stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	fmt.Fprintf(stdout, "ldpsql %s on %s. End statements with ';'. Type 'exit' to quit.\n", version, s.where())
	var pending strings.Builder
	prompt := func() {
		if pending.Len() == 0 {
			fmt.Fprint(stdout, "ldpsql> ")
		} else {
			fmt.Fprint(stdout, "     -> ")
		}
	}
	prompt()
	for in.Scan() {
		line := in.Text()
		if pending.Len() == 0 && (strings.TrimSpace(line) == "exit" || strings.TrimSpace(line) == "quit") {
			break
		}
		pending.WriteString(line)
		pending.WriteString("\n")
		if stmts, rest := completeStatements(pending.String()); len(stmts) > 0 {
			for _, stmt := range stmts {
				if err := runStatement(ctx, s, stmt, stdout); err != nil {
					if !strings.HasPrefix(err.Error(), "ERROR ") { // a server's error says so already
						fmt.Fprint(stderr, "ERROR: ")
					}
					fmt.Fprintln(stderr, err)
				}
			}
			pending.Reset()
			if strings.TrimSpace(rest) != "" {
				pending.WriteString(rest)
			}
		}
		prompt()
	}
	fmt.Fprintln(stdout)
	if err := in.Err(); err != nil {
		return err
	}
	return s.close()
}

// runStatement runs one statement and prints its result.
func runStatement(ctx context.Context, s session, stmt string, stdout io.Writer) error {
	r, err := queryAll(ctx, s, stmt)
	if err != nil {
		return err
	}
	r.print(stdout)
	return nil
}

// splitStatements splits SQL text at top-level semicolons (outside quotes and comments).
func splitStatements(s string) []string {
	stmts, rest := completeStatements(s)
	if strings.TrimSpace(rest) != "" {
		stmts = append(stmts, strings.TrimSpace(rest))
	}
	return stmts
}

// completeStatements returns the ;-terminated statements in s and the unterminated remainder.
func completeStatements(s string) (stmts []string, rest string) {
	var quote rune
	start := 0
	runes := []rune(s)
	for i := 0; i < len(runes); i++ {
		c := runes[i]
		switch {
		case quote != 0:
			if c == '\\' && quote != '`' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"' || c == '`':
			quote = c
		case c == '-' && i+1 < len(runes) && runes[i+1] == '-', c == '#':
			for i < len(runes) && runes[i] != '\n' {
				i++
			}
		case c == ';':
			if stmt := strings.TrimSpace(string(runes[start:i])); stmt != "" {
				stmts = append(stmts, stmt)
			}
			start = i + 1
		}
	}
	return stmts, string(runes[start:])
}
