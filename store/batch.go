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

// inserter buffers rows for one table and writes them batchRows at a time with one prepared
// multi-row INSERT (and a separate statement for the final partial batch).
type inserter struct {
	ctx   context.Context
	tx    *sql.Tx
	head  string // INSERT INTO t (a, b, c) VALUES
	cols  int
	full  *sql.Stmt
	args  []any
	count int
}

func newInserter(ctx context.Context, tx *sql.Tx, head string, cols int) *inserter {
	return &inserter{ctx: ctx, tx: tx, head: head, cols: cols, args: make([]any, 0, cols*batchRows)}
}

func (in *inserter) sql(rows int) string {
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", in.cols), ", ") + ")"
	return in.head + " " + strings.TrimSuffix(strings.Repeat(one+", ", rows), ", ")
}

func (in *inserter) add(row ...any) error {
	in.args = append(in.args, row...)
	in.count++
	if in.count < batchRows {
		return nil
	}
	if in.full == nil {
		st, err := in.tx.PrepareContext(in.ctx, in.sql(batchRows))
		if err != nil {
			return err
		}
		in.full = st
	}
	_, err := in.full.ExecContext(in.ctx, in.args...)
	in.args, in.count = in.args[:0], 0
	return err
}

// flush writes the rows left over and releases the statement.
func (in *inserter) flush() error {
	if in.full != nil {
		defer in.full.Close()
	}
	if in.count == 0 {
		return nil
	}
	_, err := in.tx.ExecContext(in.ctx, in.sql(in.count), in.args...)
	in.args, in.count = in.args[:0], 0
	return err
}
