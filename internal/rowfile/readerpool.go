package rowfile

import (
	"database/sql"
	"sync"

	"github.com/duckdb/duckdb-go/v2/mapping"
)

// Every Parquet reader queries its file through DuckDB instances of its own (one thread each, so a
// reader takes one core): a database/sql handle for the schema and the scalar columns, and a C API
// connection for the list columns (listReader). Opening an instance costs about 11 ms of CPU, as much
// as reading a file's schema and row groups, and a file job opens two per part (the list connection
// at its first rows) and one per file to split it (12 for Fashion-MNIST in four files). So a closed reader's instances are kept idle for the
// next reader, up to maxIdleReaders of each kind, with DuckDB's cache of file blocks off so that an
// idle instance holds none of the data it read. A reader only reads (read_parquet, DESCRIBE,
// parquet_metadata): it leaves nothing behind in an instance for the next.
const maxIdleReaders = 8

// readerSetup is run on every reader instance when it is opened.
var readerSetup = []string{"SET threads = 1", "SET enable_external_file_cache = false"}

var (
	idleMu    sync.Mutex
	idleSQL   []*sql.DB
	idleLists []listInstance
)

// listInstance is a listReader's DuckDB instance and its connection.
type listInstance struct {
	db   mapping.Database
	conn mapping.Connection
}

// readerDB returns an idle reader instance, or opens one.
func readerDB() (*sql.DB, error) {
	idleMu.Lock()
	if n := len(idleSQL); n > 0 {
		db := idleSQL[n-1]
		idleSQL = idleSQL[:n-1]
		idleMu.Unlock()
		return db, nil
	}
	idleMu.Unlock()
	_, db, err := inMemoryDuckDB(readerSetup...)
	return db, err
}

// releaseReaderDB keeps db for the next reader, or closes it when enough are idle.
func releaseReaderDB(db *sql.DB) error {
	idleMu.Lock()
	if len(idleSQL) < maxIdleReaders {
		idleSQL = append(idleSQL, db)
		idleMu.Unlock()
		return nil
	}
	idleMu.Unlock()
	return db.Close()
}

// takeListInstance returns an idle list reader instance, if there is one.
func takeListInstance() (listInstance, bool) {
	idleMu.Lock()
	defer idleMu.Unlock()
	n := len(idleLists)
	if n == 0 {
		return listInstance{}, false
	}
	in := idleLists[n-1]
	idleLists = idleLists[:n-1]
	return in, true
}

// keepListInstance keeps in for the next list reader; false when enough are idle (the caller closes it).
func keepListInstance(in listInstance) bool {
	idleMu.Lock()
	defer idleMu.Unlock()
	if len(idleLists) >= maxIdleReaders {
		return false
	}
	idleLists = append(idleLists, in)
	return true
}
