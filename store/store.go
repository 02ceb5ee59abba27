// Package store keeps ingested runs, the history, in SQLite (mattn/go-sqlite3, a file: the
// embedded default) or PostgreSQL (jackc/pgx, a team's shared server): one ordered set of
// embedded migrations, one transaction per ingest, a checksum over every run verified on every
// read. SQLite gets WAL, a busy timeout and foreign keys through the DSN; PostgreSQL gets
// sequences, deferred foreign keys and snapshot reads (dialect.go, postgres.go).
package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/mattn/go-sqlite3" // registers the "sqlite3" driver
)

//go:embed migrations
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
	sql      sqlDB
	pg       bool   // PostgreSQL, not SQLite
	path     string // the SQLite file, or the PostgreSQL URL (Path gives it redacted)
	now      func() time.Time
	who      string
	readOnly bool
	// newer is the schema version of a history written by a newer mrep (0: none): it is read as
	// far as this mrep knows it and never written.
	newer int
}

// Options configure Open.
type Options struct {
	Now func() time.Time // clock for ingested_at; time.Now when nil (tests inject a fixed one)
	// Existing: the database must already exist (read commands: a mistyped --db is an error,
	// not a new empty database). It is opened read-only when its file or directory is.
	Existing bool
	// ReadOnly opens read-only whatever the permissions say.
	ReadOnly bool
	// IntegrityCheck runs PRAGMA integrity_check on open and refuses a damaged file.
	IntegrityCheck bool
	// Who is recorded with every run this process stores (user@host; tests inject a fixed
	// one). At most MaxWho bytes are kept.
	Who string
}

// MaxWho bounds the recorded ingester.
const MaxWho = 256

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// ErrNoDatabase: a read command named a database that does not exist.
var ErrNoDatabase = errors.New("no database")

// ErrNewerSchema: the history was written by a newer mrep; this one reads it but does not write.
var ErrNewerSchema = errors.New("written by a newer mrep")

// Writable says whether the history may be written: nil, ErrReadOnly, or (a newer mrep's
// history) an error wrapping ErrNewerSchema that names both schema versions.
func (db *DB) Writable() error { return db.writable() }

// writable says whether the history may be written: not opened read-only, not of a newer
// mrep's schema (a migration this mrep does not know may have added what a write must fill).
func (db *DB) writable() error {
	if db.newer > 0 {
		ms, _ := migrations()
		known := 0
		if len(ms) > 0 {
			known = ms[len(ms)-1].version
		}
		return fmt.Errorf("%s has schema version %d, this mrep knows up to %d: upgrade mrep to write it; nothing was changed: %w", db.path, db.newer, known, ErrNewerSchema)
	}
	if db.readOnly {
		return ErrReadOnly
	}
	return nil
}

// ReadOnly says whether the database was opened read-only.
func (db *DB) ReadOnly() bool { return db.readOnly }

// DSN is the mattn/go-sqlite3 data source for path: WAL so readers never block the writer,
// a busy timeout so two writers queue instead of failing, foreign keys for cascading deletes,
// and IMMEDIATE transactions so a writer takes the lock up front (no upgrade deadlocks).
//
// The path is a path, not a URI: '%', '?' and '#' in it are escaped so SQLite's URI parser
// gives back the same bytes.
func DSN(p string) string { return dsn(p, false) }

func dsn(p string, readOnly bool) string {
	q := url.Values{}
	q.Set("_busy_timeout", "30000")
	q.Set("_foreign_keys", "on")
	if readOnly {
		q.Set("mode", "ro")
		if immutable(p) {
			q.Set("immutable", "1")
		}
	} else {
		q.Set("_journal_mode", "WAL")
		q.Set("_synchronous", "NORMAL")
		q.Set("_txlock", "immediate")
	}
	return "file:" + strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(p) + "?" + q.Encode()
}

// immutable says whether a read-only open must also tell SQLite the file cannot change. A WAL
// database opened with mode=ro still creates its -shm index beside the file; in a directory
// this process cannot write (a read-only mount, a teammate's shared folder) that fails every
// read with "attempt to write a readonly database". With no -wal file beside it the database
// is wholly in the main file, so immutable=1 reads it without the index. Where a -wal file
// exists its pages are not in the main file: immutable would read a stale database, so the
// plain read-only open is kept and its error stands (SQLite then needs the -shm to exist).
func immutable(p string) bool {
	if syscall.Access(filepath.Dir(p), 2) == nil { // W_OK: SQLite can make its -shm
		return false
	}
	_, err := os.Lstat(p + "-wal")
	return errors.Is(err, os.ErrNotExist)
}

// writable says whether this process may write the file and create files beside it (WAL).
func writable(p string) bool {
	return syscall.Access(p, 2) == nil && syscall.Access(filepath.Dir(p), 2) == nil // W_OK
}

