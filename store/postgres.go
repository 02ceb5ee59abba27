package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

// LockTimeout and StatementTimeout are the PostgreSQL sessions' lock_timeout and
// statement_timeout unless the URL sets them (?lock_timeout=5min).
const (
	LockTimeout      = "60s"
	StatementTimeout = "30min"
)

// openPostgres opens the mrep history in a PostgreSQL database (jackc/pgx through
// database/sql). The URL is the driver's: credentials may come from it, from PGPASSWORD or a
// pgpass file (PGPASSFILE, ~/.pgpass), and sslmode, sslrootcert and the other TLS settings
// pass through. Messages name the database by its redacted URL, never with a password.
//
// Existing (read commands) requires the schema to be there; a read-only open sets every
// transaction read-only on the server; a role that may not insert runs is opened read-only
// whatever was asked, so reads work with a read-only role and analysis results are then not
// cached.
func openPostgres(ctx context.Context, p string, opt Options) (*DB, error) {
	name := Redact(p)
	u, err := url.Parse(p)
	if err != nil {
		return nil, fmt.Errorf("open database %s: not a PostgreSQL URL", name)
	}
	q := u.Query()
	if opt.ReadOnly {
		q.Set("default_transaction_read_only", "on") // passed to the server as a run-time parameter
	}
	// a lock another session holds (a long transaction, a stuck ingest) fails a statement after
	// LockTimeout instead of stalling ingest, reads and the training hook for as long as it is
	// held; no statement runs longer than StatementTimeout. The URL's own settings win.
	for k, v := range map[string]string{"lock_timeout": LockTimeout, "statement_timeout": StatementTimeout} {
		if !q.Has(k) {
			q.Set(k, v)
		}
	}
	u.RawQuery = q.Encode()
	sdb, err := sql.Open("pgx", u.String())
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", name, redactErr(err, p))
	}
	db := &DB{sql: sqlDB{DB: sdb, pg: true}, pg: true, path: p, now: opt.Now, who: clip(opt.Who, MaxWho), readOnly: opt.ReadOnly}
	if db.now == nil {
		db.now = time.Now
	}
	fail := func(err error) (*DB, error) {
		sdb.Close()
		return nil, err
	}
	pingCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := sdb.PingContext(pingCtx); err != nil {
		return fail(fmt.Errorf("open database %s: %w", name, redactErr(err, p)))
	}
	var exists bool
	if err := sdb.QueryRowContext(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return fail(fmt.Errorf("open database %s: %w", name, redactErr(err, p)))
	}
	if (opt.Existing || opt.ReadOnly) && !exists {
		return fail(fmt.Errorf("no mrep history in %s (ingest a dump first, or check --db): %w", name, ErrNoDatabase))
	}
	if exists && !db.readOnly {
		var canWrite bool
		// (another process may be creating the schema right now: tables it has not made yet
		// are this process's to make, under the migration lock)
		if err := sdb.QueryRowContext(ctx, `SELECT to_regclass('runs') IS NULL OR to_regclass('analysis_cache') IS NULL OR
			(has_table_privilege('runs', 'INSERT') AND has_table_privilege('analysis_cache', 'INSERT'))`).Scan(&canWrite); err != nil {
			return fail(fmt.Errorf("open database %s: %w", name, redactErr(err, p)))
		}
		if !canWrite {
			if !opt.Existing {
				return fail(fmt.Errorf("%s: this role may not write the mrep history (a read-only role serves read commands only): %w", name, ErrReadOnly))
			}
			db.readOnly = true
		}
	}
	if db.readOnly {
		err = db.checkMigrated(ctx)
	} else {
		err = db.migrate(ctx)
	}
	if err != nil {
		return fail(fmt.Errorf("open database %s: %w", name, redactErr(err, p)))
	}
	if opt.IntegrityCheck {
		if res, err := db.structure(ctx); err != nil || res != "ok" {
			if err == nil {
				err = errors.New(res)
			}
			return fail(fmt.Errorf("database %s fails its structure check: %v: %w", name, err, ErrCorrupt))
		}
	}
	return db, nil
}

// redactErr keeps a password out of an error's text: drivers may echo the connection string.
func redactErr(err error, dsn string) error {
	u, perr := url.Parse(dsn)
	if perr != nil || u.User == nil {
		return err
	}
	pw, ok := u.User.Password()
	if !ok || pw == "" || !strings.Contains(err.Error(), pw) {
		return err
	}
	return redacted{msg: strings.ReplaceAll(err.Error(), pw, "xxxxx"), err: err}
}

type redacted struct {
	msg string
	err error
}

func (r redacted) Error() string { return r.msg }
func (r redacted) Unwrap() error { return r.err }

// ErrConnLost: the server closed the connection under a command (its backend was terminated,
// the server restarted, the network dropped). The open transaction rolled back.
var ErrConnLost = errors.New("the database server closed the connection (its backend was stopped, the server restarted or the network dropped); the transaction rolled back, so nothing of it was stored: run the command again")

// ConnLost wraps err with ErrConnLost when it says the connection was lost, so a user reads
// what happened and that nothing was half-stored instead of "driver: bad connection".
func ConnLost(err error) error {
	if err == nil || errors.Is(err, ErrConnLost) {
		return err
	}
	var pe *pgconn.PgError
	lost := errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.ErrUnexpectedEOF) ||
		(errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "57P") || strings.HasPrefix(pe.Code, "08"))) ||
		strings.Contains(err.Error(), "conn closed")
	if !lost {
		return err
	}
	return fmt.Errorf("%w (%v)", ErrConnLost, err)
}
