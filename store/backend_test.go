package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/mrep-dev/mrep/internal/pgtest"
)

// The store's tests run against SQLite, and again against PostgreSQL when
// MREP_TEST_BACKEND=postgres (make test runs both): every test opens its database through
// newDBPath/openTemp, so each one exercises the backend under test. Tests of SQLite's own file
// behaviour (pragmas, bit flips in the file, file permissions) say so and skip on PostgreSQL.

var pg *pgtest.Server

func TestMain(m *testing.M) {
	if os.Getenv("MREP_TEST_BACKEND") == "postgres" {
		s, err := pgtest.Start()
		if err != nil {
			if pgtest.Required() {
				fmt.Fprintf(os.Stderr, "store tests on PostgreSQL: %v\n", err)
				os.Exit(1)
			}
			fmt.Fprintf(os.Stderr, "SKIP store tests on PostgreSQL: %v\n", err)
			os.Exit(0)
		}
		pg = s
		code := m.Run()
		s.Stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// newDBPath is a new, empty database of the backend under test: a file path in a temporary
// directory, or a new PostgreSQL database's URL.
func newDBPath(t testing.TB) string {
	t.Helper()
	if pg == nil {
		return filepath.Join(t.TempDir(), "mrep.db")
	}
	dsn, err := pg.NewDatabase()
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// sqliteOnly skips a test of SQLite's own file behaviour on PostgreSQL.
func sqliteOnly(t testing.TB, why string) {
	t.Helper()
	if pg != nil {
		t.Skipf("SQLite only: %s", why)
	}
}

func openPath(t testing.TB, p string) *DB {
	t.Helper()
	db, err := Open(context.Background(), p, Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
