package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/mrep-dev/mrep/model"
)

// ErrCorrupt: a run's rows no longer match the checksum written with them.
var ErrCorrupt = errors.New("corrupt run")

// ErrReadOnly: the database was opened read-only (a read-only file or directory).
var ErrReadOnly = errors.New("database is read-only")

// Checksum is sha256 over the dump as the store keeps it: the typed dump encoded by Go, with
// trace modules in name order (the order they are read back in). Ingest writes it; every load
// recomputes and compares it.
func Checksum(d *model.Dump) (string, error) {
	c := *d
	if d.Trace != nil {
		tr := *d.Trace
		tr.Modules = append([]model.TraceModule(nil), d.Trace.Modules...)
		sort.Slice(tr.Modules, func(i, j int) bool { return tr.Modules[i].Name < tr.Modules[j].Name })
		c.Trace = &tr
	}
	if len(c.Run.Tags) == 0 {
		c.Run.Tags = nil
	}
	b, err := json.Marshal(&c)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:]), nil
}

// queryer is what a load needs: a transaction or a connection inside one.
type queryer interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

// read runs fn in one read transaction (BEGIN DEFERRED on a dedicated connection), so every
// query of a load sees one snapshot: a run removed meanwhile is either whole or absent.
func (db *DB) read(ctx context.Context, fn func(q queryer) error) error {
	conn, err := db.sql.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN DEFERRED"); err != nil {
		return err
	}
	err = fn(conn)
	if _, rerr := conn.ExecContext(context.Background(), "ROLLBACK"); err == nil && rerr != nil {
		err = rerr
	}
	return err
}

// CheckResult is one run's verification.
type CheckResult struct {
	ID    int64  `json:"id"`
	Model string `json:"model"`
	OK    bool   `json:"ok"`
	// Unverified: the run was ingested before checksums existed.
	Unverified bool   `json:"unverified,omitempty"`
	Problem    string `json:"problem,omitempty"`
}

// Check verifies every run's rows against its checksum, and SQLite's own structure
// (PRAGMA integrity_check).
func (db *DB) Check(ctx context.Context) (integrity string, runs []CheckResult, err error) {
	if err := db.sql.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&integrity); err != nil {
		return "", nil, fmt.Errorf("integrity check: %w", err)
	}
	list, err := db.ListRuns(ctx, Filter{})
	if err != nil {
		return integrity, nil, err
	}
	for _, r := range list {
		res := CheckResult{ID: r.ID, Model: r.ModelName, OK: true}
		var sum sql.NullString
		if err := db.sql.QueryRowContext(ctx, `SELECT checksum FROM runs WHERE id = ?`, r.ID).Scan(&sum); err != nil {
			return integrity, nil, err
		}
		res.Unverified = !sum.Valid
		if _, err := db.LoadDump(ctx, r.ID); err != nil {
			res.OK, res.Problem = false, err.Error()
		}
		runs = append(runs, res)
	}
	return integrity, runs, nil
}