// Open opens (creating if needed) and migrates the database at path. Opening and migrating a
// new database is retried while another process holds the lock (parallel first opens).
func Open(ctx context.Context, p string, opt Options) (*DB, error) {
	if err := CheckLocation(p); err != nil {
		return nil, fmt.Errorf("open database %s: %w", Redact(p), err)
	}
	if IsPostgres(p) {
		return openPostgres(ctx, p, opt)
	}
	readOnly := opt.ReadOnly
	if opt.Existing || opt.ReadOnly {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("no database at %s (ingest a dump first, or check --db): %w", p, ErrNoDatabase)
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%s is not a database file: %w", p, ErrNoDatabase)
		}
		if fi.Size() == 0 {
			// SQLite would take an empty file for a new database, and the migration would
			// write mrep's tables into it: a read command writes nothing
			return nil, fmt.Errorf("%s is empty (0 bytes): no mrep history in it (ingest a dump first, or check --db): %w", p, ErrNoDatabase)
		}
		readOnly = readOnly || !writable(p)
	} else if _, err := os.Stat(p); err == nil && !writable(p) {
		// A write would fail half-way with SQLite's "attempt to write a readonly database";
		// say which permission is missing before anything starts.
		return nil, fmt.Errorf("%s cannot be written by this user (the file or its directory is read-only; SQLite also writes -wal and -shm files beside it): %w", p, ErrReadOnly)
	}
	if opt.Existing && !readOnly {
		// a read command migrates an older mrep history, but never writes into a SQLite file
		// that is not one (another program's database named by --db): looked at read-only
		// first, since even switching the journal to WAL rewrites the file's header
		if err := isHistory(ctx, p); err != nil {
			return nil, err
		}
	}
	var db *DB
	err := retryBusy(ctx, func() error {
		sdb, err := sql.Open("sqlite3", dsn(p, readOnly))
		if err != nil {
			return err
		}
		db = &DB{sql: sqlDB{DB: sdb}, path: p, now: opt.Now, who: clip(opt.Who, MaxWho), readOnly: readOnly}
		if db.now == nil {
			db.now = time.Now
		}
		if readOnly {
			err = db.checkMigrated(ctx)
		} else {
			err = db.migrate(ctx)
		}
		if err != nil {
			sdb.Close()
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", p, err)
	}
	if opt.IntegrityCheck {
		res, err := db.structure(ctx)
		if err != nil || res != "ok" {
			db.Close()
			if err == nil {
				err = errors.New(res)
			}
			return nil, fmt.Errorf("database %s fails SQLite's integrity check: %v: %w", p, err, ErrCorrupt)
		}
	}
	return db, nil
}

// isHistory says whether the SQLite file at p holds mrep's tables, reading it only.
func isHistory(ctx context.Context, p string) error {
	sdb, err := sql.Open("sqlite3", dsn(p, true))
	if err != nil {
		return fmt.Errorf("open database %s: %w", p, err)
	}
	defer sdb.Close()
	var n int
	if err := sdb.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name = 'schema_migrations'`).Scan(&n); err != nil {
		return fmt.Errorf("open database %s: %w", p, err)
	}
	if n == 0 {
		return fmt.Errorf("no mrep history in %s (a SQLite database without mrep's tables; ingest a dump first, or check --db): %w", p, ErrNoDatabase)
	}
	return nil
}

// retryBusy retries fn while SQLite reports the database locked or busy: switching a new file
// to WAL and creating the first tables take locks that the busy handler does not always wait
// for. It gives up after 30 s.
func retryBusy(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	wait := 5 * time.Millisecond
	for {
		err := fn()
		var se sqlite3.Error
		if err == nil || !errors.As(err, &se) || (se.Code != sqlite3.ErrBusy && se.Code != sqlite3.ErrLocked) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}

// checkMigrated: a read-only database cannot be migrated, so it must be current already.
func (db *DB) checkMigrated(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	have, err := db.AppliedMigrations(ctx)
	if err != nil {
		return err
	}
	if len(have) < len(ms) {
		return fmt.Errorf("the database was written by an older mrep and needs migrating, but it is read-only: open it once where it is writable: %w", ErrReadOnly)
	}
	return nil
}

// Close closes the database.
func (db *DB) Close() error { return db.sql.Close() }

// Path is the file the database lives in, or its PostgreSQL URL without the password: what
// messages may print.
func (db *DB) Path() string { return Redact(db.path) }

// Postgres says whether the database is a PostgreSQL one.
func (db *DB) Postgres() bool { return db.pg }

type migration struct {
	version int
	name    string
	sql     string
	code    func(ctx context.Context, tx sqlTx) error // a migration SQL cannot express
	pgSQL   string                                    // the PostgreSQL text where it differs
}

func migrations() ([]migration, error) {
	entries, err := migrationFS.ReadDir("migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		if e.IsDir() {
			continue // migrations/postgres holds the PostgreSQL text of those that differ
		}
		prefix, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: name must start with a number and '_'", e.Name())
		}
		body, err := migrationFS.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		m := migration{version: v, name: e.Name(), sql: string(body), pgSQL: string(body)}
		if pg, err := migrationFS.ReadFile(path.Join("migrations", "postgres", e.Name())); err == nil {
			m.pgSQL = string(pg)
		}
		ms = append(ms, m)
	}
	if pgs, err := migrationFS.ReadDir("migrations/postgres"); err == nil {
		for _, e := range pgs {
			if _, err := migrationFS.ReadFile(path.Join("migrations", e.Name())); err != nil {
				return nil, fmt.Errorf("migration postgres/%s has no SQLite counterpart: one ordered set serves both", e.Name())
			}
		}
	}
	ms = append(ms, codeMigrations...)
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i := 1; i < len(ms); i++ {
		if ms[i].version == ms[i-1].version {
			return nil, fmt.Errorf("migrations %s and %s share version %d", ms[i-1].name, ms[i].name, ms[i].version)
		}
	}
	return ms, nil
}

// migrate applies the embedded migrations not yet recorded, each in its own IMMEDIATE
// transaction, so two processes opening a new database at once apply each exactly once.
//
// On PostgreSQL each migration's transaction first takes a transaction-scoped advisory lock:
// its DDL takes no lock that would make a second process wait for the first (two CREATE
// TABLE IF NOT EXISTS at once fail there), so the lock orders them.
func (db *DB) migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	// a current history needs no DDL: a writer role without CREATE on the schema (a team's
	// least-privilege account on PostgreSQL) opens it as the owner does
	if have, err := db.AppliedMigrations(ctx); err == nil && len(ms) > 0 {
		known := map[int]bool{}
		top := 0
		for _, v := range have {
			known[v] = true
			top = max(top, v)
		}
		if top > ms[len(ms)-1].version {
			db.readOnly, db.newer = true, top // a newer mrep's history: read, never written
			return nil
		}
		current := true
		for _, m := range ms {
			current = current && known[m.version]
		}
		if current {
			return nil
		}
	}
	if err := db.migrateDDL(ctx, ms); err != nil {
		if isPermission(err) {
			return fmt.Errorf("%w: creating or migrating mrep's tables needs the CREATE right on the schema (PostgreSQL: GRANT CREATE ON SCHEMA public TO this role, or open the history once as its owner); reading and writing runs afterwards needs only SELECT, INSERT, UPDATE and DELETE on its tables", err)
		}
		return err
	}
	return nil
}

// isPermission says whether err is the database refusing a right (PostgreSQL's SQLSTATE 42501,
// insufficient_privilege).
func isPermission(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "SQLSTATE 42501") || strings.Contains(err.Error(), "permission denied"))
}

// migrateDDL creates the migrations table and applies the migrations it does not record.
func (db *DB) migrateDDL(ctx context.Context, ms []migration) error {
	create := `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`
	if err := db.tx(ctx, func(tx sqlTx) error {
		if err := lockMigrations(ctx, tx); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, create)
		return err
	}); err != nil {
		return err
	}
	for _, m := range ms {
		err := db.tx(ctx, func(tx sqlTx) error {
			if err := lockMigrations(ctx, tx); err != nil {
				return err
			}
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if m.code != nil {
				if err := m.code(ctx, tx); err != nil {
					return fmt.Errorf("%s: %w", m.name, err)
				}
			} else if _, err := tx.ExecContext(ctx, m.text(tx.pg)); err != nil {
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

// lockMigrations serialises migrating processes on PostgreSQL (SQLite's IMMEDIATE
// transactions already do).
func lockMigrations(ctx context.Context, tx sqlTx) error {
	if !tx.pg {
		return nil
	}
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7270051)`) // any constant, mrep's own
	return err
}

func (m migration) text(pg bool) string {
	if pg {
		return m.pgSQL
	}
	return m.sql
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
//
// On PostgreSQL the transaction is a pooled connection with a BEGIN of its own, so that the
// inserter can COPY rows on the same connection (database/sql's Tx does not expose it).
func (db *DB) tx(ctx context.Context, fn func(sqlTx) error) error {
	if db.pg {
		return db.connTx(ctx, fn)
	}
	t, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	tx := sqlTx{Tx: t, pg: db.pg}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (db *DB) connTx(ctx context.Context, fn func(sqlTx) error) error {
	c, err := db.sql.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, "BEGIN"); err != nil {
		return err
	}
	tx := sqlTx{conn: c, pg: true}
	if err := fn(tx); err != nil {
		// a connection whose rollback fails (a cancelled context) must not go back to the
		// pool mid-transaction
		if _, rerr := c.ExecContext(context.Background(), "ROLLBACK"); rerr != nil {
			_ = c.Raw(func(any) error { return driver.ErrBadConn })
		}
		return err
	}
	_, err = c.ExecContext(ctx, "COMMIT")
	return err
}
