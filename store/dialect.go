package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// The store speaks two SQL dialects: SQLite (the embedded default, a file) and PostgreSQL (a
// team's shared history, named by a postgres:// URL). The queries are written once with '?'
// placeholders; for PostgreSQL they are rewritten to $1, $2, … on their way to the driver.
// Where the SQL itself differs (DDL, id allocation, locking), the code asks db.pg.

// IsPostgres says whether a --db value names a PostgreSQL database rather than a SQLite file.
func IsPostgres(s string) bool {
	l := strings.ToLower(s) // a URL's scheme is case-insensitive (RFC 3986): Postgres:// too
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}

// libpqKeywords matches a libpq keyword/value connection string ("host=db user=me password=…"),
// which mrep does not take: given as --db it would otherwise name a SQLite file.
var libpqKeywords = regexp.MustCompile(`(?i)(^|\s)(host|hostaddr|dbname|user|password|port|sslmode|passfile|service)\s*=`)

// IsKeywordDSN says whether s is a libpq keyword string rather than a path or a URL.
func IsKeywordDSN(s string) bool { return !IsPostgres(s) && libpqKeywords.MatchString(s) }

// ErrBadURL: a --db value that is neither a SQLite path nor a PostgreSQL URL mrep can use as
// written; the message never repeats it (it may hold a password).
var ErrBadURL = errors.New("bad history location")

// CheckLocation says what is wrong with a --db value without echoing it: a libpq keyword string,
// or a PostgreSQL URL whose password (or any part) holds a character that must be percent-encoded
// (@, #, /, ?, % or a space: a second @, a fragment, a space; otherwise the driver would read part
// of the password as the host).
func CheckLocation(s string) error {
	if IsKeywordDSN(s) {
		return fmt.Errorf("%w: a libpq keyword string (host=… dbname=…) is not taken: give a postgres://USER@HOST/DB URL (password from PGPASSWORD or ~/.pgpass)", ErrBadURL)
	}
	if !IsPostgres(s) {
		return nil
	}
	rest := s[strings.Index(s, "://")+3:]
	if strings.Count(rest, "@") > 1 || strings.ContainsAny(s, "# \t\r\n") {
		return fmt.Errorf("%w: the PostgreSQL URL has a character that must be percent-encoded (a password with @, #, /, ?, %% or a space: encode it, or leave it out and use PGPASSWORD or ~/.pgpass)", ErrBadURL)
	}
	if _, err := url.Parse(s); err != nil {
		return fmt.Errorf("%w: the PostgreSQL URL does not parse (percent-encode its password, or use PGPASSWORD or ~/.pgpass)", ErrBadURL)
	}
	return nil
}

// Redact is a --db value fit to print: a PostgreSQL URL without its password (nor a password
// given as a query parameter); a SQLite path as it is.
func Redact(s string) string {
	if IsKeywordDSN(s) {
		return "(a libpq keyword string, withheld)"
	}
	if !IsPostgres(s) {
		return s
	}
	u, err := url.Parse(s)
	if err != nil || CheckLocation(s) != nil {
		// never echo what could not be parsed: it may hold a password in any place
		return strings.SplitN(s, "://", 2)[0] + "://(unparsable URL)"
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	q := u.Query()
	for k := range q {
		if strings.EqualFold(k, "password") || strings.EqualFold(k, "sslpassword") {
			q.Set(k, "xxxxx")
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// rebound caches placeholder rewrites: the inserter's statements are long and reused.
var rebound sync.Map

// rebind rewrites '?' placeholders to PostgreSQL's $n, leaving quoted text alone.
func rebind(q string) string {
	if v, ok := rebound.Load(q); ok {
		return v.(string)
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	var quote byte
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	s := b.String()
	rebound.Store(q, s)
	return s
}

// sqlDB, sqlTx and sqlConn are database/sql's handles with the dialect's placeholders: every
// query of the store goes through them.
type sqlDB struct {
	*sql.DB
	pg bool
}

func (d sqlDB) q(s string) string {
	if d.pg {
		return rebind(s)
	}
	return s
}

func (d sqlDB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return d.DB.ExecContext(ctx, d.q(q), args...)
}

func (d sqlDB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return d.DB.QueryContext(ctx, d.q(q), args...)
}

func (d sqlDB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return d.DB.QueryRowContext(ctx, d.q(q), args...)
}

func (d sqlDB) PrepareContext(ctx context.Context, q string) (*sql.Stmt, error) {
	return d.DB.PrepareContext(ctx, d.q(q))
}

// sqlTx is a transaction: database/sql's own (SQLite, and PostgreSQL's read snapshots), or
// on PostgreSQL a connection of the pool holding a BEGIN of its own (conn set), whose driver
// connection the inserter reaches for COPY (batch.go).
type sqlTx struct {
	*sql.Tx
	conn *sql.Conn
	pg   bool
}

// executor is what both kinds of transaction run statements on.
type executor interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
	PrepareContext(ctx context.Context, q string) (*sql.Stmt, error)
}

func (t sqlTx) ex() executor {
	if t.conn != nil {
		return t.conn
	}
	return t.Tx
}

func (t sqlTx) q(s string) string {
	if t.pg {
		return rebind(s)
	}
	return s
}

func (t sqlTx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.ex().ExecContext(ctx, t.q(q), args...)
}

func (t sqlTx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.ex().QueryContext(ctx, t.q(q), args...)
}

func (t sqlTx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return t.ex().QueryRowContext(ctx, t.q(q), args...)
}

func (t sqlTx) PrepareContext(ctx context.Context, q string) (*sql.Stmt, error) {
	return t.ex().PrepareContext(ctx, t.q(q))
}

type sqlConn struct {
	*sql.Conn
	pg bool
}

func (c sqlConn) q(s string) string {
	if c.pg {
		return rebind(s)
	}
	return s
}

func (c sqlConn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return c.Conn.ExecContext(ctx, c.q(q), args...)
}

func (c sqlConn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return c.Conn.QueryContext(ctx, c.q(q), args...)
}

func (c sqlConn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return c.Conn.QueryRowContext(ctx, c.q(q), args...)
}

// flag is a boolean as the store keeps it: an integer 0 or 1 in both dialects (SQLite has no
// boolean type; PostgreSQL's bigint columns take no Go bool).
func flag(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
