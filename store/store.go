// Package store keeps ingested runs in SQLite (mattn/go-sqlite3): embedded ordered migrations,
// WAL, a busy timeout and foreign keys set through the DSN, one transaction per dump.
package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	_ "github.com/mattn/go-sqlite3" // registers the "sqlite3" driver
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Sentinels callers branch on.
var (
	ErrNotFound  = errors.New("no such run")
	ErrAmbiguous = errors.New("ambiguous run selector")
)

// DefaultPath is the database used when neither --db nor MREP_DB says otherwise.
const DefaultPath = "mrep.db"

// DB is an open mrep database.
type DB struct {
	sql  *sql.DB
	path string
	now  func() time.Time
}

// Options configure Open.
type Options struct {
	Now func() time.Time // clock for ingested_at; time.Now when nil (tests inject a fixed one)
}

// DSN is the mattn/go-sqlite3 data source for path: WAL so readers never block the writer,
// a busy timeout so two writers queue instead of failing, foreign keys for cascading deletes,
// and IMMEDIATE transactions so a writer takes the lock up front (no upgrade deadlocks).
func DSN(p string) string {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_busy_timeout", "30000")
	q.Set("_foreign_keys", "on")
	q.Set("_synchronous", "NORMAL")
	q.Set("_txlock", "immediate")
	return "file:" + strings.NewReplacer("?", "%3f", "#", "%23").Replace(p) + "?" + q.Encode()
}

// Open opens (creating if needed) and migrates the database at path.
func Open(ctx context.Context, p string, opt Options) (*DB, error) {
	sdb, err := sql.Open("sqlite3", DSN(p))
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", p, err)
	}
	db := &DB{sql: sdb, path: p, now: opt.Now}
	if db.now == nil {
		db.now = time.Now
	}
	if err := db.migrate(ctx); err != nil {
		sdb.Close()
		return nil, fmt.Errorf("migrate database %s: %w", p, err)
	}
	return db, nil
}

// Close closes the database.
func (db *DB) Close() error { return db.sql.Close() }

// Path is the file the database lives in.
func (db *DB) Path() string { return db.path }

type migration struct {
	version int
	name    string
	sql     string
}

func migrations() ([]migration, error) {
	entries, err := migrationFS.ReadDir("migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		prefix, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: name must start with a number and '_'", e.Name())
		}
		body, err := migrationFS.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{v, e.Name(), string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// migrate applies the embedded migrations not yet recorded, each in its own IMMEDIATE
// transaction, so two processes opening a new database at once apply each exactly once.
func (db *DB) migrate(ctx context.Context) error {
	if _, err := db.sql.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`); err != nil {
		return err
	}
	ms, err := migrations()
	if err != nil {
		return err
	}
	for _, m := range ms {
		err := db.tx(ctx, func(tx *sql.Tx) error {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("%s: %w", m.name, err)
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.version, m.name, db.now().UTC().Format(time.RFC3339))
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// AppliedMigrations lists the recorded migration versions in order.
func (db *DB) AppliedMigrations(ctx context.Context) ([]int, error) {
	rows, err := db.sql.QueryContext(ctx, `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var vs []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	return vs, rows.Err()
}

// tx runs fn in a transaction, committing on nil and rolling back otherwise.
func (db *DB) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
