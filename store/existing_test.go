package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A read command (Existing) writes nothing into a file that is not an mrep history: a
// zero-length file (SQLite would take it for a new database and the migration would fill it)
// and another program's SQLite database are refused as ErrNoDatabase, byte for byte unchanged.
func TestExistingRefusesWhatIsNotAHistory(t *testing.T) {
	if IsPostgres(newDBPath(t)) {
		t.Skip("SQLite files only")
	}
	ctx := context.Background()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.db")
	sdb, err := sql.Open("sqlite3", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sdb.Exec(`CREATE TABLE notes (body TEXT)`); err != nil {
		t.Fatal(err)
	}
	sdb.Close()
	for _, p := range []string{empty, other} {
		before, _ := os.ReadFile(p)
		_, err := Open(ctx, p, Options{Existing: true})
		if !errors.Is(err, ErrNoDatabase) {
			t.Errorf("%s: %v, want ErrNoDatabase", filepath.Base(p), err)
		}
		after, _ := os.ReadFile(p)
		if !bytes.Equal(before, after) {
			t.Errorf("%s: a read open wrote into it", filepath.Base(p))
		}
	}
	// an ingest (not Existing) may still make an empty file its new history
	db, err := Open(ctx, empty, Options{})
	if err != nil {
		t.Fatalf("a write open of an empty file: %v", err)
	}
	db.Close()
}
