// Package datasets reads the data sets ldpsql's demo, examples and experiments use, as plain Go values:
// no SQL, no storage. The WDBC breast-cancer CSV ships inside the binary (see WDBC.md for its source and
// licence), so the demo works on a machine that has only the repository.
package datasets
