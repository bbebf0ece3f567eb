package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// etlCmd is `ldpsql etl …`: it runs ldpsql-etl (cmd/ldpsql-etl) with the same arguments. Beam and its
// runners live in that binary of their own, not in this one: linking them here made ldpsql 289 MB
// instead of 170 MB and its link 28 s instead of 15 s on two cores, for every user and every test that
// builds ldpsql, while only ETL jobs need them. ldpsql-etl is looked for beside this binary (where
// scripts/build.sh puts it), then on $PATH.
func etlCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	path, err := etlBinary()
	if err != nil {
		return err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	if err := cmd.Run(); err != nil {
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			// ldpsql-etl has printed its error.
			return fmt.Errorf("ldpsql-etl exited with status %d", ee.ExitCode())
		}
		return err
	}
	return nil
}

func etlBinary() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "ldpsql-etl")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath("ldpsql-etl"); err == nil {
		return p, nil
	}
	return "", errors.New("ldpsql-etl is not beside ldpsql nor on $PATH: build it with scripts/build.sh (or go build -o bin/ldpsql-etl ./cmd/ldpsql-etl)")
}
