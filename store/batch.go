package store

import (
	"context"
	"database/sql"
	"strings"
)

// batchRows is how many rows one INSERT carries: per-statement overhead (database/sql, cgo,
// SQLite's parser) dominates row-at-a-time inserts of 500,000 tensors; 64 rows of 20 columns
// stay well below SQLite's limit of 32,766 variables.
const batchRows = 64

// pgBatchRows is PostgreSQL's: every statement is a round trip to the server, so fewer,
// larger ones (1,024 rows of 22 columns stay below its 65,535 parameters).
const pgBatchRows = 1024

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
}

func newInserter(ctx context.Context, tx sqlTx, table string, cols ...string) *inserter {
	in := &inserter{ctx: ctx, tx: tx, table: table, cols: cols, groups: map[uint32]*insertGroup{},
		jobs: make(chan insertJob, 4), done: make(chan error, 1), free: make(chan []any, 8), rows: batchRows}
	if tx.pg {
		in.rows = pgBatchRows
	}
	go in.execute()
	return in
}

// execute runs full batches in order until jobs closes; after a failure it only drains.
func (in *inserter) execute() {
	var first error
	for j := range in.jobs {
		if first == nil {
			if _, err := j.st.ExecContext(in.ctx, j.args...); err != nil {
				first = err
			}
		}
		select {
		case in.free <- j.args[:0]:
		default:
		}
	}
	in.done <- first
}

func (in *inserter) sql(cols []string, rows int) string {
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ")"
	return "INSERT INTO " + in.table + " (" + strings.Join(cols, ", ") + ") VALUES " +
		strings.TrimSuffix(strings.Repeat(one+", ", rows), ", ")
}

// add buffers one row; row holds a value per column, nil for NULL.
func (in *inserter) add(row ...any) error {
	if in.failed != nil {
		return in.failed
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
	in.jobs <- insertJob{g.full, g.args}
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
