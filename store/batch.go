package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// batchRows is how many rows one INSERT carries: per-statement overhead (database/sql, cgo,
// SQLite's parser) dominates row-at-a-time inserts of 500,000 tensors; 64 rows of 20 columns
// stay well below SQLite's limit of 32,766 variables.
const batchRows = 64

// copyRows is how many rows one COPY carries on PostgreSQL, where every write transaction is
// a connection of its own (DB.connTx): COPY streams rows in the binary format, with no statement to parse
// or parameters to bind per row.
const copyRows = 8192

// inserter buffers rows for one table and writes them batchRows at a time with prepared
// multi-row INSERTs.
//
// NULLs are not bound: rows are grouped by which of their values are non-NULL and each group
// gets an INSERT naming only those columns (the others take their default, NULL in every
// table this writes). Binding is a cgo call per value; tensors of a model without statistics
// have 10 of 20 columns NULL, and binding them was a fifth of ingest.
//
// Full batches are executed by one goroutine while the caller builds the next ones: SQLite
// works on one core, and building rows (shapes as JSON, argument lists) took a quarter of
// the time beside it. The caller must call flush, which waits for the executor and reports
// its first error; add reports it as soon as it is known.
type inserter struct {
	ctx    context.Context
	tx     sqlTx
	table  string
	cols   []string
	groups map[uint32]*insertGroup
	jobs   chan insertJob
	done   chan error // the executor's first error (or nil), once jobs is closed
	free   chan []any // argument slices handed back for reuse
	failed error
	closed bool
	rows   int // rows per full batch
	// copy: rows go to PostgreSQL by COPY on the transaction's connection, copyBuf holding
	// the batch being built
	copy    *sql.Conn
	copyBuf [][]any
}

// insertGroup is the rows of one null pattern.
type insertGroup struct {
	cols  []string // the non-NULL columns
	full  *sql.Stmt
	args  []any
	count int
}

type insertJob struct {
	st   *sql.Stmt
	args []any
	rows [][]any // a COPY's rows (st nil)
}

func newInserter(ctx context.Context, tx sqlTx, table string, cols ...string) *inserter {
	in := &inserter{ctx: ctx, tx: tx, table: table, cols: cols, groups: map[uint32]*insertGroup{},
		jobs: make(chan insertJob, 4), done: make(chan error, 1), free: make(chan []any, 8), rows: batchRows}
	if tx.pg && tx.conn != nil {
		in.copy, in.rows = tx.conn, copyRows
	}
	go in.execute()
	return in
}

// execute runs full batches in order until jobs closes; after a failure it only drains.
func (in *inserter) execute() {
	var first error
	for j := range in.jobs {
		if first == nil {
			if j.st == nil {
				first = in.copyFrom(j.rows)
			} else {
				_, first = j.st.ExecContext(in.ctx, j.args...)
			}
		}
		if j.st != nil {
			select {
			case in.free <- j.args[:0]:
			default:
			}
		}
	}
	in.done <- first
}

func (in *inserter) sql(cols []string, rows int) string {
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ")"
	return "INSERT INTO " + in.table + " (" + strings.Join(cols, ", ") + ") VALUES " +
		strings.TrimSuffix(strings.Repeat(one+", ", rows), ", ")
}

// copyFrom writes rows with COPY on the transaction's own connection. database/sql holds the
// connection's lock while the driver's connection is out, so a COPY never interleaves with a
// statement of the transaction's other goroutines.
func (in *inserter) copyFrom(rows [][]any) error {
	return in.copy.Raw(func(dc any) error {
		c, ok := dc.(interface{ Conn() *pgx.Conn })
		if !ok {
			return fmt.Errorf("copy into %s: the driver connection is a %T, not pgx's", in.table, dc)
		}
		_, err := c.Conn().CopyFrom(in.ctx, pgx.Identifier{in.table}, in.cols, pgx.CopyFromRows(rows))
		return err
	})
}

// add buffers one row; row holds a value per column, nil for NULL.
func (in *inserter) add(row ...any) error {
	if in.failed != nil {
		return in.failed
	}
	if in.copy != nil {
		in.copyBuf = append(in.copyBuf, append([]any(nil), row...))
		if len(in.copyBuf) >= in.rows {
			in.jobs <- insertJob{rows: in.copyBuf}
			in.copyBuf = make([][]any, 0, in.rows)
		}
		return nil
	}
	var mask uint32
	for i, v := range row {
		if v != nil {
			mask |= 1 << i
		}
	}
	g := in.groups[mask]
	if g == nil {
		g = &insertGroup{}
		for i, c := range in.cols {
			if mask&(1<<i) != 0 {
				g.cols = append(g.cols, c)
			}
		}
		g.args = make([]any, 0, len(g.cols)*in.rows)
		in.groups[mask] = g
	}
	for _, v := range row {
		if v != nil {
			g.args = append(g.args, v)
		}
	}
	g.count++
	if g.count < in.rows {
		return nil
	}
	if g.full == nil {
		st, err := in.tx.PrepareContext(in.ctx, in.sql(g.cols, in.rows))
		if err != nil {
			in.failed = err
			return err
		}
		g.full = st
	}
	in.jobs <- insertJob{st: g.full, args: g.args}
	select {
	case a := <-in.free:
		g.args = a
	default:
		g.args = make([]any, 0, cap(g.args))
	}
	g.count = 0
	return nil
}

// stop ends the executor and returns its first error. It is safe to call more than once, and
// callers defer it so that no executor outlives its transaction on an early return.
func (in *inserter) stop() error {
	if in.closed {
		return nil
	}
	in.closed = true
	close(in.jobs)
	err := <-in.done
	for _, g := range in.groups {
		if g.full != nil {
			g.full.Close()
		}
	}
	return err
}

// flush writes the rows left over, waits for the executor and releases the statements.
func (in *inserter) flush() error {
	err := in.stop()
	if in.copy != nil {
		if err == nil && in.failed == nil && len(in.copyBuf) > 0 {
			err = in.copyFrom(in.copyBuf)
		}
		in.copyBuf = nil
	}
	for _, g := range in.groups {
		if err != nil || in.failed != nil || g.count == 0 {
			continue
		}
		_, err = in.tx.ExecContext(in.ctx, in.sql(g.cols, g.count), g.args...)
		g.args, g.count = g.args[:0], 0
	}
	if in.failed != nil {
		return in.failed
	}
	return err
}
